"""One decoder for every learner: a background thread that advances every active generation.

A generation joins with ``LOOP.submit(gen, key=run_id)`` and gets a ``Stream`` (``server.streams``): the steps
the loop made for it, which its consumer (a UI handler in its own thread) waits for and takes. The loop never
waits for a consumer; a consumer never holds the loop.

How a round goes (``DecodeLoop._round``):

- **Stop and leave first.** Runs whose stop was asked for (``stop(key)``, ``Stream.stop()``, a consumer
  that went away) or that are done leave before anything is computed. A stopped run's consumer is
  answered at once, with the steps delivered before the stop (the step in flight is dropped).
- **Prompts.** Where the decoder takes a whole prompt as one row (``Decoder.prompt_rows``: the native
  step, prompts of up to 48 tokens), it joins the shared forward below, whose weights are then read
  once for the newcomers' prompts and everyone's next tokens; at most ``PROMPT_TOKENS_PER_ROUND``
  prompt tokens a round, in join order. A step with no row of a shared forward (a longer prompt, a
  step after the window slid) runs alone (``Generation.step_alone``): at most
  ``PROMPT_STEPS_PER_ROUND`` of them per round, the run that waited longest first, so a newcomer's
  first token comes within a round or two and a burst of newcomers never stalls the runs already going.
- **One shared forward.** The model groups take turns (round-robin): this round's group computes the
  next row of every one of its runs at once (``decoder_of(model).rows``), and each run chooses its own
  token from its own row (``Generation.advance``, its own sampler, seed and settings). Every run of a
  group makes one token per shared step, so a short run is never starved by a long one; runs join
  and leave between steps (continuous batching).
- **Errors stay in their run.** An exception in one run's step (NaN logits, ...) ends that run and is
  delivered to its stream; if a shared forward itself fails, its rows are rewound and computed one by
  one, so only the failing run ends. The thread logs anything else and goes on.

A decoder's rows give each row the numbers it would give it alone (``engine.decoding``), so a run's
tokens, probabilities, receipts and attention never depend on who decodes beside it.

On a ZeroGPU Space a run of a model big enough for the GPU (``gpu.uses_gpu_slots``) does not join the
rounds: it gets a GPU slot of its own (``gpu_runs``), and its stream is fed from there; ``stop``,
``running`` and ``active`` count it like any other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import torch

from playground.engine.config import GPTConfig
from playground.engine.decoding import decoder_of
from playground.engine.sampling import Generation, GenerationStep
from playground.runtime.memory import BUDGET
from playground.runtime.threads import name_os_thread, release_openmp_workers, set_thread_count
from playground.server import gpu_runs
from playground.server.gpu import uses_gpu_slots
from playground.server.runs import attention_bytes
from playground.server.streams import Stream

log = logging.getLogger(__name__)

PROMPT_STEPS_PER_ROUND = 2
# The prompt tokens fed as rows of one shared forward beside the runs already going (see
# ``_prompts_for_later``): two short prompts a round, as many rows as keep every row's input in the
# core's cache while each block of weights passes over them (with hundreds of rows the step slows).
PROMPT_TOKENS_PER_ROUND = 64
# The Generate event's workers (each waits on its stream): the budget over one run's KV cache and
# attention, at least a room of 30 learners and at most 64 (each waiting worker holds a thread).
MIN_CONCURRENT_RUNS, MAX_CONCURRENT_RUNS = 32, 64
TIMELINE_STEPS = 4096  # the last shared steps a loop keeps the times of (about 200 bytes each)


class SharedStep(NamedTuple):
    """One shared forward and its rows' samplers, for tools (``bench.room_profile --rounds``): when it
    began (``time.perf_counter``), its rows, and the seconds its forward, its sampled rows together and
    the whole step took."""

    start: float
    rows: int
    forward_s: float
    sampling_s: float
    total_s: float


class DecodeLoop:
    """The background thread and the runs it advances (see the module's docstring)."""

    def __init__(
        self,
        prompt_steps_per_round: int = PROMPT_STEPS_PER_ROUND,
        prompt_tokens_per_round: int = PROMPT_TOKENS_PER_ROUND,
        threads: int | None = None,
        name: str = "decode-loop",
    ):
        # The shared forward's intra-op threads: the count the process starts with (the kernels' decisions
        # are measured on it, accel.DECODE_THREADS), set on the loop's thread itself
        self.threads = threads or torch.get_num_threads()
        self.name = name  # its thread's, in Python and in the OS
        self.prompt_steps_per_round = prompt_steps_per_round
        self.prompt_tokens_per_round = prompt_tokens_per_round
        self._cond = threading.Condition()
        self._streams: list[Stream] = []  # in join order
        self._by_key: dict[str, Stream] = {}
        self._gpu_runs: set[Stream] = set()  # runs in GPU slots of their own (gpu_runs), not in the rounds
        self._next_model = 0  # the round-robin's position: the model group (by join order) that goes next
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None  # the rows' samplers (_shared_step)
        self.rounds = 0  # rounds made, for tests and tools
        self.timeline: deque[SharedStep] = deque(maxlen=TIMELINE_STEPS)  # the latest shared steps, for tools

    def submit(
        self, gen: Generation, key: str | None = None, wake: threading.Event | None = None, stopped: bool = False
    ) -> Stream:
        """``gen`` (not yet started, or between steps) joins the loop. A ``key`` (a run id) lets ``stop``
        find it; a run submitted under a key already in the loop replaces that one (it stops). A run submitted
        ``stopped`` (its Stop came first) ends before its first step."""
        stream = Stream(self, gen, key, wake)
        if stopped:
            stream.stop()
        in_slot = not gen.steps and uses_gpu_slots(gen.model)  # a run from its start, of a model for the GPU
        with self._cond:
            if key is not None:
                old = self._by_key.get(key)
                if old is not None:
                    old.stop()
                self._by_key[key] = stream
            if in_slot:
                self._gpu_runs.add(stream)
            else:
                self._streams.append(stream)
                self._start()
                self._cond.notify()
        if in_slot:
            gpu_runs.start(stream, lambda: self._left_slot(stream))
        return stream

    def _left_slot(self, stream: Stream) -> None:
        with self._cond:
            self._gpu_runs.discard(stream)
            if stream.key is not None and self._by_key.get(stream.key) is stream:
                del self._by_key[stream.key]

    def stop(self, key: str | None) -> bool:
        """Stop the run submitted under ``key``; False if no such run is in the loop."""
        with self._cond:
            stream = self._by_key.get(key or "")
        if stream is None:
            return False
        stream.stop()
        return True

    def running(self, key: str | None) -> bool:
        """Whether the run submitted under ``key`` still streams (a stopped one does not: its consumer has
        its last step, though the loop lets it go only at its next round)."""
        with self._cond:
            stream = self._by_key.get(key or "")
            return stream is not None and not stream.stop_asked

    def active(self) -> int:
        """Runs in the loop now (every user's, every model's, in the rounds or in GPU slots)."""
        with self._cond:
            return len(self._streams) + len(self._gpu_runs)

    def poke(self) -> None:
        with self._cond:
            self._cond.notify()

    def steps(self, gen: Generation) -> Generator[GenerationStep, None, None]:
        """``gen``'s steps, made by the loop, for a caller that reads them in order (a replay). Closing
        the iterator early takes the run out of the loop. Raises the error that ended the run."""
        stream = self.submit(gen)
        try:
            while True:
                stream.wait(1.0)
                new, ended = stream.take()
                yield from new
                if ended:
                    if stream.error is not None:
                        raise stream.error
                    return
        finally:
            stream.stop()

    # The thread

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._decode_forever, name=self.name, daemon=True)
            self._thread.start()

    def _decode_forever(self) -> None:
        torch.set_grad_enabled(False)  # per thread: the loop's forwards never build graphs
        set_thread_count(self.threads)
        name_os_thread(self.name)  # (its OpenMP workers take the name too)
        while True:
            with self._cond:
                idle = not self._streams
            if idle:  # its OpenMP workers, kept while it waits, would make every other thread's teams sleep
                release_openmp_workers()
                with self._cond:
                    while not self._streams:
                        self._cond.wait()
            try:
                self._round()
            except Exception:  # a bug here must not end every learner's runs: log it and go on
                log.exception("decode loop round failed")
                time.sleep(0.01)

    def _round(self) -> None:
        self.rounds += 1
        streams = self._leave()
        groups: dict[int, list[Stream]] = {}
        for s in streams:
            groups.setdefault(id(s.gen.model), []).append(s)
        rows = {}
        for s in streams:
            row = self._row_of(s)
            if row is not None:
                rows[id(s)] = row
        later = self._prompts_for_later(streams, rows)
        # Prompt steps: the runs that waited longest for one first.
        alone = sorted(
            (s for s in streams if id(s) not in rows and id(s) not in later and not s.ended),
            key=lambda s: s.waited_since,
        )
        for s in alone[: self.prompt_steps_per_round]:
            if s.stop_asked:
                continue
            others = len(groups[id(s.gen.model)]) - 1
            try:
                step = s.gen.step_alone()
            except Exception as e:  # this run only
                s._end(e)
                continue
            s.waited_since = time.monotonic()
            s._deliver(step, others)
        # One shared forward for the next model group (in join order) that has rows.
        order = list(groups)
        for i in range(len(order)):
            key = order[(self._next_model + i) % len(order)]
            batch = [s for s in groups[key] if id(s) in rows and not s.stop_asked and not s.ended]
            if batch:
                self._next_model = (self._next_model + i + 1) % len(order)
                self._shared_step(batch, [rows[id(s)] for s in batch])
                break

    def _prompts_for_later(self, streams: list[Stream], rows: dict) -> set[int]:
        """Prompts the decoder takes as rows join the shared forward, the longest-waiting first, at most
        ``prompt_tokens_per_round`` of their tokens a round (always one prompt): the others are taken out of
        ``rows`` until a later round, so a burst of newcomers holds the runs already going for one short
        step at a time. The streams left for later (their ids)."""
        waiting = sorted((s for s in streams if id(s) in rows and rows[id(s)].cache.length == 0), key=lambda s: s.order)
        room, later = self.prompt_tokens_per_round, set()
        for i, s in enumerate(waiting):
            n = rows[id(s)].n_tokens
            if i > 0 and n > room:
                later.add(id(s))
                del rows[id(s)]
            else:
                room -= n
        return later

    def _leave(self) -> list[Stream]:
        """Take out the runs that are done or asked to stop; the ones that stay, in join order."""
        with self._cond:
            leaving = [s for s in self._streams if s.stop_asked or s.ended or s.gen.done]
            if leaving:
                self._streams = [s for s in self._streams if s not in leaving]
                for s in leaving:
                    if s.key is not None and self._by_key.get(s.key) is s:
                        del self._by_key[s.key]
            staying = list(self._streams)
        for s in leaving:
            if not s.ended:
                s._end()
        return staying

    def _row_of(self, s: Stream):
        try:
            return s.gen.next_row()
        except Exception as e:
            s._end(e)
            return None

    def _shared_step(self, batch: list[Stream], rows: list) -> None:
        start = time.perf_counter()
        model = batch[0].gen.model
        decoder = decoder_of(model)
        lengths = [row.cache.length for row in rows]
        sampling = 0.0
        try:
            results: list = decoder.rows(model, rows)  # a row that failed alone: None (below)
        except Exception:
            # Which row failed is unknown: rewind every cache and compute the rows one by one.
            for row, n in zip(rows, lengths):
                row.cache.length = n
            results = []
            for s, row in zip(batch, rows):
                try:
                    results.append(decoder.rows(model, [row])[0])
                except Exception as e:
                    s._end(e)
                    results.append(None)
        forward = time.perf_counter() - start
        others = len(batch) - 1
        gens = [s.gen for s in batch]
        # (a row whose forward failed alone has ended its run above: nothing to choose)
        chosen: list = [None if r is not None else (None, None) for r in results]
        # The sampled rows the decoder makes together: one call for the room, each row whole on one thread (its
        # numbers its own), then each run takes its fields here; a room's thirty hand-overs to a pool and the
        # interpreter lock passed between its threads cost more than the rows' Python.
        asks = []
        for i, (g, r) in enumerate(zip(gens, results)):
            ask = g.sampled_row(r) if r is not None else None
            if ask is not None:
                asks.append((i, ask))
        if asks:
            began = time.perf_counter()
            try:
                made = decoder.sample_rows([a for _, a in asks])
                sampling = time.perf_counter() - began
            except Exception:  # the rows go one by one below (the accelerated decoder gave back every generator)
                log.exception("sampling a step's rows together")
            else:
                for (i, _), fields in zip(asks, made):
                    chosen[i] = _advance(gens[i], results[i], fields, sampled=True)
        # The rest (greedy rows, the plain sampler's) in the pool, each on one torch thread, one task a
        # sampler thread taking every n-th row, so a row's numbers never depend on how many share the step.
        rest = [i for i in range(len(batch)) if chosen[i] is None]
        n = max(1, min(self.threads, len(rest)))
        if rest:
            parts = self._samplers().map(lambda j: [_advance(gens[i], results[i]) for i in rest[j::n]], range(n))
            for j, part in enumerate(parts):
                for i, got in zip(rest[j::n], part):
                    chosen[i] = got
        for s, (step, error) in zip(batch, chosen):
            if error is not None:  # e.g. NaN logits: this run only
                s._end(error)
            elif step is not None:
                s._deliver(step, others)
        self.timeline.append(SharedStep(start, len(batch), forward, sampling, time.perf_counter() - start))

    def _samplers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=max(1, self.threads), thread_name_prefix="sampler", initializer=_one_thread
            )
        return self._pool


def _one_thread() -> None:
    set_thread_count(1)  # this sampler's thread only (torch.set_num_threads would also set every later thread's)
    name_os_thread(threading.current_thread().name)  # (not the loop's, which started it)
    torch.set_grad_enabled(False)


def _advance(gen: Generation, result, fields=None, sampled=False) -> tuple[GenerationStep | None, Exception | None]:
    if result is None:
        return None, None
    try:
        return gen.advance(result, fields, sampled), None
    except Exception as e:
        return None, e


LOOP = DecodeLoop()


def concurrent_runs(cfg: GPTConfig, budget_bytes: int | None = None) -> int:
    """How many Generate events may run at once for models like ``cfg``: the memory budget over one
    run's KV cache (for a full context) and its attention for the views, within
    [MIN_CONCURRENT_RUNS, MAX_CONCURRENT_RUNS]. The budget still refuses each run that does not fit
    (``start_run``); this only bounds how many wait on the loop at once."""
    elem = 4
    kv = 2 * cfg.n_layers * cfg.context_length * cfg.emb_dim * elem
    per_run = kv + attention_bytes(cfg, cfg.context_length)
    total = BUDGET.total if budget_bytes is None else budget_bytes
    return max(MIN_CONCURRENT_RUNS, min(MAX_CONCURRENT_RUNS, total // per_run))
