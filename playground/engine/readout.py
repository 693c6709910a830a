"""Reading many residual-stream rows out through the output head, without a (rows, V) matrix.

Scoring a text, the logit lens and an intervention's per-position loss all need, for each of
hundreds or thousands of rows, a few numbers of that row's logits over the whole vocabulary: the
top token and its logit, the log-sum-exp (so any probability is ``exp(logit - lse)``), one target
token's logit, and sometimes the target's rank. Computing all the logits first and reducing them
afterwards streams a (rows × 50,257) float32 matrix through memory several times (a 256-token
GPT-2 run: 51 MB per pass). ``HeadReader`` instead reads rows in chunks of ``CHUNK_ROWS``: one
product with the head into a buffer it reuses (no fresh pages to fault in), then reductions of
that buffer while it is still in cache. More rows than a chunk, when no ranks are asked for, are read
the other way round: all of them (up to ``TILE_ROWS``) against one tile of ``TILE_COLUMNS`` of the
vocabulary at a time, each tile's figures kept and merged in tile order, so the head's weight is read
from memory once for them all instead of once a chunk (the logit lens of a 256-token GPT-2 run reads
its 416 rows in 0.10 s instead of 0.16 s; docs/benchmarks.md).

The product itself runs in torch or in numpy, whichever ``many_row_product`` measured
faster on this machine. On the CPU the argmax and the comparison count run in numpy, whose SIMD loops for them measured
5-20× faster than torch's on the machines we met (torch's ``max`` with indices and its bool
``sum`` are not vectorised); ``exp`` stays in torch, which was the faster of the two. Anything else
(a bfloat16 or int8 head, a GPU) takes the plain torch path with the same results.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from threadpoolctl import ThreadpoolController

from playground.runtime import kernels
from playground.runtime.threads import set_thread_count

CHUNK_ROWS = 64  # (64, 50,257) float32 is 12.9 MB: stays in a 32 MB last-level cache while reduced
# More rows than a chunk, without ranks: every row against one tile of the vocabulary at a time, so the
# head's weight (154 MB for GPT-2) is read from memory once for up to TILE_ROWS rows, not once a chunk.
# (512, 2,048) float32 is 4 MB, in cache while reduced.
TILE_ROWS, TILE_COLUMNS = 512, 2048


_OPENBLAS = None
_BLAS_LOCK = threading.Lock()
_BLAS_HOLDERS = 0
_BLAS_LIMIT = None


@contextmanager
def one_blas_thread():
    """Within: numpy's OpenBLAS computes on the calling thread only (threadpoolctl). With its own
    threads, they and torch's OpenMP threads spin waiting for each other between a product and the
    torch reductions that follow it (measured 1.8x slower on a 2-core machine); the readout's
    parallelism comes from its lanes instead. Other libraries (torch's MKL, OpenMP) are left
    alone. The limit is process-wide: overlapping holders (two users' readouts, a readout's lanes)
    share one limit, set by the first to enter and lifted by the last to leave."""
    global _OPENBLAS, _BLAS_HOLDERS, _BLAS_LIMIT
    with _BLAS_LOCK:
        if _OPENBLAS is None:
            _OPENBLAS = ThreadpoolController().select(internal_api="openblas")
        if _BLAS_HOLDERS == 0:
            _BLAS_LIMIT = _OPENBLAS.limit(limits=1)
        _BLAS_HOLDERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_HOLDERS -= 1
            if _BLAS_HOLDERS == 0:
                _BLAS_LIMIT.restore_original_limits()
                _BLAS_LIMIT = None


def available_lanes() -> int:
    """How many lanes a readout from the calling thread may use: its torch thread count (a
    background training thread has one fewer, so its readouts leave a core to the others),
    at most the cores this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), cores))


_POOL = None
_POOL_LOCK = threading.Lock()


def _helpers(n: int) -> ThreadPoolExecutor:
    """Threads that run the lanes beside the caller's own, each with one torch thread (the
    setting is per thread, so the callers' threads keep theirs)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < n:
            _POOL = ThreadPoolExecutor(
                max_workers=n, thread_name_prefix="readout-lane", initializer=set_thread_count, initargs=(1,)
            )
        return _POOL


@dataclass
class RowFigures:
    """Per row (1-D float64/int64 tensors on the CPU): the top token, its logit, the log-sum-exp
    of the row, and -- when targets were given -- the target's logit and rank (1 = top)."""

    top_id: torch.Tensor
    top_logit: torch.Tensor
    lse: torch.Tensor
    target_logit: torch.Tensor | None = None
    rank: torch.Tensor | None = None

    @property
    def top_prob(self) -> torch.Tensor:
        return (self.top_logit - self.lse).exp()

    @property
    def target_logp(self) -> torch.Tensor:
        """log p(target), in nats."""
        if self.target_logit is None:
            raise ValueError("these rows were read without targets")
        return self.target_logit - self.lse


class HeadReader:
    """``reader(rows, targets=None, rank=False, norm=False) -> RowFigures`` for ``rows`` (n, d) of
    the residual stream (``norm``: apply ``final_norm`` first) or of final_norm's output.

    With the numpy product, chunks are shared out to ``lanes`` threads (the caller's and pool
    threads), each multiplying and reducing its own chunks with one BLAS thread and one torch
    thread into its own buffer: every step of the readout runs on every core, where one product on
    several BLAS threads leaves the reductions after it to one core (and its threads idle-spinning
    against torch's)."""

    def __init__(self, model, chunk_rows: int = CHUNK_ROWS, product: str | None = None, lanes: int | None = None):
        """``product``: "torch" or "numpy" for the head's product; None: the one measured faster.
        ``lanes``: threads for the numpy product (default: ``available_lanes()``)."""
        self.model, self.head, self.chunk = model, model.out_head, chunk_rows
        w = self.head.weight
        self.fast = _reads_fast(self.head)
        if self.fast:
            self._setup(w.detach().t(), chunk_rows, product, lanes)

    @classmethod
    def for_weight(
        cls, weight_t: torch.Tensor, chunk_rows: int = CHUNK_ROWS, product: str = "torch", lanes: int | None = None
    ) -> HeadReader:
        """A reader of rows that are already final_norm's output, for a (d, V) float32 head (the
        kernel measurement's own use)."""
        reader = cls.__new__(cls)
        reader.model, reader.head, reader.chunk, reader.fast = None, None, chunk_rows, True
        reader._setup(weight_t, chunk_rows, product, lanes)
        return reader

    def _setup(self, weight_t: torch.Tensor, chunk_rows: int, product: str | None, lanes: int | None) -> None:
        self.weight_t = weight_t  # (d, V), a view: whatever layout the kernels chose
        # torch's BLAS or numpy's for the product: measured once per process and shape
        self.numpy_product = (product or many_row_product(weight_t).winner) == "numpy"
        self.lanes = (lanes or available_lanes()) if self.numpy_product else 1
        self._buffers: list[
            tuple[torch.Tensor, np.ndarray]
        ] = []  # per lane: (chunk_rows, V) logits and a bool mask, allocated on first use
        if self.numpy_product:
            self.weight_np = weight_t.numpy()  # C- or F-ordered: BLAS takes either

    def _buffer(self, lane: int):
        while len(self._buffers) <= lane:
            V = self.weight_t.size(1)
            self._buffers.append((torch.empty(self.chunk, V), np.empty((self.chunk, V), dtype=bool)))
        return self._buffers[lane]

    @torch.no_grad()
    def __call__(self, rows: torch.Tensor, targets=None, *, rank: bool = False, norm: bool = False) -> RowFigures:
        if targets is not None:
            targets = torch.as_tensor(targets, dtype=torch.long).reshape(-1)
            if targets.numel() != rows.size(0):
                raise ValueError(f"{rows.size(0)} rows but {targets.numel()} targets")
            # (numpy's indexing would take -1 as the last token, and torch's gather says less)
            V = self.weight_t.size(1) if self.fast else self.head.weight.size(0)
            if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= V):
                bad = int(targets[(targets < 0) | (targets >= V)][0])
                raise IndexError(f"target token id {bad} is outside the vocabulary of {V:,}")
        starts = range(0, rows.size(0), self.chunk)
        if not self.fast:
            parts = [
                self._plain(
                    self._normed(rows[s : s + self.chunk], norm),
                    None if targets is None else targets[s : s + self.chunk],
                    rank,
                )
                for s in starts
            ]
        else:
            x = self._normed(rows, norm).float().contiguous()  # (n, d): small next to the logits
            if _reads_in_tiles(x.size(0), rank, self.chunk):
                parts = [
                    self._tiled(x[s : s + TILE_ROWS], None if targets is None else targets[s : s + TILE_ROWS])
                    for s in range(0, x.size(0), TILE_ROWS)
                ]
            else:
                parts = self._in_lanes(x, targets, rank, starts)
        cat: list[Any] = [None if parts[0][i] is None else torch.cat([p[i] for p in parts]) for i in range(5)]
        return RowFigures(*cat)

    def _normed(self, x, norm):
        return self.model.final_norm(x.to(self.model.dtype)) if norm else x

    def _in_lanes(self, x, targets, rank, starts):
        parts = [None] * len(starts)
        lanes = min(self.lanes, len(starts))
        for lane in range(lanes):
            self._buffer(lane)

        def chunk(i: int, lane: int) -> None:
            s = starts[i]
            t = None if targets is None else targets[s : s + self.chunk]
            parts[i] = self._fast(x[s : s + self.chunk], t, rank, self._buffers[lane])

        self._share_out(len(starts), lanes, chunk)
        return parts

    def _share_out(self, n: int, lanes: int, work) -> None:
        """``work(i, lane)`` for i in 0..n-1, shared out to ``lanes`` lanes (the caller and pool threads,
        each on one BLAS and one torch thread); each lane takes the next item in turn, so one that starts
        late just takes fewer."""
        if lanes == 1:
            with one_blas_thread() if self.numpy_product else _nothing():
                for i in range(n):
                    work(i, 0)
            return
        todo = itertools.count()

        def lane_work(lane: int):
            while (i := next(todo)) < n:
                work(i, lane)

        caller_threads = torch.get_num_threads()
        with one_blas_thread():
            futures = [_helpers(lanes - 1).submit(lane_work, lane) for lane in range(1, lanes)]
            set_thread_count(1)  # per thread: the caller is one lane among them
            try:
                lane_work(0)
            finally:
                set_thread_count(caller_threads)
                for f in futures:
                    f.result()  # waits, and raises a lane's error here

    def _tiled(self, x, targets):
        """Up to TILE_ROWS rows read out a vocabulary tile at a time: each tile's top, its max and the
        sum of its exp after that max (and the targets inside it) are kept per tile, then merged in tile
        order, so the figures are the same whichever lane reduced which tile."""
        r, V = x.size(0), self.weight_t.size(1)
        starts = range(0, V, TILE_COLUMNS)
        top = np.empty((len(starts), r), dtype=np.int64)
        tmax = np.empty((len(starts), r), dtype=np.float32)
        shift = np.zeros((len(starts), r), dtype=np.float64)
        sums = np.empty((len(starts), r), dtype=np.float64)
        rows = np.arange(r)
        t_ids = None if targets is None else targets.numpy()
        target_logit = None if targets is None else np.empty(r, dtype=np.float64)
        x_np = x.numpy()

        def tile(i: int, buf: torch.Tensor) -> None:
            s = starts[i]
            w = min(TILE_COLUMNS, V - s)
            logits = buf.view(-1)[: r * w].view(r, w)
            if self.numpy_product:
                np.matmul(x_np, self.weight_np[:, s : s + w], out=logits.numpy())
            else:
                torch.mm(x, self.weight_t[:, s : s + w], out=logits)
            arr = logits.numpy()
            at = arr.argmax(axis=1)
            top[i], tmax[i] = at + s, arr[rows, at]
            if t_ids is not None:
                inside = (t_ids >= s) & (t_ids < s + w)  # each row's target lies in one tile: no two lanes write it
                target_logit[inside] = arr[rows[inside], t_ids[inside] - s]
            # exp(logit) needs no shift while every row's max lies in ±60 (the tile's sum stays far inside
            # float32's range), which saves a pass
            if float(np.abs(tmax[i]).max()) >= 60.0:
                shift[i] = tmax[i]
                logits.sub_(torch.from_numpy(tmax[i])[:, None])
            sums[i] = logits.exp_().sum(dim=-1).numpy()

        lanes = min(self.lanes, len(starts))
        buffers = [torch.empty(TILE_ROWS * TILE_COLUMNS) for _ in range(lanes)]
        self._share_out(len(starts), lanes, lambda i, lane: tile(i, buffers[lane]))
        first = tmax.argmax(axis=0)  # the first tile holding the row's largest logit: argmax's first index
        best = tmax[first, rows].astype(np.float64)
        lse = best + np.log((sums * np.exp(shift - best)).sum(axis=0))
        return (
            torch.from_numpy(top[first, rows]),
            torch.from_numpy(best),
            torch.from_numpy(lse),
            None if target_logit is None else torch.from_numpy(target_logit),
            None,
        )

    def _plain(self, x, targets, rank):
        logits = self.head(x).float()  # (r, V)
        best, top = logits.max(dim=-1)
        lse = torch.logsumexp(logits, dim=-1).double()
        if targets is None:
            return top.cpu(), best.double().cpu(), lse.cpu(), None, None
        target_logit = logits.gather(1, targets.to(logits.device)[:, None])
        r = (logits > target_logit).sum(dim=-1).cpu() + 1 if rank else None
        return top.cpu(), best.double().cpu(), lse.cpu(), target_logit[:, 0].double().cpu(), r

    def _fast(self, x, targets, rank, buffers):
        r = x.size(0)
        buf, mask_buf = buffers
        logits = buf[:r]
        if self.numpy_product:
            np.matmul(x.numpy(), self.weight_np, out=logits.numpy())  # (r, V)
        else:
            torch.mm(x, self.weight_t, out=logits)  # (r, V)
        arr = logits.numpy()
        rows = np.arange(r)
        top = arr.argmax(axis=1)
        best = arr[rows, top]
        target_logit = ranks = None
        if targets is not None:
            target_logit = arr[rows, targets.numpy()]
            if rank:
                mask = np.greater(arr, target_logit[:, None], out=mask_buf[:r])
                ranks = torch.from_numpy(np.array([np.count_nonzero(m) for m in mask], dtype=np.int64) + 1)
            target_logit = torch.from_numpy(target_logit.astype(np.float64))
        # log-sum-exp, in place and last: exp(logit) needs no shift while every row max lies in
        # ±60 (the sum then stays far inside float32's range), which saves a pass
        if float(np.abs(best).max()) < 60.0:
            lse = logits.exp_().sum(dim=-1).log().double()
        else:
            shift = torch.from_numpy(best.copy())
            lse = shift.double() + logits.sub_(shift[:, None]).exp_().sum(dim=-1).log().double()
        return (torch.from_numpy(top).long(), torch.from_numpy(best.astype(np.float64)), lse, target_logit, ranks)


def _reads_fast(head) -> bool:
    w = head.weight
    return w.dtype == torch.float32 and getattr(head, "bias", None) is None and w.device.type == "cpu"


def _reads_in_tiles(rows: int, rank: bool, chunk_rows: int = CHUNK_ROWS) -> bool:
    """Whether a fast reader reads ``rows`` a vocabulary tile at a time (more than a chunk, no ranks)."""
    return rows > chunk_rows and not rank


def reading_bytes(model, rows: int, rank: bool = False) -> int:
    """The most a ``HeadReader(model)`` holds at once while it reads out ``rows`` rows (``rank``: with
    ranks), beside the rows given it: every lane's buffer (a tile of logits, or a chunk's logits and
    their rank mask; a chunk's float32 logits, log-sum-exp and comparison off the float32 path), the
    per-tile figures, the rows after final_norm, and the figures returned. What a memory reservation
    for a readout holds."""
    V, d = model.out_head.weight.shape
    normed = 2 * rows * d * 4  # final_norm's output and its float32 copy
    figures = 2 * rows * 5 * 8  # five figures a row, per part and concatenated
    lanes = available_lanes()
    if not _reads_fast(model.out_head):
        return normed + figures + 3 * min(rows, CHUNK_ROWS) * V * 4
    if _reads_in_tiles(rows, rank):
        tiles = -(-V // TILE_COLUMNS)
        per_tile = tiles * min(rows, TILE_ROWS) * (8 + 4 + 8 + 8)  # top, max, shift, sum of exp
        return normed + figures + min(lanes, tiles) * TILE_ROWS * TILE_COLUMNS * 4 + per_tile
    lanes = min(lanes, -(-rows // CHUNK_ROWS))
    return normed + figures + lanes * CHUNK_ROWS * V * (4 + 1)


@contextmanager
def _nothing():
    yield


def many_row_product(weight_t: torch.Tensor) -> kernels.Choice:
    """Who multiplies chunks of rows by the output head, (64, d)·(d, V) float32, when many rows are
    read out at once (scoring, the logit lens, per-position losses): PyTorch's BLAS on its own
    threads, or numpy's OpenBLAS on one thread in each of ``available_lanes()`` lanes (threads
    that each multiply and reduce their own chunks; OpenBLAS's own threads and torch's take turns
    badly between a product and the torch reductions after it). Which is faster depends on the CPU
    and the two libraries' builds, so it is timed on the real work: ``HeadReader`` itself over a
    few chunks of random rows with the model's own head ``weight_t`` (d, V)."""
    d, V = weight_t.shape
    lanes = available_lanes()

    def candidates() -> kernels.Candidates:
        gen = torch.Generator().manual_seed(0)
        rows = torch.randn(2 * lanes * CHUNK_ROWS, d, generator=gen)  # two chunks a lane
        targets = torch.randint(0, V, (rows.size(0),), generator=gen)
        readers = {p: HeadReader.for_weight(weight_t, product=p, lanes=lanes) for p in ("torch", "numpy")}
        return {p: functools.partial(r, rows, targets, rank=True) for p, r in readers.items()}

    return kernels.choose(
        ("many-row product", d, V, lanes),
        f"float32 many-row product (64, {d})·({d}, V), numpy in {lanes} lane{'s' * (lanes > 1)}",
        candidates,
        label=("rows", {"d": d, "lanes": lanes}),
    )
