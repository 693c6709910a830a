"""How soon student pages in Chromium show what their teacher's page shows (issue 35: "within 1 s p95").

``python -m bench.room_pages [--students 2] [--steps 10] [--runs 3] [--tokens 64]``: the app as
``gpt-playground`` serves it and one Chromium, on this machine. A teacher's page starts a room
(``?room=new``) and ``--students`` pages join it (every second one in 中文). A script in each page logs
the moment anything it shows of the room changes: the lesson's progress line and figure, the Generate
tab's chips, status and map (``Date.now()``: one clock for every page); Resource Timing gives when each
of its polls' answers arrived.

- **Lesson steps**: the teacher presses Next ``--steps`` times, then Back as many, one press each
  ``--gap`` seconds. A student's page has the step when it shows the step's progress line with the
  figure it ends on (whose numbers must be the teacher's): timed from the press, behind the teacher's
  own page showing it, and to the arrival of the answer it drew.
- **Runs**: the teacher generates ``--runs`` runs of ``--tokens`` tokens (the bundled model, a prompt of
  its own each). A student's page has the run when it shows its chips, done and the map it ends on (the
  teacher's map's numbers): timed from the teacher's page saying done, behind the teacher's page's own
  map, and to the arrival of the answer it drew.

The pages share this machine's cores with the server and each other, as a classroom's laptops do not:
the "answer" rows are the server's part. Prints p50 / p95 / max over every (student, step) and (student,
run) and writes ``bench/results/room-pages-latest.json`` (with the pages' logs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

from bench.room_cpu import ServedApp
from bench.room_figures import percentile

RESULTS = Path(__file__).resolve().parent / "results"
PROMPT = "ROMEO: What light through yonder window breaks?"

# Each page's log: [time, progress line, lesson figure, chips, status, map] at every change. A figure is
# kept as a hash of its numbers, made again only when plotly gives the element new data.
LOG_JS = """() => {
  if (window.pgLog) return;
  performance.setResourceTimingBufferSize(100000);
  const log = window.pgLog = [];
  const refs = {}, hashes = {};
  const hash = (s) => { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); } return (h >>> 0).toString(16); };
  const figure = (id) => {
    const g = document.querySelector(`#${id} .js-plotly-plot`), d = g && g.data;
    if (d !== refs[id]) { refs[id] = d; hashes[id] = d ? hash(JSON.stringify(d.map((t) => t.z ?? t.y ?? null))) : ''; }
    return hashes[id];
  };
  let last = '';
  const tick = () => {
    const now = [
      document.querySelector('#pg-lesson-progress')?.innerText ?? '',
      figure('pg-lesson-plot') + '|' + hash(document.querySelector('#pg-lesson-tokens')?.innerText ?? ''),
      document.querySelectorAll('#pg-chips .pg-gen').length,
      document.querySelector('#pg-status [data-state]')?.dataset.state ?? '',
      figure('pg-heatmap'),
    ];
    const key = JSON.stringify(now);
    if (key !== last) { last = key; log.push([Date.now(), ...now]); }
  };
  tick();  // (what the page shows as its log begins, before any press)
  setInterval(tick, 10);
}"""
NUMBERS_JS = "(id) => JSON.stringify((document.querySelector(`#${id} .js-plotly-plot`)?.data ?? []).map((t) => t.z ?? t.y ?? null))"
CLICK_JS = "(id) => { document.querySelector(`#${id}`).click(); return Date.now(); }"
PRESSES: list = []  # [button, ms] of every press of the teacher's
STEP_BUTTONS = ("pg-lesson-next", "pg-lesson-back")
LOG = "() => window.pgLog"
# the page's polls (Gradio's unqueued events: ``/run/predict``): [start, end] in ms since the epoch, and bytes
POLLS_JS = """() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/run/predict'))
  .map((e) => [Math.round(performance.timeOrigin + e.startTime), Math.round(performance.timeOrigin + e.responseEnd), e.encodedBodySize])"""
PROGRESS, LESSON_FIG, CHIPS, STATUS, MAP = 1, 2, 3, 4, 5


def first_shown(log: list, since_ms: int, want: dict) -> int | None:
    """The time of the first entry at or after ``since_ms`` (or the entry showing at that moment) whose
    fields equal ``want`` (field index -> value), else None."""
    shown = [e for e in log if e[0] <= since_ms][-1:] + [e for e in log if e[0] > since_ms]
    for entry in shown:
        if all(entry[i] == v for i, v in want.items()):
            return max(entry[0], since_ms)
    return None


def shown_at(log: list, ms: int) -> list | None:
    """The entry a page showed at ``ms``."""
    before = [e for e in log if e[0] <= ms]
    return before[-1] if before else None


def arrived(answers: list, drawn_ms: int, since_ms: int) -> int | None:
    """When the page had the answer it then drew: of its polls' answers (``[start, end, bytes]``) that ended
    after ``since_ms`` and by ``drawn_ms``, the end of the largest (the one carrying what changed; a poll
    with nothing new is a few kB)."""
    ends = [(size, end) for _, end, size in answers if since_ms <= end <= drawn_ms]
    return max(ends)[1] if ends else None


def windows(presses: list, names) -> list[tuple[int, int | None]]:
    """(ms, the next press's ms or None) of each press named in ``names``: the window a press's effect is read in."""
    return [
        (ms, presses[i + 1][1] if i + 1 < len(presses) else None) for i, (b, ms) in enumerate(presses) if b in names
    ]


def run_done(log: list, pressed_ms: int, tokens: int, until: int | None = None) -> tuple[int | None, int | None]:
    """(when the run pressed for at ``pressed_ms`` began on the page, when it said done with ``tokens`` chips):
    till it begins, the page shows the run before. A page whose main thread was busy for the whole run may
    never show it running (the log samples every 10 ms): then it began at the press, and it is done when the
    page shows ``tokens`` chips, done, and a map other than the one before (each run's prompt is its own).
    ``until``: the next press (what the page shows from then on is the next run's)."""
    log = before_press(log, until)
    began = first_shown(log, pressed_ms, {STATUS: "running"})
    if began is not None:
        return began, first_shown(log, began, {CHIPS: tokens, STATUS: "done"})
    before = shown_at(log, pressed_ms)
    for entry in (e for e in log if e[0] > pressed_ms):
        if entry[CHIPS] == tokens and entry[STATUS] == "done" and (before is None or entry[MAP] != before[MAP]):
            return pressed_ms, entry[0]
    return None, None


def before_press(log: list, until: int | None) -> list:
    """The entries of ``log`` before ``until`` (the next press; None: all)."""
    return [e for e in log if until is None or e[0] < until]


def never_running(log: list, presses: list) -> int:
    """How many Generate presses the page never showed running (its stream drawn at once, at the end)."""
    runs = windows(presses, ("pg-generate",))
    return sum(1 for ms, until in runs if first_shown(before_press(log, until), ms, {STATUS: "running"}) is None)


def quantiles(xs: list[float]) -> dict:
    """n, p50, p95 (interpolated, as the room benchmark's) and max."""
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50": percentile(xs, 50), "p95": percentile(xs, 95), "max": max(xs)}


def step_lags(presses: list, teacher: list, students: list[list], polls: list[list]) -> dict:
    """For each press of Next or Back (``[button, ms]``) and student: seconds from the press, and behind the
    teacher's own page, until the student's page showed the step's progress line and the figure it ends on
    (what it shows just before the next press); and until the answer it drew had arrived. A page still on
    the step it showed at the press is ``missed``."""
    out: dict = {"after_press": [], "behind_teacher": [], "answer_after_press": [], "missed": []}
    for ms, next_ms in windows(presses, STEP_BUTTONS):
        end = (next_ms or ms + 10_000) - 1
        mine = shown_at(teacher, end)
        teacher_at = first_shown(teacher, ms, {PROGRESS: mine[PROGRESS], LESSON_FIG: mine[LESSON_FIG]})
        for log, answers in zip(students, polls):
            final, before = shown_at(log, end), shown_at(log, ms)  # (before: None if its log began after the press)
            if final is None or (before is not None and final[PROGRESS] == before[PROGRESS]):  # (it stayed)
                out["missed"].append(ms / 1000)
                continue
            at = first_shown(log, ms, {PROGRESS: final[PROGRESS], LESSON_FIG: final[LESSON_FIG]})
            if at is None or teacher_at is None:
                continue
            out["after_press"].append((at - ms) / 1000)
            out["behind_teacher"].append((at - teacher_at) / 1000)
            got = arrived(answers, at, ms)
            if got is not None:
                out["answer_after_press"].append((got - ms) / 1000)
    return out


def run_lags(presses: list, teacher: list, students: list[list], polls: list[list], tokens: int) -> dict:
    """For each Generate press and student: seconds from the teacher's page saying done (its ``tokens`` chips)
    until the student's page showed the run (its chips, done and the map it ends on), until the answer it drew
    had arrived, and behind the teacher's page showing its own map."""
    out: dict = {"after_done": [], "answer_after_done": [], "behind_teacher_map": []}
    for ms, next_ms in windows(presses, ("pg-generate",)):
        end = (next_ms or ms + 60_000) - 1
        began, done = run_done(teacher, ms, tokens, next_ms)
        if began is None:
            continue
        mine = shown_at(teacher, end)
        teacher_map = first_shown(teacher, began, {CHIPS: tokens, STATUS: "done", MAP: mine[MAP]})
        for log, answers in zip(students, polls):
            final = shown_at(log, end)
            at = first_shown(log, ms + 1, {CHIPS: tokens, STATUS: "done", MAP: final[MAP]})
            if at is None or done is None:
                continue
            out["after_done"].append((at - done) / 1000)
            if teacher_map is not None:
                out["behind_teacher_map"].append((at - teacher_map) / 1000)
            got = arrived(answers, at, ms)
            if got is not None:
                out["answer_after_done"].append((got - done) / 1000)
    return out


def open_page(browser, url: str, lang: str):
    page = browser.new_context(locale=lang, viewport={"width": 1280, "height": 900}).new_page()
    page.goto(url)
    return page


def press(teacher, button: str) -> None:
    PRESSES.append([button, teacher.evaluate(CLICK_JS, button)])


def lesson_steps(teacher, students, steps: int, gap: float) -> int:
    """Next ``steps`` times, then Back as many: how many of the students' figures differed from the teacher's."""
    differ = 0
    for button in ["pg-lesson-next"] * steps + ["pg-lesson-back"] * steps:
        press(teacher, button)
        time.sleep(gap)
        want_numbers = teacher.evaluate(NUMBERS_JS, "pg-lesson-plot")
        differ += sum(page.evaluate(NUMBERS_JS, "pg-lesson-plot") != want_numbers for page in students)
    return differ


def runs(teacher, students, n_runs: int, tokens: int, timeout: float) -> int:
    """``n_runs`` runs of ``tokens`` tokens: how many of the students' maps differed from the teacher's."""
    PRESSES.append(["tab:generate", teacher.evaluate("() => Date.now()")])  # (the last step's window ends here)
    teacher.locator("button[role=tab][data-tab-id='generate']").click()
    box = teacher.locator("#pg-max-new input[type=number]")
    box.fill(str(tokens))
    box.press("Enter")
    differ = 0
    for i in range(n_runs):
        prompt = teacher.locator("#pg-prompt textarea")
        prompt.fill("")
        prompt.press_sequentially(f"{PROMPT} {i + 1}")
        time.sleep(1.0)  # (the prompt reaches the room)
        press(teacher, "pg-generate")
        clicked, done, t0 = PRESSES[-1][1], None, time.monotonic()
        while done is None and time.monotonic() - t0 < timeout:
            time.sleep(0.2)
            _, done = run_done(teacher.evaluate(LOG), clicked, tokens)
        if done is None:
            raise RuntimeError(f"the teacher's run of {tokens} tokens did not finish within {timeout:.0f} s")
        time.sleep(5.0)  # (every page has drawn the run; when, its log says)
        want_numbers = teacher.evaluate(NUMBERS_JS, "pg-heatmap")
        differ += sum(page.evaluate(NUMBERS_JS, "pg-heatmap") != want_numbers for page in students)
    return differ


def measure(students: int, steps: int, gap: float, n_runs: int, tokens: int) -> dict:
    from playwright.sync_api import sync_playwright

    from bench.browser.cases import CHROMIUM
    from tools.chromium_args import ARGS

    app = ServedApp(timeout=180.0, log_path=Path(os.environ.get("BENCH_APP_LOG", os.devnull)))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            teacher = open_page(browser, app.url + "?room=new", "en")
            status = teacher.locator("#pg-room-status")
            status.get_by_text("You lead room", exact=False).wait_for(timeout=120_000)
            code = re.search(r"You lead room ([A-Z0-9]{6})", status.inner_text()).group(1)
            pages = [open_page(browser, app.url + f"?room={code}", "zh-CN" if i % 2 else "en") for i in range(students)]
            for page in pages:
                page.locator("#pg-room-status").get_by_text(code, exact=False).wait_for(timeout=120_000)
            time.sleep(3.0)  # (every page's load events have answered)
            for page in [teacher, *pages]:
                page.evaluate(LOG_JS)
            load0 = os.getloadavg()[0]
            step_differ = lesson_steps(teacher, pages, steps, gap)
            run_differ = runs(teacher, pages, n_runs, tokens, timeout=120.0)
            logs = [page.evaluate(LOG) for page in [teacher, *pages]]
            polls = [page.evaluate(POLLS_JS) for page in pages]
            stepped = step_lags(PRESSES, logs[0], logs[1:], polls)
            browser.close()
    finally:
        app.close()
    return {
        "students": students,
        "steps": 2 * steps,
        "runs": n_runs,
        "tokens": tokens,
        "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "steps_s": {k: quantiles(v) for k, v in stepped.items() if k != "missed"},
        "steps_missed": len(stepped["missed"]),  # (a student's page that never showed the teacher's step)
        "step_figures_not_the_teachers": step_differ,
        "runs_s": {k: quantiles(v) for k, v in run_lags(PRESSES, logs[0], logs[1:], polls, tokens).items()},
        "run_maps_not_the_teachers": run_differ,
        "runs_never_shown_running": never_running(logs[0], PRESSES),  # (on the teacher's page)
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "presses": PRESSES,
        "page_logs": logs,  # (the teacher's first) [ms, progress, lesson figure, chips, status, map] at each change
        "polls": polls,
    }


ROWS = (
    ("steps_s", "after_press", "a lesson step drawn, after the teacher's press"),
    ("steps_s", "behind_teacher", "a lesson step drawn, behind the teacher's page"),
    ("steps_s", "answer_after_press", "a lesson step's answer in the page, after the press"),
    ("runs_s", "after_done", "a run drawn (chips, done, map), after the teacher's done"),
    ("runs_s", "behind_teacher_map", "a run drawn, behind the teacher's page's own map"),
    ("runs_s", "answer_after_done", "a run's answer in the page, after the teacher's done"),
)


def table(r: dict) -> str:
    lines = [
        f"{r['students']} student pages, {r['steps']} steps, {r['runs']} runs of {r['tokens']} tokens, {r['when']},"
        f" 1-minute load {r['load_1min'][0]} -> {r['load_1min'][1]}; figures not the teacher's:"
        f" {r['step_figures_not_the_teachers']} (steps), {r['run_maps_not_the_teachers']} (runs);"
        f" runs the teacher's page never showed running: {r.get('runs_never_shown_running', 0)};"
        f" steps a page missed: {r['steps_missed']}",
        "| what | samples | p50 (s) | p95 (s) | max (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for group, key, name in ROWS:
        q = r[group][key]
        if q["n"]:
            lines.append(f"| {name} | {q['n']} | {q['p50']:.2f} | {q['p95']:.2f} | {q['max']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.room_pages", description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="Next presses (then as many Back)")
    ap.add_argument("--gap", type=float, default=2.0, help="seconds between the teacher's presses")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=RESULTS / "room-pages-latest.json")
    a = ap.parse_args(argv)
    result = measure(a.students, a.steps, a.gap, a.runs, a.tokens)
    print(table(result))
    a.out.parent.mkdir(exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
