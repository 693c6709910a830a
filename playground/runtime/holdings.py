"""What holds memory in the budget and how a refusal says so: holdings, their kinds, the messages."""

from __future__ import annotations

from dataclasses import dataclass

from playground.errors import UserError
from playground.runtime.machine_memory import format_bytes


class MemoryBudgetError(UserError, MemoryError):
    """A request that does not fit in the memory budget; the message is written for the user. Both a
    ``MemoryError`` (what callers catch it as) and a ``UserError`` (a message key and its fields)."""


@dataclass(frozen=True)
class Holding:
    what: str  # e.g. "gpt2-large (774M) random init (seed 1)"
    nbytes: int
    kind: str  # model | generation | attention | training | export | build


KIND_LABELS = {  # kind -> (one, many)
    "model": ("model", "models"),
    "generation": ("generation's KV cache", "generations' KV caches"),
    "attention": ("run's attention", "runs' attention"),
    "training": ("training job", "training jobs"),
    "export": ("export", "exports"),
    "build": ("build in progress", "builds in progress"),
    "reserved": ("generation kept ready for its session", "generations kept ready for their sessions"),
    "server": ("server process", "server processes"),
    "scoring": ("text being scored", "texts being scored"),
    "lens": ("view of the inside", "views of the inside"),
    "replay": ("replay file being read", "replay files being read"),
}

ADVICE = (
    "Try a smaller model or bfloat16, wait for other generations or trainings to finish, "
    "or raise PLAYGROUND_MEMORY_BUDGET_GB."
)


def describe_holdings(holdings: list[Holding]) -> str:
    """What holds the memory, as counts and sizes by kind. Never the holders' names: a refusal is
    read by one user, and the models, checkpoint file names and seeds held are other users'."""
    groups: dict[str, list[Holding]] = {}
    for h in holdings:
        groups.setdefault(h.kind, []).append(h)
    if not groups:
        return "nothing is held"
    parts = []
    for kind, items in groups.items():
        one, many = KIND_LABELS.get(kind, (kind, kind + "s"))
        label = f"1 {one}" if len(items) == 1 else f"{len(items)} {many}"
        parts.append(f"{label} ({format_bytes(sum(h.nbytes for h in items))})")
    return ", ".join(parts)


def over_total(what: str, nbytes: int, total: int) -> MemoryBudgetError:
    """The refusal of a request bigger than the whole budget."""
    return MemoryBudgetError(
        "budget.over_total",
        "{what} needs about {need}, more than the whole memory budget of {total}. Make it smaller, or "
        "raise PLAYGROUND_MEMORY_BUDGET_GB.",
        what=what[:1].upper() + what[1:],
        need=format_bytes(nbytes),
        total=format_bytes(total),
    )


def in_use(what: str, nbytes: int, used: int, total: int, holdings: list[Holding]) -> MemoryBudgetError:
    """The refusal of a request that does not fit beside what is held."""
    return MemoryBudgetError(
        "budget.in_use",
        "Not enough memory for {what} (about {need}): {used} of the {total} memory budget is in "
        "use by {holdings}. {advice}",
        what=what,
        need=format_bytes(nbytes),
        used=format_bytes(used),
        total=format_bytes(total),
        holdings=describe_holdings(holdings),
        advice=ADVICE,
    )
