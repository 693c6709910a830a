"""Two generations side by side, step by step: two models, or two sampling settings, one seed.

Both streams share the prompt and the seed, so only the model or the settings differ; the server's
decode loop makes their steps beside every other learner's (one shared forward when both use the
same model), and this handler waits for them.
"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

from playground.server.decode_loop import LOOP
from playground.server.runs import start_run
from playground.settings import SamplingSettings, parse_seed, parse_whole
from playground.ui import redraw
from playground.ui.common import ok, tr
from playground.ui.results import only, result

from . import views as cv

MAX_COMPARE_NEW = 200  # tokens per stream in the side-by-side views
STREAM_INTERVAL_S = 0.25
Streams = result("Streams", "side_msg", "side")  # the side-by-side section's message and columns


def shared_length_and_seed(max_new, seed) -> tuple[int, int]:
    """The two streams' shared number of new tokens (1..MAX_COMPARE_NEW) and seed, as typed; no seed
    draws one, which both streams then share: only the model or the settings differ."""
    max_new = parse_whole(max_new, "Max new tokens", 1, MAX_COMPARE_NEW)
    seed = parse_seed(seed, "Sampling seed")
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    return max_new, seed


def sampling_settings(temperature, top_k, top_p, max_new: int, seed: int, greedy=False) -> SamplingSettings:
    """One stream's settings, parsed once: what its boxes sent, with the shared length and seed."""
    return SamplingSettings.parse(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        max_new_tokens=max_new,
        seed=seed,
        greedy=greedy,
        seed_name="Sampling seed",
    )


def two_streams(pairs, prompt, titles, lang="en", request=None):
    """Run two generations step by step, yielding (message, side-by-side HTML). ``pairs`` holds
    (model, recipe, SamplingSettings) twice, with the same length and seed; ``titles(lang)`` names
    the two streams."""
    max_new, seed = pairs[0][2].max_new_tokens, pairs[0][2].seed
    wake = threading.Event()  # both streams wake this handler
    streams = []
    try:
        for model, recipe, settings in pairs:
            run, gen = start_run(model, recipe, prompt, settings)
            streams.append((run, LOOP.submit(gen, wake=wake)))
        steps = ([], [])
        prompt_ids = streams[0][0].prompt_ids
        t0 = last = time.perf_counter()
        yield Streams(
            ok(tr(lang, "cmp_streams", n=max_new, seed=seed)),
            cv.side_by_side(titles(lang), prompt_ids, *steps, False, lang),
        )
        ended = [False, False]
        while not all(ended):
            wake.wait(1.0)
            wake.clear()  # before taking: a step delivered after it sets it again
            for i, ((_run, stream), out) in enumerate(zip(streams, steps)):
                new, ended[i] = stream.take()
                out.extend(new)
                if ended[i] and stream.error is not None:
                    raise stream.error
            if time.perf_counter() - last > STREAM_INTERVAL_S:
                last = time.perf_counter()
                yield only(Streams, side=cv.side_by_side(titles(lang), prompt_ids, *steps, False, lang))
    finally:
        for _run, stream in streams:
            stream.stop()  # a cancelled event or an error: neither stream keeps decoding
    seconds = f"{time.perf_counter() - t0:.1f}"
    # What the columns show of each step (not its attention rows), to draw them again in another language.
    kept = tuple(
        [SimpleNamespace(index=s.index, token_id=s.token_id, prob=s.prob, raw_prob=s.raw_prob) for s in out]
        for out in steps
    )

    def draw(lang, present=False):
        return Streams(
            ok(tr(lang, "cmp_streams_done", n=max_new, seconds=seconds, seed=seed)),
            cv.side_by_side(titles(lang), prompt_ids, *kept, True, lang),
        )

    redraw.remember(request, "cmp_side", draw)
    yield draw(lang)
