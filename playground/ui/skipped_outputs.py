"""An event's skipped outputs (``gr.skip()``) sent as Gradio sends them, without rebuilding each component.

Gradio 6 postprocesses every output an event returns ``gr.skip()`` for as an update: it builds a new
instance of the output's component from its arguments and recomputes that component's config for the
session, about half a millisecond each on this project's machines, only to send ``{"__type__":
"update"}``, which changes nothing on the page. A classroom room's poll has over a hundred outputs and
skips nearly all of them: each follower's poll cost about 50 ms of server CPU, most of it there.
``install(demo)`` gives that one app (not Gradio's class) a ``postprocess_data`` that answers a
skipped output with what Gradio answers for it (``postprocess_update_dict`` of the empty update on the
session's component) and hands every other output, in order, to Gradio's own.

The same rebuild follows every update that carries a property (``gr.update(visible=False)``), even one that
sets it to what the page already shows: a room's poll sends the same visibility and choices with each
step, and those rebuilds were most of a student page's poll (docs/benchmarks.md). For the events named
with ``same_props_sent(dependency)``, an update whose properties (only those in ``SERVER_SET``) equal the
session's component's is answered as its value alone, or as a skip; one that does change them is answered
as Gradio answers it, with the rebuilt component and its config made once for every session that sets the
same properties (sixty pages following a teacher's run all hide the same plot and set the same slider range).
"""

from __future__ import annotations

import copy
import types
from collections import OrderedDict

import gradio as gr
from gradio import utils
from gradio.blocks import Block, convert_component_dict_to_list, postprocess_update_dict

SKIP = {"__type__": "update"}
# Properties an update may carry that the session's component records as the page shows them, unless a
# script of the page sets them too (the tabs' titles, the Compare tab's visibility): the outputs of the
# app's script-only events are never compared.
SERVER_SET = frozenset({"visible", "choices", "label", "info", "interactive", "maximum", "minimum", "step"})


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
    done: dict[int, object] = {}
    if block_fn._id in getattr(self, "pg_same_props", ()):
        kept_as_sent = _not_compared(self, block_fn)
        values = [
            value if i in kept_as_sent or _is_skip(value) else _unchanged(block, value, state)
            for i, (block, value) in enumerate(zip(outputs, values))
        ]
        for i, (block, value) in enumerate(zip(outputs, values)):
            if state is not None and not block.stateful and not _is_skip(value):
                if isinstance(value, Block) or utils.is_prop_update(value):
                    done[i] = _rebuilt(block, as_update(value), state, block_fn.postprocess)
    skipped = {i for i, (block, value) in enumerate(zip(outputs, values)) if not block.stateful and _is_skip(value)}
    if not skipped and not done:
        return await original(self, block_fn, values, state)
    kept = [i for i in range(len(outputs)) if i not in skipped and i not in done]
    if kept:
        rest = copy.copy(block_fn)
        rest.outputs = [outputs[i] for i in kept]
        given = [values[i] for i in kept] if len(kept) > 1 else values[kept[0]]
        done.update(zip(kept, await original(self, rest, given, state)))
    answered = []
    for i, block in enumerate(outputs):
        if i in done:
            answered.append(done[i])
        else:
            answered.append(_copied(_skip_answer(_in_session(block, state), block_fn.postprocess)))
    return answered


def _copied(value):
    """A skip's answer, its dicts and lists copied (what ``copy.deepcopy`` does for them, several times faster:
    a room's poll copies about a hundred)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


_SKIP_ANSWERS: dict[tuple[type, bool], dict] = {}


def _in_session(block, state):
    """The session's instance of ``block`` (the last one an update rebuilt), else ``block``."""
    return state.get(block._id, block) if state is not None else block


def _skip_answer(block, postprocess: bool) -> dict:
    """Gradio's answer for a skip of ``block``, which depends on its class only (an HTML's carries its
    props), made once per class: Gradio reads ``HTML.__init__``'s signature for each."""
    key = (type(block), bool(postprocess))
    if key not in _SKIP_ANSWERS:
        _SKIP_ANSWERS[key] = postprocess_update_dict(block=block, update_dict=dict(SKIP), postprocess=postprocess)
    return _SKIP_ANSWERS[key]


def _scripted(demo) -> frozenset:
    """The ids of the blocks a script of the page may update (outputs of events with no server function)."""
    if "pg_scripted" not in vars(demo):
        fns = demo.fns.values()
        demo.pg_scripted = frozenset(o._id for f in fns if f.fn is None for o in f.outputs)
    return demo.pg_scripted


# Components rebuilt by the room's polls, with their session config, by (block id, constructor arguments):
# sixty pages following one room rebuild the same components with the same arguments.
_REBUILT: OrderedDict[tuple, tuple[Block, dict]] = OrderedDict()
REBUILT_KEPT = 512


def _rebuilt(block, value: dict, state, postprocess: bool):
    """Gradio's answer to an update (``value``) that sets ``block``'s properties, as ``gr.Blocks.postprocess_data``
    gives it (the session's component rebuilt with them, its config recomputed), the component and its
    config made once for all sessions that set the same properties (Gradio shares one component
    between sessions until an update rebuilds it; only a config's ``props.value`` is written per session)."""
    value = utils.delete_none(dict(value), skip_value=True)
    kwargs = {**_in_session(block, state).constructor_args, **value}
    kwargs.pop("value", None)
    kwargs.pop("__type__")
    kwargs["render"] = False
    key = (block._id, repr(sorted(kwargs.items())))  # (the arguments as the config would show them)
    made = _REBUILT.get(key)
    if made is None:
        component = block.__class__(**kwargs)
        made = (component, state.blocks_config.config_for_block(block._id, [], component))
        _REBUILT[key] = made
        while len(_REBUILT) > REBUILT_KEPT:
            _REBUILT.popitem(last=False)
    else:
        _REBUILT.move_to_end(key)
    component, config = made
    state.blocks_config.blocks[block._id] = component
    state.config_values[block._id] = {**config, "props": dict(config.get("props", {}))}
    answer = postprocess_update_dict(block=component, update_dict=value, postprocess=postprocess)
    if "value" in answer:
        state._update_value_in_config(block._id, answer.get("value"))
    return answer


def _not_compared(demo, block_fn) -> frozenset:
    """The positions of ``block_fn``'s outputs sent as they are: the stateful ones and those a script updates."""
    kept = vars(demo).setdefault("pg_not_compared", {})
    if block_fn._id not in kept:
        scripted = _scripted(demo)
        kept[block_fn._id] = frozenset(
            i for i, block in enumerate(block_fn.outputs) if block.stateful or block._id in scripted
        )
    return kept[block_fn._id]


def as_update(value):
    """``value``, or the update a component given as a value stands for (its constructor's arguments)."""
    if isinstance(value, Block):
        return {**value.constructor_args, "__type__": "update"}
    return value


def _unchanged(block, value, state):
    """``value``, or (an update whose properties the session's ``block`` already has) its value alone, or a
    skip when it carries none."""
    value = as_update(value)
    if not utils.is_prop_update(value) or _is_skip(value):
        return value
    props = {k: v for k, v in utils.delete_none(dict(value), skip_value=True).items() if k not in ("__type__", "value")}
    shown = _in_session(block, state).constructor_args
    if not props or any(k not in SERVER_SET or k not in shown or shown[k] != v for k, v in props.items()):
        return value
    return value["value"] if "value" in value else dict(SKIP)


def install(demo: gr.Blocks) -> None:
    """``demo`` (this app's Blocks, no other) postprocesses skipped outputs without rebuilding them."""
    demo.postprocess_data = types.MethodType(postprocess_data, demo)


def same_props_sent(demo: gr.Blocks, dependency) -> None:
    """The event ``dependency`` (what ``.click`` and the like return) of ``demo`` (once installed) answers
    an update that sets its output's properties to what the page already shows as its value, or a skip."""
    vars(demo).setdefault("pg_same_props", set()).add(dependency["id"])
