"""A whole decode step compiled here (decode_step.cpp, g++ -O3 -march=native) at first use: one call per token.

``decode_step.cpp`` runs one GPT-2 token -- embeddings, every block, the output head -- in one OpenMP
parallel region of torch's own team, reusing the row kernels of ``one_row_gemv.cpp``. This module
builds it the way ``native_gemv`` builds those kernels (the machine's compiler, cached under the
user's cache folder by a hash of both sources and the flags, loaded with ctypes) and calls it with
raw pointers; it knows nothing of models. What a model's tensors are and whether the step is valid
for a model are ``playground.accel.native_decode``'s; its check against the torch forward and the
measurement that decides whether it is used, ``playground.accel.native_choice``'s.

``available`` is False without a compiler, when the build or load fails, or when
``PLAYGROUND_ACCEL=off``; callers then keep the plain path.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from playground.runtime import compiled_library, native_gemv

SOURCE = Path(__file__).with_name("decode_step.cpp")
# what the source #includes: a change there is a new build too
INCLUDED = (
    native_gemv.SOURCE,
    SOURCE.with_name("batched_rows.cpp"),
    SOURCE.with_name("tile_rows.cpp"),
    SOURCE.with_name("step_parts.cpp"),
    SOURCE.with_name("head_tiles.cpp"),
)
SWITCHES = ("PLAYGROUND_ACCEL",)
SYMBOLS = (
    "pg_step_f32",
    "pg_step_bf16",
    "pg_step_rows_f32",
    "pg_step_rows_bf16",
    "pg_set_rows_at_once",
    "pg_rows_at_once",
)


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    p = ctypes.c_void_p
    for name in ("pg_step_f32", "pg_step_bf16"):
        fn = getattr(lib, name)
        fn.argtypes = [p, p, ctypes.c_float, p, p, p, p, ctypes.c_int]
        fn.restype = None
    for name in ("pg_step_rows_f32", "pg_step_rows_bf16"):
        fn = getattr(lib, name)
        fn.argtypes = [p, p, ctypes.c_float, ctypes.c_int64, p, p, ctypes.c_int]
        fn.restype = None
    native_gemv.follow(lib)  # its products read as many weight rows at once as the one-row kernel's
    return lib


_LIBRARY = compiled_library.Library(SOURCE, INCLUDED, SWITCHES, _load, SYMBOLS)  # loaded: the ctypes.CDLL

# Build (or load from the cache) and load the library once per process; available() is True if it can be
# called and never raises (a failure is a status() with its reason); forget() is for tests.
switched_off, status, available, forget = _LIBRARY.switched_off, _LIBRARY.status, _LIBRARY.available, _LIBRARY.forget


def pointer_array(addresses: list[int]) -> ctypes.Array:
    """The tensors' addresses (0 for a missing bias) as the C array the step reads."""
    return (ctypes.c_void_p * len(addresses))(*[a or None for a in addresses])


def dims_array(values: list[int]) -> ctypes.Array:
    return (ctypes.c_int64 * len(values))(*values)


def run(
    bfloat16: bool,
    tensors: ctypes.Array,
    dims: ctypes.Array,
    eps: float,
    k_cache: int,
    v_cache: int,
    logits: int,
    attention: int | None,
    threads: int,
) -> None:
    """One token through the compiled step (``available`` must hold). ``dims`` as decode_step.cpp's
    ``pg_step_f32`` reads them; the addresses are of contiguous tensors the caller keeps alive."""
    lib = _LIBRARY.loaded
    assert lib is not None, "native_step.run before available()"
    fn = lib.pg_step_bf16 if bfloat16 else lib.pg_step_f32
    fn(tensors, dims, eps, k_cache, v_cache, logits, attention, threads)


def run_rows(
    bfloat16: bool,
    tensors: ctypes.Array,
    dims: ctypes.Array,
    eps: float,
    rows: list[tuple[int, int, int, int, int, int | None, int | None]],
    threads: int,
) -> None:
    """Several tokens through one compiled step, each row's numbers those it gets alone (``available``
    must hold). ``rows``: per row (token, position, cache capacity, k cache, v cache, logits or None,
    attention or None), the addresses as ``run`` takes them; ``dims`` as ``run``'s (capacity, position and
    token unused). Rows of one cache come in order of position (a prompt fed at once); a row without logits
    only fills its cache."""
    lib = _LIBRARY.loaded
    assert lib is not None, "native_step.run_rows before available()"
    row_dims = (ctypes.c_int64 * (3 * len(rows)))(*[v for r in rows for v in r[:3]])
    row_ptrs = (ctypes.c_void_p * (4 * len(rows)))(*[a or None for r in rows for a in r[3:]])
    fn = lib.pg_step_rows_bf16 if bfloat16 else lib.pg_step_rows_f32
    fn(tensors, dims, eps, len(rows), row_dims, row_ptrs, threads)
