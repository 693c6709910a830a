"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time

import torch


def decode_rate(timestamps: list[float]) -> float:
    """Tokens/s between the first and the last new token: the prompt's forward pass (time to first
    token, measured separately) is left out, so every peer is timed on the same decode steps."""
    if len(timestamps) < 2:
        raise ValueError("need at least two tokens to time decoding")
    return (len(timestamps) - 1) / (timestamps[-1] - timestamps[0])


def step_times(timestamps: list[float]) -> list[float]:
    """Seconds between consecutive new tokens."""
    return [b - a for a, b in zip(timestamps, timestamps[1:])]


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def copy_bandwidth(n_bytes: int = 512 * 2**20, reps: int = 7) -> float:
    """Bytes moved (read + written, as STREAM's "copy" counts them) per second by ``dst.copy_(src)``
    on float32 buffers far larger than any cache. Median of ``reps`` after one warm-up."""
    src = torch.ones(n_bytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src)
        rates.append(2 * src.nbytes / (time.perf_counter() - t0))
    return median(rates)


def read_bandwidth(n_bytes: int = 512 * 2**20, reps: int = 7) -> float:
    """Bytes read per second by a sum over a float32 buffer (a pure read stream, like decoding)."""
    src = torch.ones(n_bytes // 4)
    src.sum()
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        src.sum()
        rates.append(src.nbytes / (time.perf_counter() - t0))
    return median(rates)


def matmul_rate(n: int = 2048, reps: int = 5) -> float:
    """FLOP/s of a float32 (n × n) · (n × n) ``torch.matmul`` on this process's torch threads (2n³
    FLOPs a product): the machine's arithmetic rate the Inside views are judged against. Median of
    ``reps`` after one warm-up."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    out = torch.empty(n, n)
    torch.matmul(a, b, out=out)
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b, out=out)
        rates.append(2 * n**3 / (time.perf_counter() - t0))
    return median(rates)
