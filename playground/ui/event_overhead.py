"""Two costs Gradio 6 pays on every event that this app pays once instead.

- ``Blocks.get_state_ids_to_track`` finds, for each stateful output of an event, whether any event of the
  app listens to its change, by scanning every event's triggers: with this app's six hundred events and a
  room poll's handful of ``gr.State`` outputs, about 1,300 comparisons a poll, sixty pages polling at once.
  The app's events are fixed once it is built (it renders nothing per session), so ``install`` finds the
  tracked outputs of each event once and keeps them; the hashes of their values are still taken each time.
- ``route_utils.call_process_api`` wraps every event in ``MatplotlibBackendMananger``, which imports
  matplotlib on entry and exit. Without matplotlib installed, each import searches ``sys.path`` again and
  fails. ``install`` records the module as absent (``sys.modules["matplotlib"] = None``, Python's own
  way of saying so) when it is not installed, so the import fails at once; installed, nothing changes.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import gradio as gr
from gradio import utils


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
    """``demo`` (this app's Blocks, no other) tracks its events' stateful outputs from a list made once."""
    demo.get_state_ids_to_track = types.MethodType(_get_state_ids_to_track, demo)
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]
