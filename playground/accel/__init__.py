"""Speed beside the teaching model: ``accelerate(model)`` and nothing else to call.

``engine.model`` is the model as the textbook writes it, and a plain ``generate()`` on it compiles,
times and installs nothing. ``accelerate(model)`` applies this machine's measured decode choices to
that one model (``decode_paths``: weight layouts, stacked Q/K/V, the compiled one-row kernel;
``native_decode``: the whole step in one compiled call) and attaches the accelerated decoder to it
(``engine.decoding``'s seam). ``PLAYGROUND_ACCEL=off`` is the one switch: then ``accelerate`` leaves
every model plain and nothing is built.
"""

from __future__ import annotations

import os

from playground.accel.decode_paths import optimize_for_decode
from playground.accel.decoder import ACCELERATED
from playground.engine import decoding

SWITCH = "PLAYGROUND_ACCEL"


def enabled() -> bool:
    """Whether acceleration is on (``PLAYGROUND_ACCEL`` is not "off", "0" or "no")."""
    return os.environ.get(SWITCH, "on").strip().lower() not in ("off", "0", "no")


def accelerate(model, compiled_kernel: bool = True):
    """Make ``model`` decode as fast as this machine allows, in place; returned for chaining. Its
    numbers are its plain forward's (checked where a compiled path is chosen). Call it again after a
    dtype or device conversion. With acceleration switched off, the model stays plain."""
    if not enabled():
        decoding.detach(model)
        return model
    optimize_for_decode(model, compiled_kernel=compiled_kernel)
    decoding.attach(model, ACCELERATED)
    return model


def is_accelerated(model) -> bool:
    return decoding.decoder_of(model) is ACCELERATED


__all__ = ["accelerate", "enabled", "is_accelerated", "optimize_for_decode"]
