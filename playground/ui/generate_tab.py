"""The Generate half of "Generate & attention": stream tokens, stop, inspect a step, export.

The streaming loop is the heart of the app. Its costs are bounded per update (the chips grow by
appending; figures are drawn once the run ends or when asked), updates are paced across users,
and Stop is a flag the loop reads between two steps, so it takes effect within one decode step.
"""

from __future__ import annotations

import os
import threading
import time

import gradio as gr

from .. import figures
from ..session import MAX_NEW_TOKENS, export_model, export_run, start_run
from ..tokenizer import load_tokenizer
from .attention_view import VIEWS, attention_views
from .chips import ChipStream, all_chips, status_html
from .common import fail, ok, parse_bool, parse_choice, parse_seed, parse_whole, session_model, warn

DECODE_LOCK = threading.Lock()
ACTIVE_STREAMS: set = set()  # one token per generation in flight, to pace the streamed updates
STOP_FLAGS: dict[str, threading.Event] = {}  # run id -> set by Stop; removed when the run ends
STREAM_INTERVAL_S = 0.08
# Outputs after the chips and status: heatmap, query bars, step slider, prob bars, stages, step text,
# query slider, attention message.
N_AFTER = 8


def generate_tokens(state, prompt, temperature, top_k, top_p, max_new_tokens, seed, greedy,
                    view=VIEWS[0], layer=0, head=0, log_scale=True):
    """Stream tokens; at the end show the attention and the last step's distribution."""
    try:
        greedy = parse_bool(greedy, "Greedy")
        seed = parse_seed(seed, "Sampling seed")
        max_new_tokens = parse_whole(max_new_tokens, "Max new tokens")
        if max_new_tokens > MAX_NEW_TOKENS:
            raise ValueError(f"Max new tokens is {max_new_tokens:,}; this app generates at most "
                             f"{MAX_NEW_TOKENS} per run.")
        model = session_model(state)
        run, gen = start_run(model, state["recipe"], prompt, max_new_tokens=max_new_tokens,
                             temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, greedy=greedy)
    except Exception as e:
        yield (state, gr.skip(), fail(e)) + (gr.skip(),) * N_AFTER
        return
    run_id = os.urandom(8).hex()
    stop = STOP_FLAGS[run_id] = threading.Event()
    state = {**state, "run": run, "run_id": run_id}
    token = object()
    ACTIVE_STREAMS.add(token)
    try:
        yield from _stream(state, run, iter(gen), stop, view, layer, head, log_scale)
    finally:
        ACTIVE_STREAMS.discard(token)
        STOP_FLAGS.pop(run_id, None)


def _stream(state, run, steps, stop, view, layer, head, log_scale):
    chips = ChipStream(run.prompt_ids)
    t0 = time.perf_counter()
    skip = (gr.skip(),) * N_AFTER
    yield (state, chips.html(), status_html(run, 0.0, "running")) + skip  # the prompt's chips at once
    last_yield = time.perf_counter()
    while not stop.is_set():
        # One decode step at a time across all users: steps interleave fairly, and the cores are
        # not oversubscribed by several forwards each asking for every core (bench/: with 4 users
        # and no lock, the aggregate rate fell to half of one user's).
        with DECODE_LOCK:
            step = next(steps, None)
        if step is None:
            break
        run.steps.append(step)
        chips.add(step)
        now = time.perf_counter()
        run.elapsed = now - t0
        # Each update costs the server a few ms of GIL-bound Python and the browser one append;
        # pacing by the number of active generations keeps the whole server near 12 updates/s.
        if now - last_yield > STREAM_INTERVAL_S * max(1, len(ACTIVE_STREAMS)):
            last_yield = now
            yield (state, chips.html(), status_html(run, run.elapsed, "running")) + skip
    run.stopped = stop.is_set()
    run.elapsed = time.perf_counter() - t0
    final = status_html(run, run.elapsed, "stopped" if run.stopped else "done")
    # The final chips and status first (Stop is answered now), then the figures, which take longer.
    yield (state, chips.html(), final) + skip
    yield (state, gr.skip(), gr.skip()) + after_run_views(state, view, layer, head, log_scale)


def after_run_views(state, view=VIEWS[0], layer=0, head=0, log_scale=True):
    run = state["run"]
    n_steps = len(run.steps)
    heat, query_fig, query_update, att_msg = attention_views(state, view, layer, head, log_scale, None)
    step_outputs = inspect_step(state, n_steps - 1) if n_steps else (gr.skip(),) * 3
    step_update = gr.update(minimum=0, maximum=max(1, n_steps - 1), value=max(0, n_steps - 1), visible=n_steps > 1)
    return (heat, query_fig, step_update) + tuple(step_outputs) + (query_update, att_msg)


def stop_generation(state):
    """Raise the run's stop flag; the streaming loop ends after its current step and reports how
    many tokens it made. A run that already finished is left as it is (its status says "Done")."""
    flag = STOP_FLAGS.get((state or {}).get("run_id") or "")
    if flag is not None:
        flag.set()
    return None


def inspect_step(state, step_index):
    """Probability bars, the stage-by-stage reshaping, and a sentence about one generated token."""
    run = (state or {}).get("run")
    if run is None or not run.steps:
        empty = figures.empty_figure("Generate first")
        return empty, empty, "Generate some tokens, then pick one."
    try:
        i = parse_whole(step_index, "Step", 0, len(run.steps) - 1)
    except ValueError as e:
        return gr.skip(), gr.skip(), f"⚠️ {e}"
    s = run.steps[i]
    tok = load_tokenizer()
    fp = figures.format_prob
    top_labels = [f"{tok.piece(t).display} ({t})" for t, _ in s.top]
    bars = figures.token_probability_bars(top_labels, [p for _, p in s.top], chosen=_index_of(s.top, s.token_id),
                                          title=f"Step {i}: most likely next tokens under the sampling distribution")
    cand_labels = [f"{tok.piece(t).display} ({t})" for t in s.candidates]
    stages = figures.sampling_stages_figure(cand_labels, s.stages, chosen=s.candidates.index(s.token_id),
                                            title="How each knob reshapes the distribution")
    settings = run.settings
    top_p = settings["top_p"] if settings["top_p"] not in (None, 1.0) else "off"
    text = (
        f"**Step {i}** chose **{tok.piece(s.token_id).display}** (id {s.token_id}) at position {s.position}: "
        f"p = **{fp(s.prob)}** under the sampling distribution, {fp(s.raw_prob)} under the raw softmax, "
        f"rank **{s.rank}** of {tok.n_vocab:,}. "
        f"Entropy {s.entropy:.2f} bits after the filters ({s.raw_entropy:.2f} bits raw); "
        f"{s.kept_tokens:,} tokens could have been drawn. Settings: temperature {settings['temperature']}, "
        f"top-k {settings['top_k'] or 'off'}, top-p {top_p}."
    )
    return bars, stages, text


def _index_of(top, token_id):
    for i, (t, _) in enumerate(top):
        if t == token_id:
            return i
    return None


def pick_token(state, view, layer, head, log_scale, evt: gr.EventData):
    """A click on a chip: the query moves to that token, and a generated token opens its step.

    Outputs: step slider, prob bars, stages, step text, heatmap, query bars, query slider, message."""
    run = (state or {}).get("run")
    data = getattr(evt, "_data", None) or {}
    if run is None:
        return (gr.skip(),) * 8
    try:
        position = parse_whole(data.get("position"), "Token position", 0, len(run.token_ids) - 1)
    except ValueError as e:
        return (gr.skip(),) * 7 + (warn(str(e)),)
    heat, query_fig, query_update, att_msg = attention_views(state, view, layer, head, log_scale, position)
    step = position - len(run.prompt_ids)
    if step < 0:
        text = (f"Position {position} is part of the prompt: the model read it, it did not choose it. "
                "The attention view now shows where it looked.")
        return (gr.skip(), gr.skip(), gr.skip(), text, heat, query_fig, query_update, att_msg)
    return (gr.update(value=step),) + tuple(inspect_step(state, step)) + (heat, query_fig, query_update, att_msg)


def export_run_file(state, fmt):
    run = (state or {}).get("run")
    if run is None:
        return gr.skip(), warn("Generate something first; there is no run to export yet.")
    try:
        fmt = parse_choice(fmt, ("json", "npz"), "Export format")
        return str(export_run(run, session_model(state), fmt)), ok(f"Run exported as .{fmt}.")
    except Exception as e:
        return gr.skip(), fail(e)


def export_model_file(state):
    try:
        return str(export_model(session_model(state), state["recipe"])), ok("Model exported; the upload box accepts it back.")
    except Exception as e:
        return gr.skip(), fail(e)


def run_data(state):
    """API: the current run's tokens with their probabilities."""
    from ..session import describe_recipe

    run = (state or {}).get("run")
    if run is None:
        return {"error": "Generate first."}
    tok = load_tokenizer()
    return {
        "model": describe_recipe(run.recipe), "settings": run.settings, "prompt_ids": run.prompt_ids,
        "prompt_tokens_cropped": run.n_cropped, "token_ids": run.token_ids, "stopped": run.stopped,
        "text": tok.decode([s.token_id for s in run.steps]),
        "steps": [{"token_id": s.token_id, "token": tok.piece(s.token_id).display, "prob": s.prob,
                   "raw_prob": s.raw_prob, "rank": s.rank, "entropy_bits": s.entropy,
                   "top": [[t, p] for t, p in s.top]} for s in run.steps],
    }


def chips_of_run(state) -> str:
    run = (state or {}).get("run")
    return all_chips(run) if run is not None else ""
