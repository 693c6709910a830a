"""A room's lesson step for its followers: drawn once for the room, against drawn by each follower's page.

``python -m bench.room_steps [--followers 60] [--model bundled|gpt2-small]``: in one process, no
Gradio server (the pages' polls called as the page's handler, ``lessons.room.poll``), a teacher and
``--followers`` students in a room; the teacher publishes each step of the attention lessons (the ones
that ask the model: a head's row, the heads' overview) and every follower's poll takes it. Timed (this
thread's CPU time): each step's polls as they are now (the step drawn once per language on the
teacher's model, ``server.room_steps``, and sent to every follower) and as each page drew its step
before (``lessons.tab.show`` on the page's own model: a forward and the figures each). Prints the CPU
per follower per step both ways; docs/benchmarks.md states them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from playground import PRESETS
from playground.server.recipes import default_recipe, random_recipe
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import tab as lessons_tab

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"
STEPS = [("attention", 0), ("attention", 1), ("multihead", 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=60)
    parser.add_argument("--model", choices=("bundled", "gpt2-small"), default="bundled")
    args = parser.parse_args()
    torch.set_num_threads(1)
    recipe = default_recipe() if args.model == "bundled" else random_recipe(PRESETS["gpt2-small"], seed=0)
    teacher = {"recipe": recipe, "run_id": None, "lang": "en", "session": "teacher"}
    students = [
        {"recipe": recipe, "run_id": None, "lang": "en" if i % 4 else "zh-CN", "session": f"s{i}"}
        for i in range(args.followers)
    ]
    for lesson, step in STEPS:  # (warm: the model built, the tokenizer and the figure code loaded)
        lessons_tab.show(teacher, {"lesson": lesson, "step": step}, PROMPT)
    room = lessons_room.start_room(teacher, None, {"lesson": STEPS[0][0], "step": STEPS[0][1]}, PROMPT).room
    pages = [lessons_room.join_room(s, None, room["code"]).room for s in students]
    now, before = [], []
    for lesson, step in STEPS:
        pos = {"lesson": lesson, "step": step}
        lessons_room.publish_move(teacher, room, pos, PROMPT)
        t0 = time.thread_time()
        polled = [lessons_room.poll(s, p, PROMPT) for s, p in zip(students, pages)]
        now.append((time.thread_time() - t0) * 1000)
        pages = [p.room for p in polled]
        assert all(p.lesson_pos == pos for p in polled)
        t0 = time.thread_time()
        for s in students:
            lessons_tab.show(s, pos, PROMPT)
        before.append((time.thread_time() - t0) * 1000)
    lessons_room.end_room(teacher, room)
    n = args.followers
    per_now = [ms / n for ms in now]
    per_before = [ms / n for ms in before]
    print(f"{n} followers, {args.model}, steps {STEPS}, one thread, CPU ms:")
    print(
        f"  drawn once for the room: {[round(x) for x in now]} ms a step; per follower {statistics.median(per_now):.2f} ms"
    )
    print(
        f"  drawn by each page:      {[round(x) for x in before]} ms a step; per follower "
        f"{statistics.median(per_before):.2f} ms ({statistics.median(per_before) / statistics.median(per_now):.0f}x)"
    )


if __name__ == "__main__":
    main()
