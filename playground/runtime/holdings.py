"""What holds memory in the budget and how a refusal says so: holdings, their kinds, the messages.

A holding made while a request acts for a session (``acting_for(session_id)``) is that session's, and
so is a cached model while the session leases it (``MemoryBudget.add_owner``). A refusal is read by the
one user who asked: it names that user's own holdings, and says everyone else's only as counts and
sizes (their models, checkpoint file names and seeds are not the reader's to see).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
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
    owners: frozenset[str] = frozenset()  # the sessions it is for: they, and only they, see it by name
    client: str | None = None  # the address of the client that asked, where the app saw one
    ends_by: float | None = None  # time.monotonic() by which it is expected to be given back (work in flight)


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
    "lens rows": ("lens's kept residual rows", "lenses' kept residual rows"),
    "replay": ("replay file being read", "replay files being read"),
}

ADVICE = (
    "Try a smaller model or bfloat16, wait for other generations or trainings to finish, "
    "or raise PLAYGROUND_MEMORY_BUDGET_GB."
)


# The session the current request acts for (None: the library, a test, a thread of its own), and the
# address of the client that sent it (None where the app sees none). Context variables: each thread,
# and each call Gradio runs in a thread, sees only its own.
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("playground_memory_owner", default=None)
_CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("playground_memory_client", default=None)
_KEEP = object()


@contextlib.contextmanager
def acting_for(owner: str | None, client: object = _KEEP):
    """Inside, the request is ``owner``'s (a session's id; None: nobody's): what it holds in the
    budget is that session's, and a refusal names the session's own holdings. ``client``: the
    address the request came from (kept as it is when not given), which per-client caps count by."""
    token = _OWNER.set(owner)
    client_token = None if client is _KEEP else _CLIENT.set(client if isinstance(client, str) else None)
    try:
        yield
    finally:
        if client_token is not None:
            _CLIENT.reset(client_token)
        _OWNER.reset(token)


def current_owner() -> str | None:
    """The session the current request acts for (None outside ``acting_for``)."""
    return _OWNER.get()


def current_client() -> str | None:
    """The address the current request came from (None where the app saw none)."""
    return _CLIENT.get()


def wait_seconds(short: int, holdings: list[Holding], fallback: float) -> float:
    """Seconds until work in flight is expected to give back ``short`` bytes, soonest first
    (``fallback`` if what is in flight does not hold that much)."""
    now, freed = time.monotonic(), 0
    for h in sorted((h for h in holdings if h.ends_by is not None), key=lambda h: h.ends_by or 0.0):
        freed += h.nbytes
        if freed >= short:
            return max(1.0, (h.ends_by or now) - now)
    return fallback


def wait_words(seconds: float) -> int:
    """A wait said to a user, in whole seconds (at least 1)."""
    return max(1, int(seconds + 0.999))


class CountedHoldings(str):
    """Holdings said as counts and sizes by kind: the English text, carrying its parts (kind, count,
    size) so a refusal shown in another language says them in that language's words."""

    parts: tuple[tuple[str, int, str], ...]

    def __new__(cls, parts: tuple[tuple[str, int, str], ...]):
        said = []
        for kind, count, size in parts:
            one, many = KIND_LABELS.get(kind, (kind, kind + "s"))
            said.append(f"{count} {one if count == 1 else many} ({size})")
        text = super().__new__(cls, ", ".join(said) if said else "nothing is held")
        text.parts = parts
        return text

    def __getnewargs__(self):  # copies and pickles rebuild it from its parts
        return (self.parts,)


def describe_holdings(holdings: list[Holding]) -> CountedHoldings:
    """What holds the memory, as counts and sizes by kind. Never the holders' names: a refusal is
    read by one user, and the models, checkpoint file names and seeds held are other users'."""
    groups: dict[str, list[Holding]] = {}
    for h in holdings:
        groups.setdefault(h.kind, []).append(h)
    return CountedHoldings(
        tuple((kind, len(items), format_bytes(sum(h.nbytes for h in items))) for kind, items in groups.items())
    )


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


def name_holdings(holdings: list[Holding]) -> str:
    """Each holding by name and size (said only to the session that owns them)."""
    return ", ".join(f"{h.what} ({format_bytes(h.nbytes)})" for h in holdings)


def in_use(
    what: str,
    nbytes: int,
    used: int,
    total: int,
    holdings: list[Holding],
    owner: str | None = None,
    wait_s: float = 60.0,
) -> MemoryBudgetError:
    """The refusal of a request that does not fit beside what is held, read by ``owner`` (a session's
    id, or None): its own holdings by name, everyone else's as counts and sizes, and when to try again
    (``wait_s``, the budget's estimate of when enough is given back)."""
    said = dict(
        what=what,
        need=format_bytes(nbytes),
        used=format_bytes(used),
        total=format_bytes(total),
        advice=ADVICE,
        wait_s=wait_words(wait_s),
    )
    own = [h for h in holdings if owner is not None and owner in h.owners]
    if own:
        return MemoryBudgetError(
            "budget.in_use_yours",
            "Not enough memory for {what} (about {need}): {used} of the {total} memory budget is in use. "
            "Yours: {own}. Besides: {others}. {advice} Try again in about {wait_s:,} s.",
            own=name_holdings(own),
            others=describe_holdings([h for h in holdings if owner not in h.owners]),
            **said,
        )
    return MemoryBudgetError(
        "budget.in_use",
        "Not enough memory for {what} (about {need}): {used} of the {total} memory budget is in "
        "use by {holdings}. {advice} Try again in about {wait_s:,} s.",
        holdings=describe_holdings(holdings),
        **said,
    )


def client_busy(what: str, running: int, limit: int, wait_s: float) -> MemoryBudgetError:
    """The refusal of work from a client (an address) that already runs ``limit`` pieces of work."""
    return MemoryBudgetError(
        "budget.client_busy",
        "Not now: your address already runs as much work at once as one address may ({limit:,} at a time); "
        "{what} can start when some of it has finished. Try again in about {wait_s:,} s.",
        what=what,
        running=running,
        limit=limit,
        wait_s=wait_words(wait_s),
    )
