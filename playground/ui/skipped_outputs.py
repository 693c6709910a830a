"""An event's skipped outputs (``gr.skip()``) sent as Gradio sends them, without rebuilding each component.

Gradio 6 postprocesses every output an event returns ``gr.skip()`` for as an update: it builds a new
instance of the output's component from its arguments and recomputes that component's config for the
session, about half a millisecond each on this project's machines, only to send ``{"__type__":
"update"}``, which changes nothing on the page. A classroom room's poll has over a hundred outputs and
skips nearly all of them: each follower's poll cost about 50 ms of server CPU, most of it there.
``install(demo)`` gives that one app (not Gradio's class) a ``postprocess_data`` that answers a
skipped output with what Gradio answers for it (``postprocess_update_dict`` of the empty update on the
session's component) and hands every other output, in order, to Gradio's own.
"""

from __future__ import annotations

import copy
import types

import gradio as gr
from gradio.blocks import convert_component_dict_to_list, postprocess_update_dict

SKIP = {"__type__": "update"}


def _is_skip(value) -> bool:
    return isinstance(value, dict) and value == SKIP


async def postprocess_data(self, block_fn, predictions, state):
    """``gr.Blocks.postprocess_data``, with the outputs that are bare skips answered without a rebuild."""
    original = gr.Blocks.postprocess_data
    outputs = list(block_fn.outputs)
    if len(outputs) < 2 or block_fn.batch or block_fn.is_validator_function:
        return await original(self, block_fn, predictions, state)
    values = predictions
    if _is_skip(values):
        values = [dict(SKIP) for _ in outputs]
    elif isinstance(values, dict) and values:
        values = convert_component_dict_to_list(outputs, values)
    if not isinstance(values, (list, tuple)) or len(values) != len(outputs):
        return await original(self, block_fn, predictions, state)  # (its own checks and messages)
    skipped = {i for i, (block, value) in enumerate(zip(outputs, values)) if not block.stateful and _is_skip(value)}
    if not skipped:
        return await original(self, block_fn, predictions, state)
    kept = [i for i in range(len(outputs)) if i not in skipped]
    done: dict[int, object] = {}
    if kept:
        rest = copy.copy(block_fn)
        rest.outputs = [outputs[i] for i in kept]
        given = [values[i] for i in kept] if len(kept) > 1 else values[kept[0]]
        done = dict(zip(kept, await original(self, rest, given, state)))
    answered = []
    for i, block in enumerate(outputs):
        if i in done:
            answered.append(done[i])
        else:
            shown = state.get(block._id, block) if state is not None else block
            answered.append(
                postprocess_update_dict(block=shown, update_dict=dict(SKIP), postprocess=block_fn.postprocess)
            )
    return answered


def install(demo: gr.Blocks) -> None:
    """``demo`` (this app's Blocks, no other) postprocesses skipped outputs without rebuilding them."""
    demo.postprocess_data = types.MethodType(postprocess_data, demo)
