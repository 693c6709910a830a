"""How a run's attention is written: exact sizes first, then JSON or .npz streamed map by map.

Pure numpy, no policy (where files go and the disk budget are in files.py, export limits in
exports.py). A full 1024-token GPT-2 small run is 12 × 12 maps of 1024 × 1024 probabilities:
formatted by Python's float repr into lists that took 3 minutes and 13 GB; here each map becomes
bytes from a template with its digits written in place, and only one layer's maps are in memory at
a time.
"""

from __future__ import annotations

import functools
import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np

JSON_DECIMALS = 5
DEFAULT_MAX_EXPORT_MB = 1000  # a full 1024-token GPT-2 small run is 756 MB as JSON, 604 MB as .npz


def max_export_bytes() -> int:
    """The largest export written (``PLAYGROUND_MAX_EXPORT_MB``), and so the largest file read back."""
    return int(float(os.environ.get("PLAYGROUND_MAX_EXPORT_MB", DEFAULT_MAX_EXPORT_MB)) * 1e6)


def json_attention_bytes(n_layers: int, n_heads: int, T: int, decimals: int = JSON_DECIMALS) -> int:
    """Exact size of the "attention" array as ``write_json`` writes it: a visible
    (causal) probability is ``0.ddddd`` (decimals + 2 characters), a masked one is ``0``."""
    visible = T * (T + 1) // 2
    row_chars = visible * (decimals + 2) + (T * T - visible) + T * (T - 1) + 2 * T  # values, commas, []
    map_chars = row_chars + (T - 1) + 2
    layer_chars = n_heads * map_chars + (n_heads - 1) + 2
    return n_layers * layer_chars + max(n_layers - 1, 0) + 2


def npz_attention_bytes(n_layers: int, n_heads: int, T: int, dtype: str = "float32") -> int:
    """Upper bound of the attention in a .npz: its raw size (deflate only ever makes it smaller)."""
    return n_layers * n_heads * T * T * np.dtype(dtype).itemsize + 4096


@functools.lru_cache(maxsize=2)
def _json_map_layout(T: int, decimals: int) -> tuple[np.ndarray, np.ndarray, tuple]:
    """The bytes of a (T, T) causal map with every visible value ``0.00000`` and every masked one
    ``0``, where each visible value starts, and the indices of the visible values (once per T)."""
    width = decimals + 2  # "0." and the digits; a separator follows every value
    template = np.empty(json_attention_bytes(1, 1, T, decimals) - 6, np.uint8)  # without [[[ ]]]
    starts = np.empty(T * (T + 1) // 2, np.int64)
    at = done = 0
    for i in range(T):
        n = i + 1  # row i sees keys 0..i
        row = template[at : at + 1 + n * (width + 1) + (T - n) * 2]
        row[0] = ord("[")
        visible = row[1 : 1 + n * (width + 1)].reshape(n, width + 1)
        visible[:, 0], visible[:, 1], visible[:, 2:width], visible[:, width] = ord("0"), ord("."), ord("0"), ord(",")
        masked = row[1 + n * (width + 1) :].reshape(T - n, 2)
        masked[:, 0], masked[:, 1] = ord("0"), ord(",")
        row[-1] = ord("]")  # replaces the last value's separator
        starts[done : done + n] = at + 1 + np.arange(n) * (width + 1)
        at, done = at + len(row), done + n
        if i < T - 1:
            template[at] = ord(",")
            at += 1
    assert at == len(template), "json_attention_bytes and the layout disagree"
    return template, starts, np.tril_indices(T)


def _json_map_bytes(probs: np.ndarray, decimals: int = JSON_DECIMALS) -> bytes:
    """One (T, T) causal attention map as a JSON array of rows, formatted by numpy alone: the
    template of ``_json_map_layout`` with each visible value's digits written in place from its
    rounded integer (no Python float repr; masked future positions stay exactly ``0``)."""
    template, starts, visible = _json_map_layout(probs.shape[0], decimals)
    out = template.copy()
    scaled = np.rint(probs[visible] * np.float32(10**decimals)).astype(np.int32)
    np.clip(scaled, 0, 10**decimals, out=scaled)
    for i in range(decimals - 1, -1, -1):
        scaled, digit = np.divmod(scaled, 10)
        out[starts + 2 + i] = digit + ord("0")
    out[starts] = scaled + ord("0")  # 0, or 1 for a probability that rounds to 1
    return out.tobytes()


def finite_json(value):
    """Metadata with NaN/inf replaced by null: the file stays valid JSON whatever the model did."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def write_json(path: Path, head: bytes, n_layers: int, layer_probs, decimals: int) -> None:
    """``head`` is the metadata object as JSON: the attention goes in as its last member."""
    with open(path, "wb") as f:
        f.write(head[:-1] + b',"attention":[')
        for i in range(n_layers):
            probs = layer_probs(i)
            f.write(b"," if i else b"")
            f.write(b"[")
            for h in range(probs.shape[0]):
                if h:
                    f.write(b",")
                f.write(b"[" + _json_map_bytes(probs[h], decimals) + b"]")
            f.write(b"]")
            del probs
        f.write(b"]}")


def write_npz(path: Path, meta: dict, token_ids, n_layers, n_heads, T, layer_probs, dtype: str) -> None:
    """A .npz numpy.load reads as usual, but written layer by layer into its zip member."""
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": False,
        "shape": (n_layers, n_heads, T, T),
    }
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("attention.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_2_0(member, header)
            for i in range(n_layers):
                member.write(np.ascontiguousarray(layer_probs(i), dtype=dtype).tobytes())
        for name, array in (("token_ids", np.array(token_ids)), ("metadata", np.array(json.dumps(meta)))):
            with zf.open(f"{name}.npy", "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
