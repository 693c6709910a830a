"""One sampled step of the teaching sampler on one float32 row of logits, compiled at first use.

``engine.sampling``'s ``Generation._choose`` runs a sampled step as a dozen torch operations over the
whole vocabulary (four softmaxes, top-k, a partial sort for top-p, cumulative sums, entropies); in a
room of learners that is the cost of a step. ``sample_row.cpp`` computes the same step in a few
vectorised passes (written in ``sample_parts.cpp``). Built like ``native_row_summary`` (the machine's
compiler, cached by a hash of the sources and flags, loaded with ctypes); ``available`` is False without a
compiler, when the build or the load fails, or when ``PLAYGROUND_ACCEL=off``: callers then keep the
teaching sampler.

A row is two calls on one thread: ``prepare`` (everything the draw does not decide; it says whether the
row can be taken here) and, only then, ``draw`` with the uniform the caller drew from its own generator.
``rows`` makes several rows' steps in one call, each on one of a few threads, with uniforms drawn beforehand.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from playground.runtime import compiled_library

SOURCE = Path(__file__).with_name("sample_row.cpp")
# what the source #includes: a change there is a new build too
INCLUDED = tuple(SOURCE.with_name(name) for name in ("sample_parts.cpp", "sample_fused.cpp", "top_held.cpp"))
SWITCHES = ("PLAYGROUND_ACCEL",)
SYMBOLS = ("pg_sample_prepare", "pg_sample_draw", "pg_sample_rows")
SCALARS = 16  # doubles before the slices in the doubles buffer (sample_row.cpp's Out)
# indices into the scalars
ENTROPY, RAW_ENTROPY, KEPT, TOP_HELD, N_POSITIVE, TOKEN, PROB, RAW_PROB, RANK, N_CAND, N_SHOWN, TOTAL = range(12)
# what prepare returns
NOT_FINITE, READY, TIED, ZERO_FILL = 0, 1, 2, 3


def _load(path: Path):
    lib = ctypes.CDLL(str(path))
    p, i64, f64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
    prepare, draw = lib.pg_sample_prepare, lib.pg_sample_draw
    prepare.argtypes = [p, i64, f64, i64, f64, i64, i64, p, p, p]
    prepare.restype = ctypes.c_int
    draw.argtypes = [f64, i64, p, p, p]
    draw.restype = i64
    many = lib.pg_sample_rows
    many.argtypes = [i64, p, p, p, p, p, p, p, i64, p, p, p, p, p, i64]
    many.restype = None
    return prepare, draw, many


_LIBRARY = compiled_library.Library(SOURCE, INCLUDED, SWITCHES, _load, SYMBOLS)  # loaded: (prepare, draw, rows)

# Build (or load from the cache) and load the library once per process; available() is True if it can be
# called and never raises (a failure is a status() with its reason); forget() is for tests.
switched_off, status, available, forget = _LIBRARY.switched_off, _LIBRARY.status, _LIBRARY.available, _LIBRARY.forget


class Buffers:
    """The output arrays of one caller (a generation), made once and refilled by every row. With N1 = n_top + 1:
    ``ints`` [top | raw top | candidates | shown | positive ids], ``floats`` [top probs | four stage rows |
    positive probs], ``doubles`` [SCALARS | lo | hi | positive cumulative sums], each part N1 long."""

    def __init__(self, n_top: int):
        n1 = n_top + 1
        self.n_top, self.n1 = n_top, n1
        self.ints = np.zeros(5 * n1, dtype=np.int32)
        self.floats = np.zeros(6 * n1, dtype=np.float32)
        self.doubles = np.zeros(SCALARS + 3 * n1, dtype=np.float64)
        self.pointers = (self.ints.ctypes.data, self.floats.ctypes.data, self.doubles.ctypes.data)

    def part(self, array: np.ndarray, index: int, length: int, start: int = 0) -> np.ndarray:
        """The first ``length`` entries of part ``index`` (after ``start`` leading entries)."""
        at = start + index * self.n1
        return array[at : at + length]


def prepare(address: int, n: int, temperature: float, top_k: int, top_p: float, buffers: Buffers, lanes: int) -> int:
    """Everything of the step on the contiguous float32 row of ``n`` at ``address`` but the draw (``available``
    must hold); ``lanes``: how many float32 lanes torch's softmax sums in (16 with AVX-512, else 8): NOT_FINITE (a NaN or ±inf entry, or a temperature float32 rounds to 0), TIED (equal
    probabilities among the top ids, or a top-p cut within float32 rounding of p), ZERO_FILL (fewer positive final probabilities than n_top: the caller
    chooses the zeros the top shows) or READY."""
    fns = _LIBRARY.loaded
    assert fns is not None, "native_sampler.prepare before available()"
    return int(fns[0](address, n, temperature, top_k, top_p, buffers.n_top, lanes, *buffers.pointers))


def draw(u: float, buffers: Buffers) -> int:
    """The token u picks in the row this thread prepared last, with the rest of the step in ``buffers``."""
    fns = _LIBRARY.loaded
    assert fns is not None, "native_sampler.draw before available()"
    return int(fns[1](u, buffers.n_top, *buffers.pointers))


def rows(
    addresses: list[int],
    sizes: list[int],
    temperatures: list[float],
    top_ks: list[int],
    top_ps: list[float],
    us: list[float],
    buffers: list[Buffers],
    lanes: int,
    threads: int,
) -> tuple[list[int], list[int]]:
    """``prepare`` and, where it returns READY or ZERO_FILL, ``draw`` with ``us[r]`` for each row r (the
    contiguous float32 row of ``sizes[r]`` at ``addresses[r]``, into ``buffers[r]``), the rows shared among
    ``threads`` threads, each row whole on one: (what each prepare returned, each drawn token or -1)."""
    fns = _LIBRARY.loaded
    assert fns is not None, "native_sampler.rows before available()"
    n = len(addresses)
    ptrs = np.array(
        [
            addresses,
            [b.pointers[0] for b in buffers],
            [b.pointers[1] for b in buffers],
            [b.pointers[2] for b in buffers],
        ],
        dtype=np.uint64,
    ).reshape(4, n)
    ints64 = np.array([sizes, top_ks, [b.n_top for b in buffers]], dtype=np.int64).reshape(3, n)
    f64 = np.array([temperatures, top_ps, us], dtype=np.float64).reshape(3, n)
    got = np.zeros(n, dtype=np.int32)
    tokens = np.zeros(n, dtype=np.int64)
    at = [a.ctypes.data for a in (ptrs[0], ints64[0], f64[0], ints64[1], f64[1], f64[2], ints64[2])]
    fns[2](n, *at, lanes, ptrs[1].ctypes.data, ptrs[2].ctypes.data, ptrs[3].ctypes.data, got.ctypes.data,
           tokens.ctypes.data, threads)  # fmt: skip
    return got.tolist(), tokens.tolist()
