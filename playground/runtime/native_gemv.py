"""A one-row matrix product compiled here (g++ -O3 -march=native) at first use; optional, checked, measured.

Decoding multiplies every weight matrix by one row, so its speed is how fast the weights stream
from memory. ATen's and oneDNN's one-row kernels stream at well under what the machine can (the
peers in ``python -m bench`` show it); ``one_row_gemv.cpp`` reads each weight row once, split into
one block of rows per thread of torch's own OpenMP team. It is built with the machine's C++
compiler the first time a caller asks (a second or two: it includes no torch headers), cached
under the user's cache folder by a hash of its source and flags, and loaded with ctypes.

Nothing here is trusted blindly: ``available`` is False when there is no compiler, the build or the
load fails, or the product differs from ``torch.nn.functional.linear`` on random inputs; callers
then keep the plain path. Whether it is *used* is decided per weight shape by
``decode_decisions.one_row_kernel``, by timing it against the plain product on this machine.
``PLAYGROUND_ACCEL=off`` never builds it.

Where the compiler targets the CPU's int8 dot-product instruction (AVX512-VNNI, or AVX-VNNI with 256-bit
vectors), or AVX2 (bytes widened to 16 bits, multiplied in pairs), the library also holds the "int8-dynamic"
one-row product (``linear_int8_dynamic``), checked exactly against an integer reference before
``int8_dot_ready`` says yes; elsewhere it reports 0 bits and torch's int8 kernels stay.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from playground.runtime.library_cache import LoadFailed, build_and_load, compiler, public_detail

SOURCE = Path(__file__).with_name("one_row_gemv.cpp")
DTYPES = (torch.float32, torch.bfloat16)
SYMBOLS = (  # what _load binds: a cached library without them is rebuilt before it is loaded
    "pg_vector_bits",
    "pg_gemv_f32",
    "pg_gemv_bf16",
    "pg_gemv_i8w_f32",
    "pg_gemv_i8w_bf16",
    "pg_i8_dot_bits",
    "pg_gemv_i8_dynamic",
    "pg_gemv_i8_sums",
    "pg_set_rows_at_once",
    "pg_rows_at_once",
)


@dataclass(frozen=True)
class Status:
    """What became of the compiled kernel in this process: as data a UI words in its own language."""

    available: bool
    reason: str  # "ready", "off", "no_compiler", "build_failed", "load_failed", "mismatch", "not_tried"
    detail: str = ""  # the compiler's last line, the largest difference, ...
    compiler: str = ""
    vector_bits: int = 0  # 512 (AVX-512), 256 (AVX2 + FMA) or 0 (scalar)
    build_seconds: float = 0.0  # 0 when the cached library was loaded
    library: str = ""
    int8_dot_bits: int = 0  # the int8 products' width (512 AVX512-VNNI, 256 AVX-VNNI or AVX2), 0: not built here
    int8_dot_error: str = ""  # what differed from the integer reference, if it did (then it is not used)
    cache_note: str = ""  # why a cached library was rejected and built again ("truncated", ...), "" if none


_LOCK = threading.Lock()
_STATUS = Status(False, "not_tried")
_LIB: ctypes.CDLL | None = None
ROWS_AT_ONCE = (4, 1)  # the weight rows a thread may read at once: the build's default first
_rows_at_once = ROWS_AT_ONCE[0]
_FOLLOWERS: list[ctypes.CDLL] = []  # other libraries that include this source (native_step's)


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    p, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.pg_vector_bits.restype = c_int
    lib.pg_gemv_f32.argtypes = [p, p, p, p, i64, i64, c_int]
    lib.pg_gemv_f32.restype = None
    lib.pg_gemv_bf16.argtypes = [p, p, p, p, p, i64, i64, c_int]
    lib.pg_gemv_bf16.restype = None
    lib.pg_gemv_i8w_f32.argtypes = [p, p, p, p, p, i64, i64, c_int]
    lib.pg_gemv_i8w_f32.restype = None
    lib.pg_gemv_i8w_bf16.argtypes = [p, p, p, p, p, p, i64, i64, c_int]
    lib.pg_gemv_i8w_bf16.restype = None
    lib.pg_i8_dot_bits.restype = c_int
    lib.pg_gemv_i8_dynamic.argtypes = [p, p, p, p, p, p, i64, i64, c_int, p]
    lib.pg_gemv_i8_dynamic.restype = c_int
    lib.pg_gemv_i8_sums.argtypes = [p, p, p, p, p, i64, i64, c_int, p]
    lib.pg_gemv_i8_sums.restype = c_int
    _bind_rows_at_once(lib)
    return lib


def _bind_rows_at_once(lib: ctypes.CDLL) -> None:
    """Bind ``lib``'s rows-at-once setting (its own copy of this source's) and give it this process's value."""
    lib.pg_set_rows_at_once.argtypes = [ctypes.c_int]
    lib.pg_set_rows_at_once.restype = None
    lib.pg_rows_at_once.restype = ctypes.c_int
    lib.pg_set_rows_at_once(_rows_at_once)


def set_rows_at_once(rows: int) -> None:
    """Every one-row product of this process's compiled libraries (this one and those that ``follow`` it) reads
    ``rows`` weight rows at once: 4 side by side, or 1 after another (``weight_streams.weight_streams`` measures which
    streams faster here). No product's numbers change: only the order in which rows are read."""
    global _rows_at_once
    if rows not in ROWS_AT_ONCE:
        raise ValueError(f"rows read at once: one of {ROWS_AT_ONCE}, not {rows!r}")
    _rows_at_once = rows
    for lib in (_LIB, *_FOLLOWERS):
        if lib is not None:
            lib.pg_set_rows_at_once(rows)


def rows_at_once() -> int:
    """The weight rows a thread of the one-row products reads at once in this process."""
    return _rows_at_once


def follow(lib: ctypes.CDLL) -> None:
    """``lib`` (built from a source that includes this one) reads as many rows at once as this one, now and
    after every ``set_rows_at_once``."""
    _bind_rows_at_once(lib)
    _FOLLOWERS.append(lib)


def status() -> Status:
    """What happened to the kernel so far (``not_tried`` until someone called ``available``)."""
    return _STATUS


def available() -> bool:
    """Build (or load from the cache), load and check the kernel once per process; True if it can
    be used. Never raises: every failure is a Status with its reason, and the plain path stays."""
    global _STATUS, _LIB
    with _LOCK:
        if _STATUS.reason != "not_tried":
            return _STATUS.available
        if os.environ.get("PLAYGROUND_ACCEL", "").strip().lower() in ("off", "0", "no"):
            _STATUS = Status(False, "off")
            return False
        cxx = compiler()
        if cxx is None:
            _STATUS = Status(False, "no_compiler")
            return False
        try:
            lib, path, seconds, note = build_and_load(SOURCE, cxx, (), _load, SYMBOLS)
        except LoadFailed as e:  # the loader refused it, or a symbol this module calls is missing
            _STATUS = Status(False, "load_failed", public_detail(str(e)), cxx)
            return False
        except Exception as e:  # a failed build, or anything else: the plain path stays, said
            _STATUS = Status(False, "build_failed", public_detail(str(e)), cxx)
            return False
        _LIB = lib
        worst = parity_error()
        if worst is not None:
            _LIB = None
            _STATUS = Status(False, "mismatch", worst, cxx)
            return False
        bits = int(lib.pg_i8_dot_bits())
        int8_error = (int8_parity_error() or "") if bits else ""
        _STATUS = Status(
            True,
            "ready",
            "",
            cxx,
            int(lib.pg_vector_bits()),
            seconds,
            str(path),
            0 if int8_error else bits,
            int8_error,
            note,
        )
        return True


def int8_dot_ready() -> bool:
    """Whether ``linear_int8_dynamic`` can be used: the kernel is available, this build has the CPU's int8
    dot-product instruction, and it matched the integer reference (builds on first call, as ``available``)."""
    return available() and _STATUS.int8_dot_bits > 0


def supports(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> bool:
    """Whether ``linear(x, w, b)`` is a product this kernel computes: one row on the CPU, W (out, in)
    contiguous, everything float32 or everything bfloat16, no gradient wanted."""
    return (
        _LIB is not None
        and x.numel() == w.size(1)
        and w.dtype in DTYPES
        and x.dtype == w.dtype
        and w.device.type == "cpu"
        and x.device.type == "cpu"
        and w.is_contiguous()
        and x.is_contiguous()
        and (b is None or (b.dtype == w.dtype and b.is_contiguous()))
        and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))
    )


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, threads: int = 0) -> torch.Tensor:
    """``F.linear(x, w, b)`` for one row (``supports`` must hold): x (..., in) -> (..., out), on
    ``threads`` of torch's OpenMP team (0: all of them)."""
    lib = _LIB
    assert lib is not None, "native_gemv.linear before available()"
    n, k = w.shape
    y = torch.empty((*x.shape[:-1], n), dtype=w.dtype)
    bias = b.data_ptr() if b is not None else None
    threads = threads or torch.get_num_threads()
    if w.dtype == torch.float32:
        lib.pg_gemv_f32(x.data_ptr(), w.data_ptr(), bias, y.data_ptr(), n, k, threads)
    else:
        scratch = _scratch(k + 2 * n)
        lib.pg_gemv_bf16(x.data_ptr(), w.data_ptr(), bias, y.data_ptr(), scratch.data_ptr(), n, k, threads)
    return y


def linear_int8_weights(
    x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None, threads: int = 0
) -> torch.Tensor:
    """Weight-only int8 for one row: x (..., in) float32 or bfloat16 times int8 q (out, in), each output times
    its ``scale``, plus ``bias`` (x, scale and bias of one dtype, the output's), the weights widened to float32
    in registers; everything contiguous, ``available()`` true."""
    lib = _LIB
    assert lib is not None, "native_gemv.linear_int8_weights before available()"
    n, k = q.shape
    y = torch.empty((*x.shape[:-1], n), dtype=x.dtype)
    bias_ptr = bias.data_ptr() if bias is not None else None
    threads = threads or torch.get_num_threads()
    if x.dtype == torch.float32:
        lib.pg_gemv_i8w_f32(x.data_ptr(), q.data_ptr(), scale.data_ptr(), bias_ptr, y.data_ptr(), n, k, threads)
    else:
        scratch = _scratch(k + 2 * n).data_ptr()
        lib.pg_gemv_i8w_bf16(
            x.data_ptr(), q.data_ptr(), scale.data_ptr(), bias_ptr, y.data_ptr(), scratch, n, k, threads
        )
    return y


def linear_int8_dynamic(
    x: torch.Tensor,
    q: torch.Tensor,
    row_sums: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    threads: int = 0,
) -> torch.Tensor:
    """One float32 row x (..., in) times int8 weights q (out, in) with the row quantized per call, as
    engine.quantize's int8-dynamic kernels compute it: (Σ xq·q) · r · scale + bias, float32 (..., out).
    ``row_sums`` is ``q.sum(1, dtype=torch.int32)``; everything contiguous, ``int8_dot_ready()`` true."""
    lib = _LIB
    assert lib is not None, "native_gemv.linear_int8_dynamic before available()"
    n, k = q.shape
    y = torch.empty((*x.shape[:-1], n))
    bias_ptr = bias.data_ptr() if bias is not None else None
    scratch = _scratch((k + 3) // 4).data_ptr()  # k bytes: the quantized row
    threads = threads or torch.get_num_threads()
    lib.pg_gemv_i8_dynamic(
        x.data_ptr(),
        q.data_ptr(),
        row_sums.data_ptr(),
        scale.data_ptr(),
        bias_ptr,
        y.data_ptr(),
        n,
        k,
        threads,
        scratch,
    )
    return y


def int8_dynamic_sums(
    x: torch.Tensor, q: torch.Tensor, row_sums: torch.Tensor, threads: int = 0
) -> tuple[torch.Tensor, float]:
    """The integer part of ``linear_int8_dynamic``: the int32 sums Σ xq·q (out,) and the row's scale r."""
    lib = _LIB
    assert lib is not None, "native_gemv.int8_dynamic_sums before available()"
    n, k = q.shape
    sums = torch.empty(n, dtype=torch.int32)
    r = torch.empty(1)
    scratch = _scratch((k + 3) // 4).data_ptr()
    lib.pg_gemv_i8_sums(
        x.data_ptr(),
        q.data_ptr(),
        row_sums.data_ptr(),
        sums.data_ptr(),
        r.data_ptr(),
        n,
        k,
        threads or torch.get_num_threads(),
        scratch,
    )
    return sums, float(r)


_SCRATCH = threading.local()


def _scratch(n: int) -> torch.Tensor:
    """A float32 buffer of at least ``n`` for the calling thread, kept between calls."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.numel() < n:
        buf = _SCRATCH.buf = torch.empty(n)
    return buf


# Shapes that cover a remainder of every width (rows not a multiple of 4, in not a multiple of 32)
# and a bias or none.
PARITY_SHAPES = ((1, 1, True), (7, 33, False), (64, 768, True), (130, 100, True), (3072, 768, False))


def parity_error() -> str | None:
    """None if the kernel matches F.linear on random inputs in every dtype (weights float, or int8 with
    per-row scales); else what differed."""
    gen = torch.Generator().manual_seed(0)
    for dtype in DTYPES:
        for n, k, with_bias in PARITY_SHAPES:
            w = torch.randn(n, k, generator=gen).to(dtype)
            x = torch.randn(1, k, generator=gen).to(dtype)
            b = torch.randn(n, generator=gen).to(dtype) if with_bias else None
            want = F.linear(x.float(), w.float(), None if b is None else b.float())
            got = linear(x, w, b).float()
            # float32: summation order differs from ATen's; bfloat16: one rounding of the output
            tol = 1e-4 if dtype == torch.float32 else 8e-3
            err = float((got - want).abs().max() / (want.abs().max() + 1e-6))
            if not err <= tol:  # also catches NaN
                return f"{str(dtype).replace('torch.', '')} {(n, k)}: relative error {err:.2e} > {tol:.0e}"
            q = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)  # weight-only int8
            s = (torch.rand(n, generator=gen) / 127).to(dtype)
            want = F.linear(x.float(), q.float() * s.float()[:, None], None if b is None else b.float())
            err = float((linear_int8_weights(x, q, s, b).float() - want).abs().max() / (want.abs().max() + 1e-6))
            if not err <= 2 * tol:  # bfloat16: the scaled sum and the bias add each rounded once
                return f"int8 × {str(dtype).replace('torch.', '')} {(n, k)}: relative error {err:.2e} > {2 * tol:.0e}"
    return None


# int8 shapes: rows not a multiple of 4, in below, at and past the 64- and 128-byte steps.
INT8_PARITY_SHAPES = ((1, 1), (7, 33), (5, 64), (130, 100), (9, 200), (64, 768), (3, 1000), (257, 3072))


def quantized_row_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One float32 row (1, in) -> int8 (1, in) and its scale r (1, 1), in torch: the rounding the kernel must
    reproduce (engine.quantize.quantize_activations'; the unit tests check the two agree)."""
    r = x.abs().amax(dim=1, keepdim=True) / 127.0
    r = torch.where(r > 0, r, torch.ones_like(r))
    return torch.round(x / r).clamp_(-127, 127).to(torch.int8), r


def int8_parity_error() -> str | None:
    """None if the int8-dynamic kernel's integer sums and row scale are exactly torch's on random inputs
    (rows and lengths with remainders, an all-zero row, one thread and all); else what differed."""
    gen = torch.Generator().manual_seed(0)
    for n, k in INT8_PARITY_SHAPES:
        q = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
        sums = q.sum(dim=1, dtype=torch.int32)
        for x in (torch.randn(1, k, generator=gen) * 3, torch.zeros(1, k)):
            xq, r = quantized_row_reference(x)
            want = (xq.int() @ q.int().t())[0]
            for threads in (1, 0):
                got, got_r = int8_dynamic_sums(x, q, sums, threads)
                if got_r != float(r) or not torch.equal(got, want):
                    worst = int((got - want).abs().max())
                    return f"int8 {(n, k)}: sums off by up to {worst}, scale {got_r!r} against {float(r)!r}"
    return None


def forget() -> None:
    """Back to ``not_tried`` (tests): the next ``available`` builds or loads again."""
    global _STATUS, _LIB, _rows_at_once
    with _LOCK:
        _STATUS, _LIB = Status(False, "not_tried"), None
        _rows_at_once = ROWS_AT_ONCE[0]
        _FOLLOWERS.clear()
