"""Speed beside the teaching model: ``accelerate(model)`` and nothing else to call.

``engine.model`` is the model as the textbook writes it, and a plain ``generate()`` on it compiles,
times and installs nothing. ``accelerate(model)`` applies this machine's measured decode choices to
that one model (``decode_paths``: weight layouts, stacked Q/K/V, the compiled one-row kernel;
``native_decode``: the whole step in one compiled call, where ``native_choice`` checked and measured it) and
attaches the accelerated decoder to it (``engine.decoding``'s seam). ``PLAYGROUND_ACCEL=off`` is the one switch: then ``accelerate`` leaves
every model plain and nothing is built. On a ZeroGPU Space acceleration is off too: the models worth a
GPU decode there, and a model that goes to a GPU worker is pickled, which moves each weight's storage into
shared memory in place, under any layout or compiled step built on it.
"""

from __future__ import annotations

import os
import weakref

import torch

from playground.accel import background
from playground.accel.copies import Copies, copy_plan, held_bytes
from playground.accel.decode_paths import optimize_for_decode
from playground.accel.decoder import ACCELERATED
from playground.engine import decoding
from playground.runtime import kernels
from playground.runtime.devices import on_zero_gpu
from playground.runtime.threads import torch_threads

SWITCH = "PLAYGROUND_ACCEL"
# The thread count decisions are made for: the process's own (a new thread's, such as the decode loop's).
# A request's worker thread may run on fewer, and its decisions would then be for threads no decoder uses.
DECODE_THREADS = torch.get_num_threads()
# model -> (the decisions it found unmade, their keys, the background measurements completed by then)
_UNDECIDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def enabled() -> bool:
    """Whether acceleration is on (``PLAYGROUND_ACCEL`` is not "off", "0" or "no", and not on ZeroGPU)."""
    return os.environ.get(SWITCH, "on").strip().lower() not in ("off", "0", "no") and not on_zero_gpu()


def refuses(model) -> str | None:
    """Why ``model`` stays on the plain torch path whatever this machine measured, or None. Every path here
    (stacked Q/K/V, the native step, its cache layout) computes GPT-2's layout: a model with any switch since
    GPT-2 (RoPE, RMSNorm, SwiGLU, GQA, QK-norm, a window, no biases...) would get wrong numbers from them."""
    cfg = getattr(model, "cfg", None)
    switches = cfg.since_gpt2() if cfg is not None and hasattr(cfg, "since_gpt2") else []
    return "plain path for a model with switches since GPT-2: " + ", ".join(switches) if switches else None


def accelerate(model, compiled_kernel: bool = True, *, measure: bool = True):
    """Make ``model`` decode as fast as this machine allows, in place; returned for chaining. Its
    numbers are its plain forward's (checked where a compiled path is chosen). Call it again after a
    dtype or device conversion. With acceleration switched off, the model stays plain.

    ``measure=False`` (a user's request) times nothing: each decision is read from this process or this
    machine's file (``kernels.keep_decisions``), and one not made yet takes the plain path;
    ``undecided(model)`` then names them, for a measurement outside the request."""
    if not enabled() or refuses(model) is not None:
        decoding.detach(model)
        return model
    if measure:
        with torch_threads(DECODE_THREADS):
            optimize_for_decode(model, compiled_kernel=compiled_kernel)
        _UNDECIDED.pop(model, None)
    else:
        with kernels.decided_only() as skipped, torch_threads(DECODE_THREADS):
            optimize_for_decode(model, compiled_kernel=compiled_kernel)
        _UNDECIDED[model] = (list(skipped), list(skipped.keys), background.completed())
    decoding.attach(model, ACCELERATED)
    return model


def undecided(model) -> list[str]:
    """The decisions ``accelerate(model, measure=False)`` found unmade (their plain path runs meanwhile)."""
    return list(_UNDECIDED.get(model, ([], [], 0))[0])


def stale(model) -> bool:
    """Whether ``model`` runs plain paths for decisions that a background measurement has made since it was
    built: a server builds it again (a model in use is never changed in place). Another shape's measurement
    leaves it as it is: in a room where many learners build shapes of their own, each measurement that ends
    would otherwise send every model still waiting for its own into a build, for nothing."""
    skipped, keys, seen = _UNDECIDED.get(model, ([], [], 0))
    return bool(skipped) and background.completed() > seen and kernels.any_made(keys)


def is_accelerated(model) -> bool:
    return decoding.decoder_of(model) is ACCELERATED


__all__ = [
    "Copies",
    "accelerate",
    "copy_plan",
    "enabled",
    "held_bytes",
    "is_accelerated",
    "optimize_for_decode",
    "refuses",
    "stale",
    "undecided",
]
