"""``python -m bench.room_spread``: a room whose learners ask over a few seconds, as a class clicks (issue 33).

``python -m bench.room_spread [--model bundled] [--n 30] [--spread 0,1,3,5]`` starts the app as ``python -m
bench --room`` does and, after one learner's runs alone and an unmeasured room, makes a room of N for each
spread: the bare HTTP learners ask one after another, evenly over that many seconds (0: all at once, the room
benchmark's room). Each learner's times count from its own request. It prints first-token and completion
p50 / p95, completion p95 against one learner alone, and each learner's own tokens a second (median): what a
learner of a class that clicks over a few seconds sees, beside the all-at-once room the targets are set on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def spread_rooms(model: str, n: int, spreads: list[float]) -> list[dict]:
    from . import room as R
    from . import room_figures as F

    rm = R.Room(300, print, "http", with_page=False)
    rows = []
    try:
        one = rm.one_learner(model, n)
        print(f"one learner: completion {F._s(one.get('completion_s'))} s, {F._s(one.get('tok_s'))} tok/s")
        rm.round(model, n, with_page=False)  # the room once, unmeasured (as bench --room does)
        for spread in spreads:
            time.sleep(1.0)
            res, _, cpu = rm.round(model, n, with_page=False, spread_s=spread)
            rows.append(spread_row(spread, res, one, cpu))
    finally:
        rm.close()
    return rows


def spread_row(spread: float, learners: list[dict], one: dict, cpu: dict) -> dict:
    """One spread's figures from its learners' results and one learner's alone."""
    from . import room_figures as F

    s = F.summarize(learners, one)
    own = [x.get("tokens", 0) / x["completion_s"] for x in learners if x.get("completion_s")]
    alone = one.get("completion_s")
    return {
        "spread_s": spread,
        "first_p50_s": s["first_p50_s"],
        "first_p95_s": s["first_p95_s"],
        "completion_p50_s": s["completion_p50_s"],
        "completion_p95_s": s["completion_p95_s"],
        "completion_x_alone": s["completion_p95_s"] / alone if alone and s["completion_p95_s"] else None,
        "learner_tok_s": statistics.median(own) if own else None,
        "errors": len(s.get("errors") or []),
        "server_cores": cpu.get("server_cores"),
    }


def table(rows: list[dict]) -> str:
    from .room_figures import _s, _x

    lines = [
        "| spread (s) | first token p50 / p95 (s) | completion p50 / p95 (s) | p95 × alone | a learner's tok/s (median) "
        "| server cores |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['spread_s']:g} | {_s(r['first_p50_s'])} / {_s(r['first_p95_s'])} | {_s(r['completion_p50_s'])} / "
            f"{_s(r['completion_p95_s'])} | {_x(r['completion_x_alone'])} | {_s(r['learner_tok_s'])} | "
            f"{_s(r['server_cores'])} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.room_spread", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="bundled", choices=("bundled", "gpt2-small"))
    ap.add_argument("--n", type=int, default=30, help="learners (default 30)")
    ap.add_argument("--spread", default="0,1,3,5", help="comma-separated seconds the learners ask over")
    args = ap.parse_args(argv)
    spreads = [float(x) for x in args.spread.split(",") if x.strip()]
    if not 1 <= args.n <= 64 or not spreads or min(spreads) < 0:
        print("--n takes 1 to 64 learners, --spread seconds of 0 or more", file=sys.stderr)
        return 2
    print(table(spread_rooms(args.model, args.n, spreads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
