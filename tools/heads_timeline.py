"""Record the "watch an induction head form" run's head timeline for the lesson on heads forming.

    python tools/heads_timeline.py            # writes playground/assets/timelines/induction_run.json

The lesson (playground/server/lesson_training.py) asks which layer the induction head forms in and
near which step its phase change comes; a 700-step run takes over a minute here, too long for a page
to wait, so the lesson reads this file: the run trained once with its fixed seed on one torch thread
(``induction_run.record``), every number in it measured. ``tests/integration/test_heads_timeline.py``
trains the run again and checks the file against it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground.training import induction_run  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=induction_run.TIMELINE)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    recorded = induction_run.record(threads=a.threads)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(recorded, separators=(",", ":")) + "\n", encoding="utf-8")
    tl = recorded["timeline"]
    print(f"{a.out}: {len(tl['steps'])} logs, phase change {tl['phase_change']}, {recorded['run']['seconds']} s")


if __name__ == "__main__":
    main()
