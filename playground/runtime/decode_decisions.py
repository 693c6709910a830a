"""The decode path's decisions, each timed on matrices of the model's own shape (``kernels.choose``).

Which weight layout, Q/K/V stacking, one-row kernel and thread count for the sampler's row decode fastest
differs between CPUs, so each is measured here once per machine and shape. Every measurement streams as
many copies of one weight shape as the model has, up to a working set past the CPU's caches (``copies``),
with inputs from a generator of its own (a user's seeded run never sees whether this process measured).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from playground.runtime import native_gemv
from playground.runtime.kernels import Candidates, Choice, choose, decided, measuring_enabled
from playground.runtime.threads import torch_threads

WORKING_SET_BYTES = 64 * 2**20  # > the last-level cache of the CPUs we met (32 MB): weights stream from RAM


def copies(shape: tuple[int, ...], dtype: torch.dtype, count: int) -> int:
    """As many matrices of ``shape`` as the model has (``count``), up to the working set's size."""
    one = shape[0] * shape[1] * torch.empty((), dtype=dtype).element_size()
    return max(1, min(count, WORKING_SET_BYTES // one))


def _probe_generator() -> torch.Generator:
    """Measurements draw their inputs from a generator of their own: a user's seeded run never sees
    whether, or when, this process measured a kernel."""
    return torch.Generator().manual_seed(0)


def matrices(shape, dtype, n, in_out: bool) -> list[torch.Tensor]:
    out = []
    gen = _probe_generator()
    for _ in range(n):
        w = torch.empty(shape[::-1] if in_out else shape, dtype=dtype).uniform_(-0.02, 0.02, generator=gen)
        out.append(w.t() if in_out else w)  # always (out, in) values, as nn.Linear holds them
    return out


def _gemv_pass(x, weights):
    for w in weights:
        F.linear(x, w)


def weight_layout(shape: tuple[int, ...], dtype: torch.dtype, count: int) -> Choice:
    """nn.Linear's own (out, in) memory order or its transpose (in, out) -- Hugging Face's Conv1D
    order -- for one-row products with a weight of ``shape`` (out, in), of which a model has ``count``."""
    n = copies(shape, dtype, count)

    def candidates() -> Candidates:
        x = torch.randn(1, shape[1], generator=_probe_generator()).to(dtype)
        plain = matrices(shape, dtype, n, in_out=False)
        transposed = matrices(shape, dtype, n, in_out=True)
        return {"out_in": lambda: _gemv_pass(x, plain), "in_out": lambda: _gemv_pass(x, transposed)}

    name = str(dtype).replace("torch.", "")
    return choose(
        ("weight layout", tuple(shape), dtype, n),
        f"{name} weight layout {tuple(shape)}",
        candidates,
        label=("layout", {"dtype": name, "shape": tuple(shape)}),
    )


def stacked_qkv(emb_dim: int, dtype: torch.dtype, in_out: bool, n_layers: int) -> Choice:
    """Q, K and V from three (d, d) products or from one (3d, d) product with the weights stacked."""
    n = copies((3 * emb_dim, emb_dim), dtype, n_layers)

    def candidates() -> Candidates:
        x = torch.randn(1, 1, emb_dim, generator=_probe_generator()).to(dtype)
        separate = matrices((emb_dim, emb_dim), dtype, 3 * n, in_out)
        stacked = matrices((3 * emb_dim, emb_dim), dtype, n, in_out)
        return {"separate": lambda: _gemv_pass(x, separate), "stacked": lambda: _gemv_pass(x, stacked)}

    name = str(dtype).replace("torch.", "")
    return choose(
        ("stacked qkv", emb_dim, dtype, in_out, n),
        f"{name} Q/K/V projections d={emb_dim}",
        candidates,
        label=("qkv", {"dtype": name, "d": emb_dim}),
    )


def compiled_threads(choice: Choice | None) -> int | None:
    """The threads a ``one_row_kernel`` decision runs the compiled kernel on: 0 for all of the calling
    thread's (torch.get_num_threads at the call), 1 for one, None for the plain product."""
    winner = choice.winner if choice is not None else ""
    return {"compiled": 0, "compiled_1_thread": 1}.get(winner)


def one_row_kernel(shape: tuple[int, int], dtype: torch.dtype, count: int) -> Choice | None:
    """The plain product (``F.linear`` on the weight layout ``weight_layout`` chose) or the compiled
    one-row kernel (native_gemv: W stored (out, in), rows split over torch's threads, or on one
    thread: on a CPU shared with other work, waking a second thread for every product can cost
    more than it brings). None when the compiled kernel is unavailable here (no compiler, a failed
    build or check) or does not handle ``dtype``, and under PLAYGROUND_ACCEL=off (nothing is
    built then): the plain product runs, undecided."""
    if dtype not in native_gemv.DTYPES or not measuring_enabled() or not native_gemv.available():
        return None
    n = copies(shape, dtype, count)

    def candidates() -> Candidates:
        plain_in_out = weight_layout(shape, dtype, count).winner == "in_out"
        x = torch.randn(1, shape[1], generator=_probe_generator()).to(dtype)
        plain = matrices(shape, dtype, n, in_out=plain_in_out)
        rows = matrices(shape, dtype, n, in_out=False)

        def compiled(threads: int):
            for w in rows:
                native_gemv.linear(x, w, None, threads)

        out: Candidates = {"aten": lambda: _gemv_pass(x, plain), "compiled": lambda: compiled(0)}
        if torch.get_num_threads() > 1:
            out["compiled_1_thread"] = lambda: compiled(1)
        return out

    name = str(dtype).replace("torch.", "")
    return choose(
        ("one-row kernel", tuple(shape), dtype, n),
        f"{name} one-row kernel {tuple(shape)}",
        candidates,
        label=("kernel", {"dtype": name, "shape": tuple(shape)}),
    )


def vocabulary_threads(vocab: int) -> Choice | None:
    """All of torch's threads or one for a decode step's work on one row of ``vocab`` logits (a
    softmax, a top-k, a few reductions: the sampler's). Each operation is short, so a second thread
    saves microseconds when it is awake and costs milliseconds when the CPU is busy with other work
    and the thread must wait its turn to wake. None with one thread: nothing to choose."""
    if torch.get_num_threads() < 2:
        return None

    def candidates() -> Candidates:
        logits = torch.randn(vocab, generator=_probe_generator()) * 3

        def work():
            for _ in range(4):
                p = torch.softmax(logits, dim=-1)
                bool(torch.isfinite(logits).all())
                torch.topk(p, 10)
                float(torch.special.entr(p).sum())
                int((p > p[0]).sum())

        def one():
            with torch_threads(1):
                work()

        return {"all": work, "one": one}

    return choose(
        ("vocabulary threads", vocab),
        f"threads for one row of {vocab} logits (the sampler)",
        candidates,
        label=("vocab", {"vocab": vocab}),
    )


def vocabulary_threads_decided(vocab: int) -> int | None:
    """1 if ``vocabulary_threads`` chose one thread (for the calling thread's thread count), else
    None (all threads, or not decided); never measures: what a decode step asks."""
    choice = decided(("vocabulary threads", vocab))
    return 1 if choice is not None and choice.winner == "one" else None
