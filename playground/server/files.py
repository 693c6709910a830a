"""Files the server keeps: the work dir, uploads, trained checkpoints, and the disk budget.

Files the server keeps: the work dir (uploads by content hash, trained checkpoints), the folders
exports and uploads live in, and a disk budget over all of them (no gradio here; the UI passes paths
in and gets paths back).

Two rules, each from a measured failure:
- a file is stored once: uploads are checked where Gradio put them, then hard-linked (not copied)
  into the work dir, or deleted at once when refused; exports (exports.py) are written inside
  Gradio's cache folder, which Gradio serves as it is;
- the work dir and Gradio's cache stay under ``PLAYGROUND_DISK_BUDGET_GB``: after every write the
  least recently used files go first, never a protected one (``protect()`` registers who decides).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from playground.engine.checkpoint_files import check_file_finite, check_header, read_header
from playground.engine.config import ConfigError
from playground.engine.memory_check import check_fits
from playground.engine.model import GPTModel
from playground.engine.sizes import check_build_size
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import checkpoint_config, save_checkpoint
from playground.runtime.memory import BUDGET
from playground.server.recipes import MAX_UPLOAD_BYTES, file_recipe

DEFAULT_DISK_BUDGET_GB = 5


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


def is_inside(path: Path, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except (ValueError, OSError):
        return False


def touch(path: Path) -> None:
    """Mark a file as just used: the disk budget evicts the least recently used first."""
    try:
        os.utime(path)
    except OSError:
        pass


def write_atomically(path: Path, write: Callable[[Path], None]) -> Path:
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


ABANDONED_UPLOAD_SECONDS = 300.0


def remove_abandoned_uploads(max_age: float = ABANDONED_UPLOAD_SECONDS) -> list[Path]:
    """Gradio writes an upload to a temporary file (``tmp…``) at the top of its cache and moves it
    into a folder named by its hash once the request is whole; a request cut off mid-body leaves the
    temporary file behind (often empty). Delete those untouched for ``max_age`` seconds (a file still
    being written is touched by every chunk that arrives)."""
    root, now = gradio_cache_dir(), time.time()
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        try:
            if entry.name.startswith("tmp") and entry.is_file(follow_symlinks=False):
                if now - entry.stat(follow_symlinks=False).st_mtime >= max_age:
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def enforce_disk_budget(
    budget_bytes: int | None = None, *, protected: Iterable = (), dirs: Sequence | None = None
) -> list[Path]:
    """Delete the least recently used files (oldest mtime) under ``dirs`` (default:
    ``managed_dirs()``) until their total is within the budget; return what was deleted.

    Hard links count once and go together (an upload linked into the work dir frees nothing unless
    both names go). Never deleted: protected paths (``protected`` and every ``protect()`` callable),
    and temporary files that may still be being written.
    """
    remove_abandoned_uploads()
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
    while folder.resolve() not in resolved_roots and any(is_inside(folder, r) for r in roots):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


# ----------------------------------------------------------------------------------------------
# Uploads and trained checkpoints


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
    check_fits(cfg, "float32", BUDGET if memory_budget is None else memory_budget)
    check_file_finite(path, header)


def import_upload(upload_path: str, original_name: str | None = None) -> dict:
    """Check an uploaded checkpoint where Gradio stored it, then keep it in the work dir under its
    content hash (a hard link: no second copy) and return its recipe.

    A refused file raises WeightLoadError / ConfigError naming the user's file (``original_name``,
    else the upload's own name: Gradio keeps it as the basename of the path it passes) and is
    deleted at once if it lies in Gradio's upload folder.
    """
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
        touch(dest)
    else:
        write_atomically(dest, lambda tmp: _link_or_copy(src, tmp))
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
    ours = (is_inside(path, gradio_cache_dir()) and not is_inside(path, exports_dir())) or is_inside(
        path, work_dir() / "uploads"
    )
    if not ours or not path.is_file() or path.resolve() in protected_paths():
        return False
    path.unlink(missing_ok=True)
    if is_inside(path, gradio_cache_dir()):
        _remove_empty_parents(path.parent, [gradio_cache_dir()])
    return True


def is_trained_checkpoint(path) -> bool:
    """Whether a checkpoint is one the Train tab wrote (not an upload, whatever its name)."""
    return is_inside(Path(path), work_dir() / "trained")


def save_trained(model: GPTModel, label: str) -> dict:
    """Give a trained model a recipe: its checkpoint on the server under a generated name."""
    out_dir = work_dir() / "trained"
    out_dir.mkdir(exist_ok=True)
    stem = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
    path = save_checkpoint(model, out_dir / f"trained-{stem}.safetensors")
    enforce_disk_budget(protected=[path])
    return file_recipe(path, label)
