"""The browser benchmark's targets, its tables, and summaries of a Chrome trace and a V8 CPU profile."""

from __future__ import annotations

import json
import os

from .cases import LONGTASK_TARGET_S, RATIO_TARGET, STOP_TARGET_S, UPDATE_GROWTH_TARGET, VIEWPORT


def summarize_profile(profile: dict, top: int = 15) -> list[dict]:
    """Self time per JavaScript function (name, file, line) from a V8 CPU profile."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    self_us: dict[int, float] = {}
    for node_id, dt in zip(profile.get("samples", []), profile.get("timeDeltas", [])):
        self_us[node_id] = self_us.get(node_id, 0.0) + dt
    by_fn: dict[tuple, float] = {}
    for node_id, us in self_us.items():
        cf = nodes[node_id]["callFrame"]
        key = (
            cf.get("functionName") or "(anonymous)",
            os.path.basename(cf.get("url", "")),
            cf.get("lineNumber", -1) + 1,
            cf.get("columnNumber", -1) + 1,
        )
        by_fn[key] = by_fn.get(key, 0.0) + us
    total = sum(by_fn.values()) or 1.0
    rows = sorted(by_fn.items(), key=lambda kv: -kv[1])[:top]
    return [
        {"function": k[0], "file": k[1], "line": k[2], "column": k[3], "self_s": v / 1e6, "share": v / total}
        for k, v in rows
    ]


def summarize_trace(trace: bytes, top: int = 15) -> list[dict]:
    """Total duration per trace event name on the renderer's main thread (complete events)."""
    data = json.loads(trace)
    events = data["traceEvents"] if isinstance(data, dict) else data
    main = set()
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain":
            main.add((e["pid"], e["tid"]))
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    wrappers = {
        "RunTask",
        "ThreadControllerImpl::RunTask",
        "RunMicrotasks",
        "FunctionCall",
        "TimerFire",
        "v8.callFunction",
        "EventDispatch",
        "FireAnimationFrame",
        "ProfileCall",
    }
    for e in events:
        if (
            (e.get("pid"), e.get("tid")) in main
            and e.get("ph") == "X"
            and "dur" in e
            and e["name"] not in wrappers
            and not e["name"].startswith("V8.")
        ):
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return [{"event": k, "total_s": v / 1e6, "count": counts[k]} for k, v in rows]


def fmt_s(x):
    return "—" if x is None else f"{x:.2f} s"


def targets(result: dict) -> list:
    from bench.checks import Target

    out = []
    runs = result["runs"]
    for r in runs:
        if r["max_new"] != 512 and not (result["quick"] and r["max_new"] == max(x["max_new"] for x in runs)):
            continue
        name = f"browser / API, {r['model']}, {r['prompt']} prompt, {r['max_new']} tokens"
        if r["timed_out_s"]:
            seen = r["browser_s"] if r["browser_s"] else r["timed_out_s"]
            how = f"done at {seen:.0f} s" if r["browser_s"] else "at least"
            out.append(
                Target(
                    name + f" (browser timed out after {r['timed_out_s']:.0f} s; {how})",
                    None if not r["api_s"] else seen / r["api_s"],
                    f"<= {RATIO_TARGET}",
                    False,
                )
            )
        else:
            ratio = r.get("ratio")
            out.append(Target(name, ratio, f"<= {RATIO_TARGET}", None if ratio is None else ratio <= RATIO_TARGET))
    measured = [r["longest_task_s"] for r in runs if r["longest_task_s"] is not None]
    longest = max(measured, default=None)
    out.append(
        Target(
            "longest main-thread task over all runs (s)",
            longest,
            f"<= {LONGTASK_TARGET_S}",
            None if longest is None else longest <= LONGTASK_TARGET_S,
        )
    )
    for s in result["stop"]:
        v = s.get("stop_s")
        ok = None if "error" in s else (v is not None and v <= STOP_TARGET_S)
        out.append(Target(f"Stop takes effect, {s['model']} (s)", v, f"<= {STOP_TARGET_S}", ok))
    for model in sorted({r["model"] for r in runs}):
        for prompt in sorted({r["prompt"] for r in runs}):
            mine = [
                r for r in runs if r["model"] == model and r["prompt"] == prompt and r.get("update_token_bytes_max")
            ]
            if len(mine) < 2:
                continue
            lo = min(mine, key=lambda r: r["max_new"])
            hi = max(mine, key=lambda r: r["max_new"])
            growth = hi["update_token_bytes_max"] / lo["update_token_bytes_max"]
            out.append(
                Target(
                    f"largest streamed update after the first, per new token, {model}, {prompt} prompt: "
                    f"{hi['max_new']} / {lo['max_new']} tokens ({hi['update_token_bytes_max']:,.0f} / "
                    f"{lo['update_token_bytes_max']:,.0f} B a token)",
                    growth,
                    f"<= {UPDATE_GROWTH_TARGET}",
                    growth <= UPDATE_GROWTH_TARGET,
                )
            )
    return out


def table(result: dict) -> str:
    lines = [
        f"Headless Chromium {result.get('chromium', '?')} at {VIEWPORT['width']}×{VIEWPORT['height']}, greedy, "
        f"per-run timeout {result['run_timeout_s']:.0f} s; API = gradio_client /generate on the same server",
        "",
        "| model | prompt | new tokens | API s | browser s | browser / API | first chip s | heatmap s | "
        "longest task s | long tasks total s | updates | bytes/update median | max | view switch s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        if r["timed_out_s"] and r["browser_s"] and r["api_s"]:
            # the page could only be read once its main thread was free: that is when it finished
            browser = f"timed out after {r['timed_out_s']:.0f}; done at {r['browser_s']:.1f}"
            ratio = f"{r['browser_s'] / r['api_s']:.2f}×"
        elif r["timed_out_s"]:
            browser = f"timed out after {r['timed_out_s']:.0f}"
            ratio = f"> {r['timed_out_s'] / r['api_s']:.1f}×" if r["api_s"] else "—"
        else:
            browser = _n(r["browser_s"], 1)
            ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        if r["error"]:
            browser += f" ({r['error'][:60]})"
        cells = [
            r["model"],
            r["prompt"],
            str(r["max_new"]),
            _n(r["api_s"], 1),
            browser,
            ratio,
            _n(r["first_chip_s"], 2),
            _n(r["heatmap_s"], 1),
            _n(r["longest_task_s"], 2),
            _n(r["long_task_total_s"], 1),
            "—" if r["updates"] is None else str(r["updates"]),
            _b(r["update_bytes_median"]),
            _b(r["update_bytes_max"]),
            _n(r["view_switch_s"], 2),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    first = result.get("first_runs")
    if first:
        lines += [
            "",
            "| bundled model, short prompt, 200 new tokens | click → drawn s | first chip s | done s | heatmap s | "
            "longest task s | long tasks total s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for k, v in first.items():
            if not isinstance(v, dict):
                lines.append(f"| {k} | {v} |")
                continue
            keys = ("drawn_s", "first_chip_s", "done_s", "heatmap_s", "longest_task_s", "long_task_total_s")
            lines.append(f"| {k} | " + " | ".join(_n(v.get(key), 2) for key in keys) + " |")
    if result["stop"]:
        lines += [
            "",
            "| Stop (512-token run, short prompt) | click after s | chips at click | chips at end | "
            "stop took effect s | status said stopped s | last chip s | longest task s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in result["stop"]:
            if "error" in s:
                lines.append(f"| {s['model']} | error: {s['error'][:100]} |")
                continue
            took = _n(s.get("stop_s"), 2) if s.get("stop_s") is not None else s.get("note", "—")
            lines.append(
                "| "
                + " | ".join(
                    [
                        s["model"],
                        _n(s.get("click_after_s"), 1),
                        str(s.get("chips_at_click", "—")),
                        str(s.get("chips_at_end", "—")),
                        took,
                        _n(s.get("status_stopped_s"), 2),
                        _n(s.get("last_chip_s"), 2),
                        _n(s.get("longest_task_s"), 2),
                    ]
                )
                + " |"
            )
    prof = result.get("profile")
    if prof and "error" not in prof:
        lines += [
            "",
            f"Where the page's main thread spent a {prof['max_new']}-token run, {prof['prompt']} prompt "
            f"({prof['wall_s']:.1f} s wall), by trace event (task/call wrappers left out; nested events overlap):",
        ]
        lines += [f"  {e['event']}: {e['total_s']:.2f} s ({e['count']}×)" for e in prof["trace_events"][:10]]
        lines += ["JavaScript self time by function:"]
        lines += [
            f"  {f['function']} ({f['file']}:{f['line']}:{f['column']}): {f['self_s']:.2f} s, {f['share']:.0%}"
            for f in prof["js_self_time"][:10]
        ]
    elif prof:
        lines.append(f"profile: {prof['error']}")
    return "\n".join(lines)


def _n(x, digits):
    return "—" if x is None else f"{x:.{digits}f}"


def _b(x):
    return "—" if x is None else f"{x:,.0f}"
