"""Two generations side by side, step by step: two models, or two sampling settings, one seed.

Both streams share the prompt and the seed, so only the model or the settings differ; their steps
take turns under the server's decode lock.
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from playground.server.runs import start_run

from . import compare_views as cv
from . import redraw
from .common import (
    ok,
    parse_bool,
    parse_number,
    parse_optional_count,
    parse_optional_number,
    parse_seed,
    parse_whole,
    tr,
)
from .decoding import DECODE_LOCK
from .results import only, result

MAX_COMPARE_NEW = 200  # tokens per stream in the side-by-side views
STREAM_INTERVAL_S = 0.25
Streams = result("Streams", "side_msg", "side")  # the side-by-side section's message and columns


def two_streams(pairs, prompt, seed, max_new, titles, lang="en", request=None):
    """Run two generations step by step, yielding (message, side-by-side HTML). ``titles(lang)`` names
    the two streams."""
    max_new = parse_whole(max_new, "Max new tokens", 1, MAX_COMPARE_NEW)
    seed = parse_seed(seed, "Sampling seed")
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")  # both streams share it: only the model/settings differ
    gens = []
    for model, recipe, settings in pairs:
        run, gen = start_run(model, recipe, prompt, max_new_tokens=max_new, seed=seed, **settings)
        gens.append((run, iter(gen)))
    steps = ([], [])
    prompt_ids = gens[0][0].prompt_ids
    t0 = last = time.perf_counter()
    yield Streams(
        ok(tr(lang, "cmp_streams", n=max_new, seed=seed)),
        cv.side_by_side(titles(lang), prompt_ids, *steps, False, lang),
    )
    for _ in range(max_new):
        for (_run, it), out in zip(gens, steps):
            with DECODE_LOCK:
                step = next(it, None)
            if step is not None:
                out.append(step)
        if time.perf_counter() - last > STREAM_INTERVAL_S:
            last = time.perf_counter()
            yield only(Streams, side=cv.side_by_side(titles(lang), prompt_ids, *steps, False, lang))
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


def sampling_settings(temperature, top_k, top_p, greedy=False) -> dict:
    return {
        "temperature": parse_number(temperature, "Temperature"),
        "top_k": parse_optional_count(top_k, "top-k"),
        "top_p": parse_optional_number(top_p, "top-p"),
        "greedy": parse_bool(greedy, "Greedy"),
    }
