"""Run and model exports, sized before anything is written and refused over the limit.

Run and model exports: their size known *before* anything is written, refused over
``PLAYGROUND_MAX_EXPORT_MB``; the attention streamed map by map, never gathered into Python lists (a
1024-token GPT-2 small run once took 3 minutes, 2.1 GB and 13 GB of RAM as JSON). Exports are written
inside Gradio's cache folder (files.exports_dir), which Gradio serves without a second copy, and
count in the disk budget (files.enforce_disk_budget).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from playground.engine.attention import attention_probs
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.tokenizer import tokenizer_of
from playground.engine.weights import save_checkpoint
from playground.errors import UserError
from playground.runtime.memory import BUDGET
from playground.server.export_formats import (
    JSON_DECIMALS,
    finite_json,
    json_attention_bytes,
    max_export_bytes,
    npz_attention_bytes,
    write_json,
    write_npz,
)
from playground.server.files import enforce_disk_budget, exports_dir, touch, write_atomically
from playground.server.recipes import describe_recipe, recipe_key
from playground.server.replay import replay_record
from playground.server.runs import Run, all_layers_attention_bytes, run_attention
from playground.server.step_records import run_record


class ExportTooLarge(UserError):
    """An export refused before anything was written. ``size`` and ``limit`` are bytes; ``options``
    maps a smaller choice (keyword arguments of ``export_run``) to its size."""

    def __init__(
        self, key: str, template: str, /, *, size: int, limit: int, options: dict[str, tuple[dict, int]], **fields
    ):
        super().__init__(key, template, size=_mb(size), limit=_mb(limit), **fields)
        self.size, self.limit, self.options = size, limit, options


# ----------------------------------------------------------------------------------------------
# Run export: sizes first, then attention streamed map by map


def _window_attention(model: GPTModel, run, layers: Sequence[int]):
    """A function i -> (H, T, T) float32 probabilities of ``layers[i]``. Queries and keys come from
    ``runs.run_attention``: the run's cached trace when the attention views already computed it
    (as they do after every generation), else one forward. Each layer's maps are computed only when
    they are written."""
    _, qk = run_attention(model, run)

    def layer(i: int) -> np.ndarray:
        q, k, *window = qk[layers[i]]  # (H, T, head_dim) each, and a windowed layer's window
        probs = attention_probs(q.unsqueeze(0), k.unsqueeze(0), *window)[0].numpy()  # (H, T, T)
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
    record = run_record(run, tokenizer_of(model))
    return finite_json(
        record
        | {
            "config": model.cfg.to_dict(),
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
        choices: dict[str, dict] = {".npz (float16)": {"fmt": "npz", "dtype": "float16"}}
        if fmt == "json":
            choices |= {".npz": {"fmt": "npz"}, "3 decimals": {"fmt": "json", "decimals": 3}}
        options: dict[str, tuple[dict, int]] = {
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
        touch(path)
        return path
    layer_probs = _window_attention(model, run, chosen)
    if fmt == "json":
        write_atomically(path, lambda tmp: write_json(tmp, head, L, layer_probs, decimals))
    else:
        write_atomically(path, lambda tmp: write_npz(tmp, meta, run.token_ids, L, H, T, layer_probs, dtype))
    enforce_disk_budget(protected=[path])
    return path


def export_bytes(cfg: GPTConfig, n_tokens: int, fmt: str = "json") -> int:
    """Peak extra memory of exporting a run: export_run streams one layer's maps at a time, so
    a few copies of one layer's (H, T, T) probabilities (measured: +101 to +238 MB for a 1,024-token
    GPT-2 small run, whose one layer is 50 MB), plus the window's queries and keys."""
    one_layer = all_layers_attention_bytes(cfg, n_tokens) // max(1, cfg.n_layers)
    T = min(n_tokens, cfg.context_length)
    return 5 * one_layer + 2 * cfg.n_layers * T * cfg.emb_dim * 4


def reserve_export(model: GPTModel, run: Run, fmt: str = "json"):
    """``with reserve_export(model, run, fmt): export_run(run, model, fmt)`` -- refused before
    anything is allocated if the export does not fit in the memory budget."""
    n = len(run.token_ids)
    return BUDGET.reserve(export_bytes(model.cfg, n, fmt), f"exporting a run of {n:,} tokens as .{fmt}", "export")


# ----------------------------------------------------------------------------------------------
# Model export


def export_model(model: GPTModel, recipe: dict) -> Path:
    """The model as a safetensors checkpoint the upload box accepts back, inside Gradio's cache."""
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
        touch(path)
        return path
    save_checkpoint(model, path, metadata={"source": describe_recipe(recipe)})
    enforce_disk_budget(protected=[path])
    return path
