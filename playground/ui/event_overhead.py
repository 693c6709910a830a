"""Two costs Gradio 6 pays on every event that this app pays once instead, and a third that each event clears.

- ``Blocks.get_state_ids_to_track`` finds, for each stateful output of an event, whether any event of the
  app listens to its change, by scanning every event's triggers: with this app's six hundred events and a
  room poll's handful of ``gr.State`` outputs, about 1,300 comparisons a poll, sixty pages polling at once.
  The app's events are fixed once it is built (it renders nothing per session), so ``install`` finds the
  tracked outputs of each event once and keeps them; the hashes of their values are still taken each time.
- ``route_utils.call_process_api`` wraps every event in ``MatplotlibBackendMananger``, which imports
  matplotlib on entry and exit. Without matplotlib installed, each import searches ``sys.path`` again and
  fails. ``install`` records the module as absent (``sys.modules["matplotlib"] = None``, Python's own
  way of saying so) when it is not installed, so the import fails at once; installed, nothing changes.
- Gradio runs each event's function in a worker thread of its own pool, and a thread that ran a parallel
  torch operation keeps its OpenMP workers until it ends: with a few such threads idle, every team in the
  process (the decode loop's among them) sleeps at its waits. ``install`` wraps every function so that its
  thread gives its workers back when the call (or a generator's step) returns (``server.openmp_workers``).
"""

from __future__ import annotations

import importlib.util
import sys
import types

import gradio as gr
from gradio import utils

from playground.server.openmp_workers import releasing


def _get_state_ids_to_track(self, block_fn, state):
    """``gr.Blocks.get_state_ids_to_track``, its scan of the app's events done once per event."""
    if state is None:
        return [], []
    tracked = vars(self).setdefault("pg_tracked_states", {})
    if block_fn._id not in tracked:
        changed = {target for fn in self.fns.values() for target in fn.targets if target[1] == "change"}
        tracked[block_fn._id] = [b._id for b in block_fn.outputs if b.stateful and (b._id, "change") in changed]
    ids = tracked[block_fn._id]
    return list(ids), [utils.deep_hash(state[i]) for i in ids]


def install(demo: gr.Blocks) -> None:
    """``demo`` (this app's Blocks, no other) tracks its events' stateful outputs from a list made once, and
    each of its event functions gives back its thread's OpenMP workers when it returns."""
    demo.get_state_ids_to_track = types.MethodType(_get_state_ids_to_track, demo)
    for block_fn in demo.fns.values():
        if block_fn.fn is not None and not getattr(block_fn.fn, "pg_releasing", False):
            block_fn.fn = releasing(block_fn.fn)
            block_fn.fn.pg_releasing = True  # type: ignore[attr-defined]
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]
