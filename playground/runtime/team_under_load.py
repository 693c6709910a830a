"""The team size of a repeated parallel call, kept right while the machine's load changes.

A call whose threads meet at barriers many times (the native decode step: four per block) is fastest on every
core while the cores are free, and slowest there when another process takes one of them: each barrier then
waits for a descheduled thread, and one thread alone is faster. A decision measured once per process, during a lull or a busy spell, is wrong for the
other. ``TeamChoice`` keeps the measured choice and, every ``EXPLORE_EVERY`` calls, runs one call on the
other team size; it switches when that call was clearly faster than the recent ones on the current size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXPLORE_EVERY = 32  # calls between two tries of the other team size: 1/32 of the calls on the slower one
MARGIN = 0.85  # the other size wins when its try takes under this share of the current size's recent time
SMOOTHING = 0.2  # weight of the newest call in the current size's running time


@dataclass
class TeamChoice:
    """Two team sizes (``sizes``; 0 meaning all of torch's threads) and the one in use (``current``)."""

    current: int
    sizes: tuple[int, int] = (0, 1)
    recent: float | None = None  # seconds per call on ``current``, smoothed
    calls: int = 0
    switches: list[int] = field(default_factory=list)  # the call numbers at which it switched

    def next_size(self) -> int:
        """The team size for the next call."""
        self.calls += 1
        return self.other() if self.calls % EXPLORE_EVERY == 0 and self.recent is not None else self.current

    def other(self) -> int:
        return self.sizes[1] if self.current == self.sizes[0] else self.sizes[0]

    def record(self, size: int, seconds: float) -> None:
        """What the call on ``size`` took; a clearly faster try of the other size switches to it."""
        if size == self.current:
            self.recent = seconds if self.recent is None else (1 - SMOOTHING) * self.recent + SMOOTHING * seconds
        elif self.recent is not None and seconds < MARGIN * self.recent:
            self.current, self.recent = size, seconds
            self.switches.append(self.calls)
