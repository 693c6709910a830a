"""A run in a GPU slot of its own: how the decode loop serves a big model's run on a ZeroGPU Space.

On ZeroGPU a GPU exists only inside a ``spaces.GPU`` call, in a forked worker, with its arguments and results
pickled across (``server.gpu``). The loop's shared forward cannot live there: a slot per batched step would
ship every run's KV cache in and out of the worker, and ask the scheduler for a slot, at every token (and
rows of different visitors' calls never share a GPU). So a run whose model takes GPU slots
(``gpu.uses_gpu_slots``) gets one slot for the whole run: the run's model and settings go in, the worker
builds its ``Generation`` on the GPU and streams each step back as CPU data, and the run's ``Stream`` gets
them as the loop's would. Stop closes the stream's generator: ``spaces`` then stops the worker's loop
after the step in flight. Smaller models keep the CPU loop and its continuous batching (docs/operations.md).

The thread that reads the slot runs in the context of the caller of ``DecodeLoop.submit`` (the visitor's
Gradio request), so ZeroGPU counts the GPU time against that visitor's quota.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator

import torch

from playground.engine.sampling import Generation, GenerationStep
from playground.server.gpu import gpu_work, moved_in, to_cpu

log = logging.getLogger(__name__)

MAX_RUN_SECONDS = 120  # the most a run's slot asks for: a free visitor's quota is minutes a day


def run_seconds(model, spec: dict) -> int:
    """The slot a run asks for: a start (the worker's fork and the weights' copy to the GPU) plus a
    generous 20 ms a token, within [15, MAX_RUN_SECONDS]. Shorter slots are served first on ZeroGPU."""
    return max(15, min(MAX_RUN_SECONDS, 10 + spec["max_new_tokens"] // 50))


def spec_of(gen: Generation) -> dict:
    """What rebuilds ``gen`` in the worker: its prompt (already cropped to the window) and settings, with the
    seed it drew (so a run without a seed draws the same tokens there as its receipt says)."""
    return {
        "prompt_ids": list(gen.prompt_ids),
        "max_new_tokens": gen.max_new_tokens,
        "temperature": gen.temperature,
        "top_k": gen.top_k,
        "top_p": gen.top_p,
        "seed": gen.seed_used,
        "capture_attention": gen.capture_attention,
        "n_top": gen.n_top,
        "use_cache": gen.use_cache,
    }


@gpu_work(duration=run_seconds)
def gpu_generation(model, spec: dict) -> Iterator[GenerationStep | Exception]:
    """The steps of one run, made in a GPU slot: the model moved in, each step out as CPU data. An error
    comes out as the last item, not raised: ``spaces`` would replace it by "ZeroGPU worker error" and its
    class name, and the learner must read what went wrong (NaN logits at step N) in their language."""
    with moved_in(model), torch.no_grad():
        gen = Generation(model, **spec)
        try:
            for step in gen:
                yield to_cpu(step)
        except Exception as e:
            yield e
        finally:
            gen.close()


def start(stream, finished: Callable[[], None]) -> threading.Thread:
    """Read ``stream``'s run from its GPU slot on a thread of its own; ``finished()`` once it ends."""
    context = contextvars.copy_context()  # the visitor's request, which ZeroGPU charges the time to
    thread = threading.Thread(target=context.run, args=(_read, stream, finished), name="gpu-run", daemon=True)
    thread.start()
    return thread


def _read(stream, finished: Callable[[], None]) -> None:
    gen = stream.gen
    error: Exception | None = None
    steps = gpu_generation(gen.model, spec_of(gen))
    try:
        for step in steps:
            if isinstance(step, Exception):
                raise step
            gen.steps.append(step)  # the app's generation counts the tokens made for it (``done``, ``token_ids``)
            stream._deliver(step, 0)
            if stream.stop_asked or gen.done:
                break
    except Exception as e:  # this run only, as in the loop
        error = e
    finally:
        try:
            steps.close()  # early: the worker stops after the step in flight
        except Exception:
            log.exception("closing a GPU run")
        finished()
        stream._end(error)
