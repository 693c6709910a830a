"""The Generate tab timed in the page: a run, a page's first runs, a view switch, Stop, a profiled run."""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

from .cases import SHORT_PROMPT, RunResult
from .session import Session
from .summaries import summarize_profile, summarize_trace


class Bench(Session):
    """The benchmark's runs in the page, on the session's server and browser."""

    def browser_run(self, model: str, prompt: str, max_new: int, r: RunResult, view_switch: bool = True):
        context, page, cdp, net, errors = self.open_page(model)
        try:
            self._generate_in(page, net, errors, prompt, max_new, r, view_switch)
        finally:
            context.close()

    def first_runs(self, model: str, prompt: str, max_new: int) -> dict:
        """A page's first run against its later ones: a fresh page's first Generate, a second in the
        same page, and the first in another fresh page, each click -> run drawn (heatmap included)."""
        runs = {}
        context, page, cdp, net, errors = self.open_page(model)
        try:
            # The second run has another prompt, so that its heatmap is a new one to wait for.
            for name, text in (("fresh page, first run", prompt), ("same page, second run", "JULIET:\n")):
                r = RunResult(model=model, prompt="short", max_new=max_new)
                self._generate_in(page, net, errors, text, max_new, r, view_switch=False)
                runs[name] = self._first_run_figures(r)
                self.wait_server_idle()
        finally:
            context.close()
        r = RunResult(model=model, prompt="short", max_new=max_new)
        self.browser_run(model, prompt, max_new, r, view_switch=False)
        runs["another fresh page, first run"] = self._first_run_figures(r)
        return runs

    @staticmethod
    def _first_run_figures(r: RunResult) -> dict:
        """Where a run's time went: its first chip, the status saying done, the heatmap drawn."""
        return {
            "drawn_s": r.browser_s,
            "first_chip_s": r.first_chip_s,
            "done_s": r.done_s,
            "heatmap_s": r.heatmap_s,
            "longest_task_s": r.longest_task_s,
            "long_task_total_s": r.long_task_total_s,
        }

    def _generate_in(self, page, net, errors, prompt: str, max_new: int, r: RunResult, view_switch: bool):
        """One timed Generate in an open page (``r`` receives the figures)."""
        self.set_inputs(page, prompt, max_new)
        t_issue = self.now_ms()
        page.click("#pg-generate")
        deadline = time.perf_counter() + self.run_timeout
        heat0 = page.evaluate("() => window.__pg.snapshot().heat")
        finished = self.wait_state(page, ("done", "stopped", "error"), t_issue, deadline)
        if finished:  # the final update also carries the attention heatmap: wait for it to be drawn
            finished = self.wait_heat(page, heat0, deadline)
        if not finished:
            r.timed_out_s = self.run_timeout
        data = self.collect(page) if finished else self.collect_or_none(page)
        t_end_ms = self.now_ms()
        if data is None:
            r.notes.append("the page did not answer after the timeout")
            return
        clicks = [c["t"] for c in data["clicks"] if c["id"] == "pg-generate" and c["t"] >= t_issue - 5]
        t0 = clicks[0] if clicks else t_issue
        tl = [e for e in data["timeline"] if e["t"] >= t0]
        first = next((e for e in tl if e["chips"] > 0), None)
        ended = [e for e in tl if e["state"] in ("done", "stopped", "error")]
        # The status can be drawn a frame before the last chips: the run is over in the page
        # when the status says so and every token it counts has its chip.
        end = next((e for e in ended if e["tokens"] is None or e["chips"] >= e["tokens"]), ended[0] if ended else None)
        r.first_chip_s = (first["t"] - t0) / 1000 if first else None
        if end is not None:
            r.browser_s = (end["t"] - t0) / 1000
            r.chips_at_end = end["chips"]
            r.status_tokens = end["tokens"]
            if end["state"] == "error":
                r.error = "the status shows an error"
        heat = next((e for e in tl if e["heat"] and e["heat"] != heat0 and not e["heat"].startswith("Generate")), None)
        r.heatmap_s = (heat["t"] - t0) / 1000 if heat else None
        if r.browser_s is not None and r.heatmap_s is not None:
            r.done_s = r.browser_s
            r.browser_s = max(r.browser_s, r.heatmap_s)
        t_stop = end["t"] if end else t_end_ms
        self._fill_page_figures(r, data, t0, t_stop, net)
        if errors:
            r.notes.append(f"page errors: {errors[:3]}")
        if data.get("toasts"):
            r.notes.append(f"toasts: {data['toasts'][:3]}")
        if finished and view_switch and r.error is None:
            self._view_switch(page, r)

    @staticmethod
    def _fill_page_figures(r: RunResult, data: dict, t0: float, t1: float, net: dict):
        tasks = [lt for lt in data["longtasks"] if lt["start"] + lt["dur"] >= t0 and lt["start"] <= t1 + 1]
        r.long_tasks = len(tasks)
        r.longest_task_s = max((lt["dur"] for lt in tasks), default=0.0) / 1000
        r.long_task_total_s = sum(lt["dur"] for lt in tasks) / 1000
        msgs = [m for m in data["msgs"] if t0 <= m["t"]]
        generating = [(m["bytes"], m.get("step", -1)) for m in msgs if m["msg"] == "process_generating"]
        completed = [m["bytes"] for m in msgs if m["msg"] == "process_completed"]
        # Gradio sends a generator's last yield twice (process_generating, then process_completed
        # with the full output): the streamed updates are the ones before that final pair.
        streamed = generating[:-1] if completed else generating
        r.final_bytes = completed[-1] if completed else None
        # The first update carries the prompt's chips (it grows with the prompt, once); the bound
        # that matters is on the updates after it.
        r.first_update_bytes = streamed[0][0] if streamed else None
        # the run's last token in the page after each update (-1: none yet)
        last = list(itertools.accumulate((step for _, step in streamed), max))
        new_tokens = [b - a for a, b in zip(last, last[1:])]
        streamed = streamed[1:]
        updates = [b for b, _ in streamed]
        r.updates = len(updates)
        if updates:
            r.update_bytes_median = statistics.median(updates)
            r.update_bytes_max = max(updates)
            r.update_bytes_last = updates[-1]
        # An update carries the tokens made since the last one: at a fixed pace, a faster decoder sends more
        # of them at once. Per new token, an update that re-sent chips the page has would stand out.
        per_token = [b / n for (b, _), n in zip(streamed, new_tokens) if n > 0]
        r.update_token_bytes_max = max(per_token) if per_token else None
        r.total_bytes = sum(m["bytes"] for m in msgs)
        r.cdp_bytes = net["bytes"]
        for e in data.get("errors", []):
            if "AbortError" not in e:  # Gradio aborts the stream when it closes it
                r.notes.append(f"instrumentation: {e}")

    def _view_switch(self, page, r: RunResult, view: str = "head average"):
        """Attention view → "head average": seconds until the heatmap's title changes."""
        before = page.evaluate("() => window.__pg.snapshot().heat") or ""
        page.locator("#pg-view input").click()
        option = page.get_by_role("option", name=view, exact=True)
        option.wait_for(timeout=10_000)
        t_issue = self.now_ms()
        option.click()
        try:
            page.wait_for_function(
                "([before]) => { const h = window.__pg.snapshot().heat; return h && h !== before && /average/.test(h); }",
                arg=[before],
                timeout=120_000,
                polling=100,
            )
        except Exception:
            r.notes.append("view switch: the heatmap did not change within 120 s")
            return
        data = self.collect(page)
        changed = next(
            (e for e in data["timeline"] if e["t"] >= t_issue and e["heat"] and "average" in e["heat"]), None
        )
        if changed:
            r.view_switch_s = (changed["t"] - t_issue) / 1000
            tasks = [
                lt["dur"]
                for lt in data["longtasks"]
                if lt["start"] + lt["dur"] >= t_issue and lt["start"] <= changed["t"]
            ]
            r.view_switch_longest_task_s = max(tasks, default=0.0) / 1000

    def stop_run(self, model: str, max_new: int = 512, after_s: float = 3.0) -> dict:
        """Start a long run, click Stop ``after_s`` after Generate, time until it takes effect."""
        context, page, cdp, net, errors = self.open_page(model)
        out = {"model": model, "max_new": max_new, "click_after_s": after_s}
        try:
            self.set_inputs(page, SHORT_PROMPT, max_new)
            box = page.locator("#pg-stop").bounding_box()
            t_gen = self.now_ms()
            page.click("#pg-generate")
            time.sleep(max(0.0, after_s - (self.now_ms() - t_gen) / 1000))
            t_issue = self.now_ms()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            out["click_dispatch_s"] = (self.now_ms() - t_issue) / 1000  # the page acknowledged the click
            deadline = time.perf_counter() + self.run_timeout
            ended = self.wait_state(page, ("stopped", "done", "error"), t_issue, deadline)
            if not ended:
                out["timed_out_s"] = self.run_timeout
            else:
                self.wait_quiet(page, 2.0, time.perf_counter() + 30)
            data = self.collect_or_none(page)
            if data is None:
                out["note"] = "the page did not answer"
                return out
            tl = data["timeline"]
            before = [e for e in tl if e["t"] <= t_issue]
            after = [e for e in tl if e["t"] > t_issue]
            out["chips_at_click"] = before[-1]["chips"] if before else 0
            out["chips_at_end"] = tl[-1]["chips"] if tl else None
            out["status_tokens"] = tl[-1]["tokens"] if tl else None
            out["final_state"] = tl[-1]["state"] if tl else None
            chip_changes = [e["t"] for e, prev in zip(tl[1:], tl) if e["chips"] != prev["chips"] and e["t"] > t_issue]
            stopped = [e["t"] for e in after if e["state"] == "stopped"]
            clicks = [c["t"] for c in data["clicks"] if c["id"] == "pg-stop"]
            if clicks:
                out["click_handled_s"] = (clicks[0] - t_issue) / 1000
            if stopped and out["final_state"] == "stopped":
                effect = max([stopped[0]] + chip_changes)
                out["stop_s"] = (effect - t_issue) / 1000
                out["status_stopped_s"] = (stopped[0] - t_issue) / 1000
                out["last_chip_s"] = (max(chip_changes) - t_issue) / 1000 if chip_changes else 0.0
            elif not ended:
                out["stop_s"] = None
                out["note"] = f"neither stopped nor done within {self.run_timeout:.0f} s of the click"
            else:
                out["stop_s"] = None
                out["note"] = f"the run ended as {out['final_state']!r}: Stop did not take effect"
            tasks = [lt for lt in data["longtasks"] if lt["start"] + lt["dur"] >= t_gen]
            out["longest_task_s"] = max((lt["dur"] for lt in tasks), default=0.0) / 1000
            if errors:
                out["page_errors"] = errors[:3]
            if data.get("toasts"):
                out["toasts"] = data["toasts"][:3]
            return out
        finally:
            context.close()

    def profile_run(self, model: str, prompt: str, max_new: int, trace_path: Path | None) -> dict:
        """One run under a Chrome trace (devtools.timeline) and a V8 CPU profile: where the main
        thread's time goes, by trace event and by JavaScript function (self time)."""
        trace_path = Path(trace_path) if trace_path else None
        context, page, cdp, net, errors = self.open_page(model)
        try:
            self.set_inputs(page, prompt, max_new)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
            self.browser.start_tracing(
                page=page,
                categories=[
                    "devtools.timeline",
                    "disabled-by-default-devtools.timeline",
                    "v8.execute",
                    "blink.user_timing",
                ],
            )
            cdp.send("Profiler.start")
            t_issue = self.now_ms()
            page.click("#pg-generate")
            finished = self.wait_state(
                page, ("done", "stopped", "error"), t_issue, time.perf_counter() + self.run_timeout
            )
            profile = cdp.send("Profiler.stop")["profile"]
            trace = self.browser.stop_tracing()
            wall = (self.now_ms() - t_issue) / 1000
            if trace_path:
                trace_path.write_bytes(trace)
            return {
                "model": model,
                "prompt": "short" if prompt == SHORT_PROMPT else "300 words",
                "max_new": max_new,
                "finished": finished,
                "wall_s": wall,
                "trace_events": summarize_trace(trace),
                "js_self_time": summarize_profile(profile),
                "trace_file": str(trace_path) if trace_path else None,
            }
        finally:
            context.close()
