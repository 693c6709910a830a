"""One generation's place in the decode loop: the steps made for it that its consumer has not taken yet.

``server.decode_loop`` makes the steps; the consumer (a UI handler in its own thread) waits for them and takes them.

The loop delivers and ends (``_deliver``, ``_end``); the consumer waits, takes and stops. Neither holds
the other: the loop never waits for a consumer, and a consumer's Stop is answered at once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Protocol

from playground.engine.sampling import Generation, GenerationStep

log = logging.getLogger(__name__)


class Loop(Protocol):
    """What a stream needs of its loop: to be woken when its run's stop is asked."""

    def poke(self) -> None: ...


class Stream:
    """One generation's place in the loop: the steps made for it that its consumer has not taken yet.

    The consumer waits with ``wait`` and takes with ``take`` (the steps and whether the run ended);
    ``error`` is the exception that ended it, ``others`` how many other runs shared its latest step."""

    def __init__(self, loop: Loop, gen: Generation, key: str | None, wake: threading.Event | None):
        self.loop, self.gen, self.key = loop, gen, key
        self.wake = wake if wake is not None else threading.Event()  # several streams may share one
        self.order = next(_ORDER)  # join order, for the prompt steps' queue
        self.waited_since = time.monotonic()  # since its last prompt step (or joining)
        self.error: Exception | None = None
        self.others = 0
        self._lock = threading.Lock()
        self._new: list[GenerationStep] = []
        self._done = threading.Event()  # set once the run has ended, or its stop was asked
        self._ended = threading.Event()  # set once the run has ended (its generation closed)
        self._stop = threading.Event()

    def stop(self) -> None:
        """Leave the loop before its next step. The consumer is answered at once: its run ends with the steps
        it was delivered (a step in flight is made but dropped), so Stop never waits for a shared step, which
        takes a quarter of a second for a room of GPT-2 small on a slow machine."""
        with self._lock:  # (after this no step is delivered)
            self._stop.set()
        self._done.set()
        self.wake.set()
        self.loop.poke()

    @property
    def stop_asked(self) -> bool:
        return self._stop.is_set()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Until the loop made a step for this stream (or one sharing its ``wake``) or ended it."""
        woke = self.wake.wait(timeout)
        self.wake.clear()  # before ``take``: a step delivered after it sets the event again
        return woke

    def wait_end(self, timeout: float) -> bool:
        """Until the run ended, at most ``timeout`` s: a consumer that shows steps only now and then sleeps
        between its updates instead of waking at every step (thirty awake consumers hold up the loop)."""
        return self._done.wait(timeout)

    def wait_released(self, timeout: float) -> bool:
        """Until the loop (or the run's GPU slot) has let the run go and given back what it held, at most
        ``timeout`` s: a stopped run's consumer is answered before that (``wait_end``)."""
        return self._ended.wait(timeout)

    def take(self) -> tuple[list[GenerationStep], bool]:
        """The steps made since the last take, and whether the run has ended or was stopped (no steps will
        follow)."""
        with self._lock:
            new, self._new = self._new, []
            return new, self._ended.is_set() or self._stop.is_set()

    # The loop's side

    def _deliver(self, step: GenerationStep, others: int) -> None:
        with self._lock:
            if self._stop.is_set():  # the consumer was told the run ended: the step in flight is dropped
                return
            self._new.append(step)
            self.others = others
        self.wake.set()

    def _end(self, error: Exception | None = None) -> None:
        try:
            self.gen.close()  # the model's training mode as it was
        except Exception:  # closing never keeps the stream open
            log.exception("closing a generation")
        with self._lock:
            if error is not None:
                self.error = error
            self._ended.set()
        self._done.set()
        self.wake.set()


_ORDER = itertools.count()
