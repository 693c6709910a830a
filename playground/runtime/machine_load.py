"""How much of the machine other work took while this process measured something.

A kernel decision times its candidates on this machine's cores; when other processes (a test suite, a
browser, another server) or the hypervisor (steal time) take a large share of them meanwhile, the timings
say little about the quiet machine the decision is kept for. ``others()`` measures that share over a
block: the machine's busy time (``/proc/stat``'s first line, every CPU) less this process's own CPU time
(``os.times``, its waited-for children too), over the machine's total. This process's threads, the
OpenMP workers of a candidate among them, are its own work, not load: a thread that waits at a barrier
is neither. Where ``/proc/stat`` cannot be read (not Linux) the share is None: unknown.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
# /proc/stat's cpu fields: user nice system idle iowait irq softirq steal (guest time is inside user)
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class Sample:
    busy: int  # the machine's busy jiffies, every CPU
    total: int  # every jiffy counted, idle ones too
    own: float  # this process's CPU seconds (and its waited-for children's)


def parse_stat(text: str) -> tuple[int, int] | None:
    """(busy, total) jiffies from ``/proc/stat``'s text, or None if it has no ``cpu`` line."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:9]] + [0] * max(0, 8 - len(parts[1:9]))
            return sum(values[i] for i in BUSY_FIELDS), sum(values[:8])
    return None


def own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def sample(stat: Path = STAT) -> Sample | None:
    """The machine's counters now, or None where they cannot be read."""
    try:
        counted = parse_stat(stat.read_text())
    except (OSError, ValueError):
        return None
    if counted is None:
        return None
    return Sample(*counted, own_seconds())


def share(before: Sample | None, after: Sample | None, ticks_per_second: float | None = None) -> float | None:
    """The share of the whole machine (0..1) that other work took between two samples; None if unknown."""
    if before is None or after is None or after.total <= before.total:
        return None
    tick = ticks_per_second or float(os.sysconf("SC_CLK_TCK"))
    others = (after.busy - before.busy) - (after.own - before.own) * tick
    return min(1.0, max(0.0, others / (after.total - before.total)))


class Measured:
    """What ``others`` found: ``share`` (None until the block ends, or where unknown)."""

    share: float | None = None


@contextmanager
def others(stat: Path = STAT) -> Iterator[Measured]:
    """Within: measure the share of the machine that other work takes (``Measured.share`` once it ends)."""
    measured = Measured()
    before = sample(stat)
    try:
        yield measured
    finally:
        measured.share = share(before, sample(stat))
