"""The sampler's summary of one float32 logits row, compiled here (row_summary.cpp) at first use: tens of µs.

A step's sampler reads one row of ``vocab_size`` logits: is it finite, its largest entry, the
log-sum-exp, the entropy, the few most likely ids. torch's reductions over one 50,257-long row cost
tens of microseconds each (a dispatch, a parallel region), ``row_summary.cpp`` does all of it in three
vectorised passes. Built like ``native_gemv``'s kernels (the machine's compiler, cached by a hash of
the source and flags, loaded with ctypes); ``available`` is False without a compiler, when the build
or the load fails, or when ``PLAYGROUND_ACCEL=off``; callers
then use their own (numpy/torch) summary. What the numbers mean for a sampling step is
``playground.engine.row_summary``'s.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from playground.runtime import compiled_library

SOURCE = Path(__file__).with_name("row_summary.cpp")
INCLUDED = (SOURCE.with_name("top_held.cpp"),)  # the held top list, shared with the sampler
SWITCHES = ("PLAYGROUND_ACCEL",)
FIELDS = 6  # doubles row_summary.cpp writes to ``out``


def _load(path: Path):
    fn = ctypes.CDLL(str(path)).pg_row_summary
    p = ctypes.c_void_p
    fn.argtypes = [p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, p, p, p]
    fn.restype = ctypes.c_int
    return fn


_LIBRARY = compiled_library.Library(SOURCE, INCLUDED, SWITCHES, _load, ("pg_row_summary",))  # loaded: pg_row_summary

# Build (or load from the cache) and load the library once per process; available() is True if it can be
# called and never raises (a failure is a status() with its reason); forget() is for tests.
switched_off, status, available, forget = _LIBRARY.switched_off, _LIBRARY.status, _LIBRARY.available, _LIBRARY.forget


class Buffers:
    """The output arrays of one caller (a generation), made once and refilled by every ``summarize``."""

    def __init__(self, n_top: int):
        self.ids = np.zeros(max(1, n_top), dtype=np.int32)
        self.probs = np.zeros(max(1, n_top), dtype=np.float32)
        self.out = np.zeros(FIELDS, dtype=np.float64)
        self.n_top = n_top
        self.pointers = (self.ids.ctypes.data, self.probs.ctypes.data, self.out.ctypes.data)


def summarize(address: int, n: int, buffers: Buffers, allow_neg_inf: bool = False) -> bool:
    """Summarise the contiguous float32 row of ``n`` entries at ``address`` into ``buffers`` (``available``
    must hold); False if the row holds NaN or ±inf (-inf allowed with ``allow_neg_inf``): nothing is filled."""
    fn = _LIBRARY.loaded
    assert fn is not None, "native_row_summary.summarize before available()"
    return bool(fn(address, n, buffers.n_top, int(allow_neg_inf), *buffers.pointers))
