"""Files the server writes and reads: run and model exports, uploads, trained checkpoints, and a
disk budget over all of them (no gradio here; the UI passes paths in and gets paths back).

Three rules, each from a measured failure:
- an export's size is known *before* it is written, and refused over ``PLAYGROUND_MAX_EXPORT_MB``;
  the attention is streamed map by map, never gathered into Python lists (a 1024-token GPT-2 small
  run once took 3 minutes, 2.1 GB and 13 GB of RAM as JSON);
- a file is stored once: exports are written inside Gradio's cache folder, which Gradio serves as it
  is (a returned path anywhere else is copied there first), and uploads are checked where Gradio put
  them, then hard-linked (not copied) into the work dir, or deleted at once when refused;
- the work dir and Gradio's cache stay under ``PLAYGROUND_DISK_BUDGET_GB``: after every write the
  least recently used files go first, never a protected one (``protect()`` registers who decides).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from playground.engine.config import ConfigError, check_build_size, check_memory
from playground.engine.model import GPTModel, attention_probs
from playground.engine.tokenizer import load_tokenizer
from playground.engine.weights import (
    WeightLoadError,
    check_file_finite,
    check_header,
    checkpoint_config,
    read_header,
    save_checkpoint,
)
from playground.errors import UserError
from playground.server.export_formats import (
    JSON_DECIMALS,
    finite_json,
    json_attention_bytes,
    npz_attention_bytes,
    write_json,
    write_npz,
)

MAX_UPLOAD_BYTES = int(float(os.environ.get("PLAYGROUND_MAX_UPLOAD_MB", "700")) * 1e6)
DEFAULT_MAX_EXPORT_MB = 1000  # a full 1024-token GPT-2 small run is 756 MB as JSON, 604 MB as .npz
DEFAULT_DISK_BUDGET_GB = 5


class ExportTooLarge(UserError):
    """An export refused before anything was written. ``size`` and ``limit`` are bytes; ``options``
    maps a smaller choice (keyword arguments of ``export_run``) to its size."""

    def __init__(
        self, key: str, template: str, /, *, size: int, limit: int, options: dict[str, tuple[dict, int]], **fields
    ):
        super().__init__(key, template, size=_mb(size), limit=_mb(limit), **fields)
        self.size, self.limit, self.options = size, limit, options


def max_export_bytes() -> int:
    return int(float(os.environ.get("PLAYGROUND_MAX_EXPORT_MB", DEFAULT_MAX_EXPORT_MB)) * 1e6)


def disk_budget_bytes() -> int:
    return int(float(os.environ.get("PLAYGROUND_DISK_BUDGET_GB", DEFAULT_DISK_BUDGET_GB)) * 1e9)


# ----------------------------------------------------------------------------------------------
# Where files live


def work_dir() -> Path:
    """Server-side folder for checkpoints the app itself keeps (uploads by content hash, trained
    models). Names inside are always generated, never taken from user input."""
    base = Path(os.environ.get("PLAYGROUND_WORK_DIR", Path(tempfile.gettempdir()) / "gpt-playground"))
    base.mkdir(parents=True, exist_ok=True)
    return base


def gradio_cache_dir() -> Path:
    """The folder Gradio 6 keeps uploads in and serves files from: ``GRADIO_TEMP_DIR``, else
    ``<tmp>/gradio`` (gradio.utils.get_upload_folder). A handler's returned path that is already
    inside it is served as is; any other path is first copied into it (processing_utils.
    save_file_to_cache), so a file written elsewhere is stored twice."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()


def exports_dir() -> Path:
    """Where exports are written: ``PLAYGROUND_EXPORT_DIR``, else a folder inside Gradio's cache."""
    base = Path(os.environ.get("PLAYGROUND_EXPORT_DIR") or gradio_cache_dir() / "gpt-playground-exports")
    base.mkdir(parents=True, exist_ok=True)
    return base


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except (ValueError, OSError):
        return False


def _touch(path: Path) -> None:
    """Mark a file as just used: the disk budget evicts the least recently used first."""
    try:
        os.utime(path)
    except OSError:
        pass


def _write_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` then rename: a crash or a refusal mid-write never leaves a partial file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# ----------------------------------------------------------------------------------------------
# Disk budget

_PROTECTORS: list[Callable[[], Iterable]] = []
_IN_PROGRESS_SECONDS = 600  # temp files younger than this may still be being written


def protect(paths_in_use: Callable[[], Iterable]) -> Callable[[], Iterable]:
    """Register a callable returning paths the disk budget must never delete (e.g. the checkpoints
    of live recipes). Usable as a decorator."""
    _PROTECTORS.append(paths_in_use)
    return paths_in_use


def protected_paths(extra: Iterable = ()) -> set[Path]:
    paths = {Path(p).resolve() for p in extra if p}
    for fn in list(_PROTECTORS):
        paths.update(Path(p).resolve() for p in fn() if p)
    return paths


def managed_dirs() -> list[Path]:
    """The folders the disk budget covers: what this app writes in the work dir (only its own
    subfolders: PLAYGROUND_WORK_DIR may be a folder holding other things), the exports, and Gradio's
    cache, where every upload lands first."""
    dirs = [work_dir() / "uploads", work_dir() / "trained", exports_dir(), gradio_cache_dir()]
    return [d for d in dirs if d.is_dir()]


def enforce_disk_budget(
    budget_bytes: int | None = None, *, protected: Iterable = (), dirs: Sequence | None = None
) -> list[Path]:
    """Delete the least recently used files (oldest mtime) under ``dirs`` (default:
    ``managed_dirs()``) until their total is within the budget; return what was deleted.

    Hard links count once and go together (an upload linked into the work dir frees nothing unless
    both names go). Never deleted: protected paths (``protected`` and every ``protect()`` callable),
    and temporary files that may still be being written.
    """
    budget = disk_budget_bytes() if budget_bytes is None else int(budget_bytes)
    roots = [Path(d) for d in (dirs if dirs is not None else managed_dirs())]
    keep = protected_paths(protected)
    now = time.time()
    inodes: dict[tuple[int, int], dict] = {}
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = Path(folder) / name
                try:
                    st = path.stat(follow_symlinks=False)
                except OSError:
                    continue
                entry = inodes.setdefault(
                    (st.st_dev, st.st_ino), {"size": st.st_size, "mtime": 0.0, "paths": set(), "keep": False}
                )
                entry["mtime"] = max(entry["mtime"], st.st_mtime)
                entry["paths"].add(path)
                in_progress = (
                    name.startswith(".") or name.endswith(".tmp")
                ) and now - st.st_mtime < _IN_PROGRESS_SECONDS
                if in_progress or path.resolve() in keep:
                    entry["keep"] = True
    total = sum(e["size"] for e in inodes.values())
    deleted: list[Path] = []
    for entry in sorted(inodes.values(), key=lambda e: e["mtime"]):
        if total <= budget:
            break
        if entry["keep"]:
            continue
        for path in entry["paths"]:
            try:
                path.unlink()
                deleted.append(path)
            except OSError:
                pass
            _remove_empty_parents(path.parent, roots)
        total -= entry["size"]
    return deleted


def _remove_empty_parents(folder: Path, roots: list[Path]) -> None:
    """Gradio keeps each file in a folder named by its hash: drop the folder once it is empty."""
    resolved_roots = {r.resolve() for r in roots}
    while folder.resolve() not in resolved_roots and any(_inside(folder, r) for r in roots):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


# ----------------------------------------------------------------------------------------------
# Run export: sizes first, then attention streamed map by map


def _window_attention(model: GPTModel, run, layers: Sequence[int]):
    """A function i -> (H, T, T) float32 probabilities of ``layers[i]``. Queries and keys come from
    ``session.run_attention``: the run's cached trace when the attention views already computed it
    (as they do after every generation), else one forward. Each layer's maps are computed only when
    they are written."""
    from playground.server.session import run_attention  # session imports this module

    _, qk = run_attention(model, run)

    def layer(i: int) -> np.ndarray:
        q, k = qk[layers[i]]  # (H, T, head_dim) each
        probs = attention_probs(q.unsqueeze(0), k.unsqueeze(0))[0].numpy()  # (H, T, T)
        if not np.isfinite(probs).all():
            raise UserError(
                "export.non_finite",
                "Layer {layer}'s attention contains NaN or infinity (the model's numbers overflow); the export "
                "is refused.",
                layer=layers[i],
            )
        return probs

    return layer


def _run_metadata(run, model: GPTModel, start: int, layers: list[int]) -> dict:
    from playground.server.replay import replay_record
    from playground.server.session import describe_recipe  # session imports this module

    tok = load_tokenizer()
    steps = [
        {
            "index": s.index,
            "token_id": s.token_id,
            "token": tok.decode([s.token_id]),
            "prob": s.prob,
            "raw_prob": s.raw_prob,
            "rank": s.rank,
            "entropy_bits": s.entropy,
            "top": [[i, p] for i, p in s.top],
        }
        for s in run.steps
    ]
    return finite_json(
        {
            "model": describe_recipe(run.recipe),
            "config": model.cfg.to_dict(),
            "settings": run.settings,
            "prompt_ids": run.prompt_ids,
            "prompt_tokens_cropped": run.n_cropped,
            "token_ids": run.token_ids,
            "tokens": [p.display for p in tok.pieces(run.token_ids)],
            "steps": steps,
            "attention_window_start": start,
            "attention_layers": layers,
            "replay": replay_record(run, model),  # what replay.read_record reads back to reproduce the run
        }
    )


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:.2f} MB"


def _check_export_size(size: int, limit: int, fmt: str, n_layers: int, n_heads: int, T: int, options: dict) -> None:
    fits = {name: (kwargs, s) for name, (kwargs, s) in options.items() if s <= limit}
    advice = "; ".join(f"{name}: {_mb(s)}" for name, (_, s) in fits.items())
    what_next = (
        UserError("export.smaller_choices", "Smaller choices that fit: {advice}.", advice=advice)
        if fits
        else UserError("export.shorter_run", "Generate a shorter run to export it.")
    )
    raise ExportTooLarge(
        "export.too_large",
        "This export would be {size} as .{fmt} ({n_layers} layers × {n_heads} heads × {T:,}×{T:,} attention "
        "values), over the {limit} limit (PLAYGROUND_MAX_EXPORT_MB). {what_next}",
        size=size,
        limit=limit,
        options=fits,
        fmt=fmt,
        n_layers=n_layers,
        n_heads=n_heads,
        T=T,
        what_next=what_next,
    )


def export_run(
    run,
    model: GPTModel,
    fmt: str = "json",
    *,
    layers: Sequence[int] | None = None,
    dtype: str = "float32",
    decimals: int = JSON_DECIMALS,
) -> Path:
    """Write the run (tokens, probabilities, attention of the chosen layers, default all) to a file
    named by its content, inside Gradio's cache (served without a second copy); return its path.

    The size is computed first and ExportTooLarge (a ValueError) raised over the limit, before
    anything is written. JSON attention is ``[layer][head][query][key]`` probabilities with
    ``decimals`` decimals (masked future positions are exactly ``0``); ``.npz`` stores it in
    ``dtype`` (float32 or float16) with deflate. The same export asked twice is written once.
    """
    if fmt not in ("json", "npz"):
        raise UserError("export.unknown_format", "Unknown export format {fmt!r}; use json or npz.", fmt=fmt)
    if dtype not in ("float32", "float16"):
        raise UserError(
            "export.unknown_dtype", "Unknown attention dtype {dtype!r}; use float32 or float16.", dtype=dtype
        )
    if not 1 <= int(decimals) <= 8:
        raise UserError("export.decimals", "decimals must be between 1 and 8, got {decimals}.", decimals=decimals)
    cfg = model.cfg
    chosen = list(range(cfg.n_layers)) if layers is None else sorted({int(i) for i in layers})
    if not chosen or not all(0 <= i < cfg.n_layers for i in chosen):
        raise UserError(
            "export.layers",
            "Choose layers between 0 and {last}, got {layers}.",
            last=cfg.n_layers - 1,
            layers=list(layers or []),
        )
    start, window = run.window(cfg.context_length)
    L, H, T = len(chosen), cfg.n_heads, len(window)

    def plan(fmt, layers, dtype="float32", decimals=JSON_DECIMALS) -> tuple[int, dict, bytes]:
        """(file size in bytes, metadata, its JSON): exact for JSON, an upper bound for .npz."""
        meta = _run_metadata(run, model, start, layers)
        head = json.dumps(meta, ensure_ascii=False, allow_nan=False).encode()
        if fmt == "json":
            return len(head) + len(b',"attention":') + json_attention_bytes(len(layers), H, T, decimals), meta, head
        return len(head) + 8 * len(run.token_ids) + npz_attention_bytes(len(layers), H, T, dtype), meta, head

    size, meta, head = plan(fmt, chosen, dtype, decimals)
    limit = max_export_bytes()
    if size > limit:
        choices = {".npz (float16)": {"fmt": "npz", "dtype": "float16"}}
        if fmt == "json":
            choices |= {".npz": {"fmt": "npz"}, "3 decimals": {"fmt": "json", "decimals": 3}}
        options = {
            name: (kw, plan(kw["fmt"], chosen, kw.get("dtype", "float32"), kw.get("decimals", JSON_DECIMALS))[0])
            for name, kw in choices.items()
            if kw != {"fmt": fmt, "dtype": dtype}
        }
        n_fit = L - 1
        while n_fit > 0 and plan(fmt, chosen[:n_fit], dtype, decimals)[0] > limit:
            n_fit -= 1
        if n_fit:
            options[f"layers {chosen[0]}–{chosen[n_fit - 1]} only"] = (
                {"fmt": fmt, "layers": chosen[:n_fit], "dtype": dtype, "decimals": decimals},
                plan(fmt, chosen[:n_fit], dtype, decimals)[0],
            )
        _check_export_size(size, limit, fmt, L, H, T, options)

    stem = hashlib.sha256(json.dumps([meta, fmt, dtype, decimals], sort_keys=True).encode()).hexdigest()[:16]
    path = exports_dir() / f"run-{stem}.{fmt}"
    if path.is_file():
        _touch(path)
        return path
    layer_probs = _window_attention(model, run, chosen)
    if fmt == "json":
        _write_atomically(path, lambda tmp: write_json(tmp, head, L, layer_probs, decimals))
    else:
        _write_atomically(path, lambda tmp: write_npz(tmp, meta, run.token_ids, L, H, T, layer_probs, dtype))
    enforce_disk_budget(protected=[path])
    return path


# ----------------------------------------------------------------------------------------------
# Model export, uploads, trained checkpoints


def export_model(model: GPTModel, recipe: dict) -> Path:
    """The model as a safetensors checkpoint the upload box accepts back, inside Gradio's cache."""
    from playground.server.session import describe_recipe, recipe_key

    # The recipe names the model, and a sample of every tensor identifies the weights themselves: an
    # export written by an earlier version of the code (another initialisation) is never handed out.
    digest = hashlib.sha256(recipe_key(recipe).encode())
    for name, tensor in model.state_dict().items():
        flat = tensor.detach().reshape(-1)
        digest.update(name.encode() + str(tuple(tensor.shape)).encode())
        digest.update(flat[:64].float().cpu().numpy().tobytes() + flat[-64:].float().cpu().numpy().tobytes())
    stem = digest.hexdigest()[:16]
    path = exports_dir() / f"model-{stem}.safetensors"
    if path.is_file():
        _touch(path)
        return path
    save_checkpoint(model, path, metadata={"source": describe_recipe(recipe)})
    enforce_disk_budget(protected=[path])
    return path


def validate_checkpoint(
    path, name: str | None = None, *, max_bytes: int | None = None, memory_budget: int | None = None
) -> None:
    """Everything ``load_checkpoint`` would refuse, without building the model: the size, the header
    (dtypes, config, keys, shapes), the server's build caps and memory budget, then NaN/inf, one tensor
    at a time. Messages call the file ``name``."""
    header = read_header(path, max_bytes=MAX_UPLOAD_BYTES if max_bytes is None else max_bytes, name=name)
    cfg, layout = checkpoint_config(header)
    check_build_size(cfg)  # an upload is held to the same caps as a build from the form
    check_header(header, cfg, layout, allow_unexpected=False)
    check_memory(cfg, "float32", memory_budget)
    check_file_finite(path, header)


def import_upload(upload_path: str, original_name: str | None = None) -> dict:
    """Check an uploaded checkpoint where Gradio stored it, then keep it in the work dir under its
    content hash (a hard link: no second copy) and return its recipe.

    A refused file raises WeightLoadError / ConfigError naming the user's file (``original_name``,
    else the upload's own name: Gradio keeps it as the basename of the path it passes) and is
    deleted at once if it lies in Gradio's upload folder.
    """
    from playground.server.session import file_recipe

    src = Path(upload_path)
    if not src.is_file():
        raise WeightLoadError("upload.missing", "The upload did not arrive; try again.")
    label = Path(original_name or src.name).name[:80]
    try:
        size = src.stat().st_size
        if size > MAX_UPLOAD_BYTES:
            raise WeightLoadError(
                "upload.too_big",
                "{label} is {mb:.0f} MB; the upload limit is {limit_mb:.0f} MB.",
                label=label,
                mb=size / 1000000.0,
                limit_mb=MAX_UPLOAD_BYTES / 1000000.0,
            )
        if size == 0:
            raise WeightLoadError("upload.empty", "{label} is empty.", label=label)
        validate_checkpoint(src, label)
    except (WeightLoadError, ConfigError):
        discard_upload(src)
        raise
    digest = hashlib.sha256()
    with open(src, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    dest_dir = work_dir() / "uploads"
    dest_dir.mkdir(exist_ok=True)
    dest = dest_dir / f"{digest.hexdigest()[:32]}.safetensors"
    if dest.exists():
        _touch(dest)
    else:
        _write_atomically(dest, lambda tmp: _link_or_copy(src, tmp))
    enforce_disk_budget(protected=[dest])
    return file_recipe(dest, label)


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)  # same file system (Gradio's cache and the work dir both under /tmp)
    except OSError:
        shutil.copyfile(src, dest)


def discard_upload(path) -> bool:
    """Delete a refused upload if it is ours to delete: a file in Gradio's upload folder (not an
    export) or in the work dir's uploads, and not protected. Returns whether it was deleted."""
    path = Path(path)
    ours = (_inside(path, gradio_cache_dir()) and not _inside(path, exports_dir())) or _inside(
        path, work_dir() / "uploads"
    )
    if not ours or not path.is_file() or path.resolve() in protected_paths():
        return False
    path.unlink(missing_ok=True)
    if _inside(path, gradio_cache_dir()):
        _remove_empty_parents(path.parent, [gradio_cache_dir()])
    return True


def is_trained_checkpoint(path) -> bool:
    """Whether a checkpoint is one the Train tab wrote (not an upload, whatever its name)."""
    return _inside(Path(path), work_dir() / "trained")


def save_trained(model: GPTModel, label: str) -> dict:
    """Give a trained model a recipe: its checkpoint on the server under a generated name."""
    from playground.server.session import file_recipe

    out_dir = work_dir() / "trained"
    out_dir.mkdir(exist_ok=True)
    stem = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
    path = save_checkpoint(model, out_dir / f"trained-{stem}.safetensors")
    enforce_disk_budget(protected=[path])
    return file_recipe(path, label)
