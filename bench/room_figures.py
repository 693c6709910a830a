"""The room benchmark's figures (bench/room.py): pure functions of what its learners measured, no app.

A learner's first token and completion from its stamped /generate updates (the status element's state and
token count), a row's percentiles and aggregate over its learners, the lone learner every ratio divides by,
and the rows as a Markdown table with the targets they are checked against.
"""

from __future__ import annotations

import math
import re
import statistics

MAX_NEW = 64  # new tokens each learner asks for
STATUS = re.compile(r"data-state=['\"](\w+)['\"] data-tokens=['\"](\d+)['\"]")
ENDED = ("done", "stopped", "error")


def percentile(values, q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between ranks (numpy's default)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0-100, not {q}")
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def parse_status(output) -> tuple[str | None, int | None]:
    """(state, generated tokens) from a /generate update (its status element), or (None, None)."""
    items = output if isinstance(output, (list, tuple)) else [output]
    for item in items:
        if isinstance(item, str):
            m = STATUS.search(item)
            if m:
                return m.group(1), int(m.group(2))
    return None, None


def timings(stamped: list[tuple[float, object]], start: float) -> dict:
    """A learner's figures from its (arrival time, update) pairs: first token, completion, tokens."""
    first = end = None
    tokens, state = 0, None
    for t, out in stamped:
        st, n = parse_status(out)
        if n is None:
            continue
        if n > 0 and first is None:
            first = t - start
        tokens, state = n, st
        if st in ENDED:
            end = t - start
            break
    return {"first_s": first, "completion_s": end, "tokens": tokens, "state": state}


def summarize(learners: list[dict], one: dict | None = None) -> dict:
    """One row: percentiles over the learners with ``first_s`` (gradio_client or HTTP clients), the
    aggregate over every learner with ``start``/``end``/``tokens`` (the page's included)."""
    ok = [x for x in learners if x.get("completion_s") is not None]
    timed = [x for x in learners if x.get("start") is not None and x.get("end") is not None]
    row = {
        "learners": len(learners),
        "finished": len(ok),
        "errors": [x["error"] for x in learners if x.get("error")],
        "first_p50_s": percentile([x.get("first_s") for x in ok], 50),
        "first_p95_s": percentile([x.get("first_s") for x in ok], 95),
        "completion_p50_s": percentile([x["completion_s"] for x in ok], 50),
        "completion_p95_s": percentile([x["completion_s"] for x in ok], 95),
        "updates_p50": percentile([x.get("updates") for x in ok], 50),
    }
    if timed:
        wall = max(x["end"] for x in timed) - min(x["start"] for x in timed)
        row["wall_s"] = wall
        row["tokens"] = sum(x.get("tokens") or 0 for x in timed)
        row["aggregate_tok_s"] = row["tokens"] / wall if wall > 0 else None
    if one:
        agg, one_rate = row.get("aggregate_tok_s"), one.get("tok_s")
        row["x_one_learner"] = agg / one_rate if agg and one_rate else None
        p95, one_s = row["completion_p95_s"], one.get("completion_s")
        row["completion_x_alone"] = p95 / one_s if p95 and one_s else None
    return row


def one_learner(rounds: list[dict]) -> dict:
    """The reference: median completion of the lone learner's rounds and its tokens/s."""
    done = [r for r in rounds if r.get("completion_s")]
    if not done:
        return {}
    s = statistics.median(r["completion_s"] for r in done)
    tokens = statistics.median(r.get("tokens") or MAX_NEW for r in done)
    return {"completion_s": s, "tok_s": tokens / s, "first_s": statistics.median(r["first_s"] or 0 for r in done)}


def alone_row(rounds: list[dict], one: dict) -> dict:
    """A lone learner's rounds ran one after another: its aggregate is its own rate, not their wall."""
    return {"aggregate_tok_s": one.get("tok_s"), "x_one_learner": 1.0 if one else None, "wall_s": None}


def _s(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def _x(x) -> str:
    return "–" if x is None else f"{x:.1f}×"


HEADER = (
    "| model | server | N | first token p50 / p95 (s) | completion p50 / p95 (s) | p95 × alone "
    "| aggregate tok/s | × one learner | page first chip / done (s) | CPU cores: server / learners / machine | load 1-min start→end |"
)


def table(result: dict) -> str:
    """The rows as a Markdown table, then one line per row that had errors."""
    lines = [HEADER, "|" + "---|" * 3 + "---:|" * 8]
    notes = []
    for r in result.get("rows", []):
        page = r.get("page") or {}
        load = r.get("loadavg") or [None, None]
        cells = [
            r["model"],
            r["server"],
            str(r["n"]),
            f"{_s(r.get('first_p50_s'))} / {_s(r.get('first_p95_s'))}",
            f"{_s(r.get('completion_p50_s'))} / {_s(r.get('completion_p95_s'))}",
            _x(r.get("completion_x_alone")),
            "–" if r.get("aggregate_tok_s") is None else f"{r['aggregate_tok_s']:.1f}",
            _x(r.get("x_one_learner")),
            f"{_s(page.get('first_chip_s'))} / {_s(page.get('done_s'))}" if page else "–",
            f"{_s(r.get('server_cores'))} / {_s(r.get('client_cores'))} / {_s(r.get('machine_cores'))}",
            f"{_s(load[0])}→{_s(load[1])}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if r.get("errors"):
            notes.append(f"{r['model']} {r['server']} N={r['n']}: {len(r['errors'])} errors, first: {r['errors'][0]}")
    for model, note in (result.get("skipped") or {}).items():
        notes.append(f"{model}: {note}")
    return "\n".join(lines + ([""] + notes if notes else []))


def targets(result: dict) -> list[str]:
    """The targets the batched decoder will be checked against (measured, not tuned for)."""
    rows = {(r["model"], r["server"], r["n"]): r for r in result.get("rows", [])}
    out = []

    def check(name, value, ok):
        mark = "–" if value is None else ("met" if ok(value) else "not met")
        out.append(f"  {name}: {'–' if value is None else f'{value:.2f}'} ({mark})")

    n = max((k[2] for k in rows), default=0)
    b = rows.get(("bundled", "app", n), {})
    check(f"bundled N={n} aggregate × one learner ≥ 10", b.get("x_one_learner"), lambda v: v >= 10)
    check(f"bundled N={n} first token p95 ≤ 1 s", b.get("first_p95_s"), lambda v: v <= 1)
    check(f"bundled N={n} completion p95 ≤ 3 × alone", b.get("completion_x_alone"), lambda v: v <= 3)
    g = rows.get(("gpt2-small", "app", n), {})
    check(f"gpt2-small N={n} aggregate × one learner ≥ 4", g.get("x_one_learner"), lambda v: v >= 4)
    peer = rows.get(("gpt2-small", "llama-server", n), {})
    ratio = (
        g["aggregate_tok_s"] / peer["aggregate_tok_s"]
        if g.get("aggregate_tok_s") and peer.get("aggregate_tok_s")
        else None
    )
    check(f"gpt2-small N={n} aggregate × llama-server's ≥ 1.0", ratio, lambda v: v >= 1.0)
    for model in ("bundled", "gpt2-small"):
        stop = rows.get((model, "app", n), {}).get("stop") or {}
        check(f"{model} N={n} Stop p95 ≤ 0.3 s", stop.get("p95_s"), lambda v: v <= 0.3)
    return out
