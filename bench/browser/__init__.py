"""``python -m bench --browser``: the core loop as a learner meets it, in headless Chromium (issue 9).

The app is started as ``python -m bench.browser --serve`` (what app.py does, under another name).

For each model (the bundled one the page loads with, and GPT-2-small-shaped random weights built
through the page's Model tab) × max new tokens × prompt (short, and a 300-word English paragraph),
one greedy run is timed twice, back to back on the same server: in the browser (click Generate →
first chip visible → run finished) and through ``gradio_client`` (``/generate``, no browser). Also
measured in the page: the main thread's long tasks (PerformanceObserver ``longtask``), the bytes of
every streamed update on the SSE stream ``/gradio_api/queue/data``, how long Stop takes to take
effect, and how long a change of attention view takes to redraw the heatmap.

Timestamps are taken inside the page (a MutationObserver on the chips, the status and the heatmap
records ``performance.timeOrigin + performance.now()`` of every change), so a busy main thread
delays what is recorded exactly as it delays what the learner sees. Each run gets a fresh page
(a fresh Gradio session), so a run that timed out cannot slow the next one down.

Selectors follow the new chips/status contract (``#pg-chips .pg-chip[data-step]``,
``#pg-status [data-state][data-tokens]``) and fall back to the old UI (a HighlightedText whose
generated labels contain "%", a status text "Done: N tokens" / "... stopped by you").
"""

from __future__ import annotations

import os
from pathlib import Path

from . import inside_views, summaries
from .cases import CHROMIUM, MODELS, SHORT_PROMPT, VIEWPORT, RunResult, long_prompt
from .generate_runs import Bench
from .summaries import fmt_s

__all__ = ["CHROMIUM", "run", "table", "targets"]


# ---- the benchmark ------------------------------------------------------------------------


def run(
    quick: bool = False,
    run_timeout: float = 300.0,
    models=None,
    tokens=None,
    prompts=None,
    stop: bool = True,
    profile: bool = False,
    trace_path: Path | None = None,
    log=print,
    checkpoint=None,
    generate: bool = True,
    inside: bool = True,
    inside_only: list[str] | None = None,
    inside_reps: int = 1,
) -> dict:
    """Every run; ``checkpoint(result)`` is called after each one (partial results survive a crash)."""
    from bench import report

    models = models or list(MODELS)
    tokens = tokens or ([40, 200] if quick else [40, 200, 512])
    prompt_texts = {"short": SHORT_PROMPT, "300 words": long_prompt()}
    prompts = prompts or list(prompt_texts)
    result = {
        "date": report.now(),
        "machine": report.machine(),
        "quick": quick,
        "run_timeout_s": run_timeout,
        "config": {
            "models": {m: MODELS[m]["label"] for m in models},
            "max_new_tokens": tokens,
            "prompts": {p: prompt_texts[p] for p in prompts},
            "greedy": True,
            "seed": 42,
            "viewport": VIEWPORT,
        },
        "loadavg_start": os.getloadavg(),
        "runs": [],
        "stop": [],
    }
    bench = Bench(run_timeout=run_timeout, log=log)
    result["chromium"] = bench.chromium_version
    result["app_page_s"] = bench.app.page_s
    try:
        if "bundled" in models and generate:  # before any other run: the server has served no run to a page yet
            log("  bundled, short prompt, 200 tokens: a fresh page's first run, its second, another page's first ...")
            try:
                result["first_runs"] = bench.first_runs("bundled", SHORT_PROMPT, 200)
            except Exception as e:
                result["first_runs"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            log(
                "   "
                + ", ".join(
                    f"{k} {fmt_s(v.get('drawn_s')) if isinstance(v, dict) else v}"
                    for k, v in result["first_runs"].items()
                )
            )
            if checkpoint:
                checkpoint(result)
        for model in models if generate else []:
            for max_new in tokens:
                for pname in prompts:
                    r = RunResult(model=model, prompt=pname, max_new=max_new)
                    restarted = bench.ensure_app()
                    if restarted:
                        r.notes.append(restarted)
                        log(f"  note: {restarted}")
                    text = prompt_texts[pname]
                    log(f"  {model}, {pname} prompt, {max_new} tokens: API ...", end="", flush=True)
                    try:
                        api = bench.api_run(model, text, max_new)
                        r.api_s, r.api_first_s, r.api_updates = api["s"], api["first_s"], api["updates"]
                    except Exception as e:
                        r.api_error = f"{type(e).__name__}: {e}"[:300]
                    log(f" {fmt_s(r.api_s)}; browser ...", end="", flush=True)
                    try:
                        bench.browser_run(model, text, max_new, r)
                    except Exception as e:
                        r.error = f"{type(e).__name__}: {e}"[:300]
                    waited = bench.wait_server_idle()
                    if waited > 1.5:
                        r.notes.append(f"the server stayed busy for {waited:.1f} s after the page closed")
                    log(
                        " "
                        + ("timed out" if r.timed_out_s else fmt_s(r.browser_s))
                        + (f" ({r.error})" if r.error else "")
                    )
                    result["runs"].append({**r.__dict__, "ratio": r.ratio})
                    if checkpoint:
                        checkpoint(result)
            if stop:
                log(f"  {model}: Stop after 3 s of a 512-token run ...", end="", flush=True)
                restarted = bench.ensure_app()
                try:
                    s = bench.stop_run(model, 512, 3.0)
                except Exception as e:
                    s = {"model": model, "error": f"{type(e).__name__}: {e}"[:300]}
                bench.wait_server_idle()
                if restarted:
                    s["note_app"] = restarted
                log(f" {fmt_s(s.get('stop_s'))}" + (f" ({s['note']})" if s.get("note") else ""))
                result["stop"].append(s)
                if checkpoint:
                    checkpoint(result)
        if inside:
            log("  Inside views: GPT-2 small shape, a 256-token run, each view clicked in the page ...")
            bench.ensure_app()
            try:
                result["inside_views"] = inside_views.measure(bench, log=log, only=inside_only, reps=inside_reps)
            except Exception as e:
                result["inside_views"] = {"error": f"{type(e).__name__}: {e}"[:300] + _where(e)}
            if checkpoint:
                checkpoint(result)
        if profile:
            log(f"  profile: {models[0]}, 300-word prompt, 200 tokens (Chrome trace + V8 CPU profile) ...")
            bench.ensure_app()
            try:
                result["profile"] = bench.profile_run(models[0], prompt_texts["300 words"], 200, trace_path)
            except Exception as e:
                result["profile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    finally:
        bench.close()
    result["loadavg_end"] = os.getloadavg()
    result["targets"] = [t.__dict__ for t in targets(result)]
    return result


def targets(result: dict) -> list:
    """The Generate tab's targets (issue 9), then the Inside views' (issue 23)."""
    return summaries.targets(result) + inside_views.targets(result)


def table(result: dict) -> str:
    return "\n\n".join(t for t in (summaries.table(result), inside_views.table(result)) if t)


def _where(e: BaseException) -> str:
    """Where ``e`` was raised, as " (at file:line, in function)": some exceptions (a CancelledError)
    carry no message at all."""
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {os.path.basename(f.filename)}:{f.lineno}, in {f.name})"
