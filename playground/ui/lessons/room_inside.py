"""Following the teacher's Inside tab: the view it shows, its selection (layer, head, position), its figures.

After each Inside view the teacher's page draws (the lens as the tab opens or its cell is chosen, the
attribution, the attention maths, an intervention, and, once finished, the dose-response curve, the head
sweep and activation or path patching, drawn from the numbers the teacher's page measured: never
measured again), the view is drawn again on the server from the teacher's run in English and in 中文 and
published to the room (``ROOMS.publish_inside``): its figures as JSON, its text, the maths table's rows,
and the selection they were drawn for (layer, head, position, target). The dose-response curve, the
head sweep and patching are also published as they grow (``publish_streamed``, to the room the teacher's session
leads). A following student's page takes them on its next poll (``follow_inside``): the Inside tab and
its sub-tab open, the fields show the teacher's selection and the figures are the teacher's, sent as they
are: no follower's page runs the model for them. While it shows the teacher's view, opening the tab draws
nothing of the page's own over it (the Inside tab's ``room_followed``), and a change of the page's
language shows it in the new one (``redrawn``).
The views come to this module through the page (``page.inside.room_drawn``): no tab imports another.
"""

from __future__ import annotations

import logging

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
from gradio.components.plot import PlotData

from playground.server.room_checks import RoomError
from playground.server.rooms import ROOMS
from playground.ui import listeners
from playground.ui.common import client_address, fail, lang_of, session_run
from playground.ui.results import outputs, result

from . import room_lead
from .room_follow import Away, _away

log = logging.getLogger(__name__)

# Per view: the Inside sub-tab it is on, the fields of its selection (its inputs, by component name),
# the outputs the room sends (by component name, in the order the view returns them; None: not sent).
VIEWS = {
    "lens": ("inside-lens", ("lens_layer", "lens_pos"), ("lens_plot", "lens_note", None, "cell_plot", "cell_md")),
    "dla": ("inside-dla", ("dla_pos", "dla_target"), ("dla_heat", "dla_fall", "dla_md")),
    "maths": ("inside-maths", ("m_layer", "m_head", "m_pos"), ("m_table", "m_plot", "m_md")),
    "intervene": ("inside-intervene", (), ("i_bars", "i_loss", "i_lens", "i_md")),
    "dose": ("inside-intervene", ("i_scale", "i_pos", "i_target"), ("dose_plot",)),
    "sweep": ("inside-intervene", (), ("sweep_plot", "sweep_md")),
    "patch": (
        "inside-patching",
        ("pt_clean", "pt_corrupted", "pt_answer", "pt_wrong", "pt_target", "pt_layer")
        + ("pt_sender", "pt_receiver", "pt_via"),
        ("pt_exact", "pt_attr", "pt_md"),
    ),
}
# Per view, what the page forgets as it shows the teacher's: the patching result its own language switch
# would draw over the teacher's (the room's record is drawn in the new language instead)
CLEARED = {"patch": ("pt_shown",)}
NO_RUN = {"patch"}  # views drawn from their own prompts, not the run's
SHOWN = tuple(dict.fromkeys(n for _, fields, outs in VIEWS.values() for n in (*fields, *outs) if n))
SHOWN += tuple(n for names in CLEARED.values() for n in names)
# inside_msg: the tab's own message ("Generate first", from the page's own opening of the tab before the
# teacher's view came), cleared when the teacher's view is shown
Followed = result("InsideFollowed", "sub_tabs", "room_followed", "inside_msg", *SHOWN)


def plain(value):
    """A view's output as plain data for the room: a figure's JSON, a table's headers and rows, a text."""
    if isinstance(value, go.Figure):
        return {"figure": value.to_json()}
    if isinstance(value, pd.DataFrame):
        return {"headers": [str(c) for c in value.columns], "rows": value.astype(object).values.tolist()}
    if isinstance(value, str):
        return value
    return None  # (an update of a control the room does not follow)


def drawn_for_room(state, key: str, view, args, arg_names=()) -> dict | None:
    """View ``key`` drawn from ``args`` (the inputs named ``arg_names``) on the session's run in each
    language, as the room keeps it; None when the view has nothing finished to show (a long view stopped)."""
    return _record(state, key, dict(zip(arg_names, args)), lambda lang: view({**state, "lang": lang}, *args))


def _record(state, key: str, selection: dict, draw) -> dict | None:
    """View ``key`` as the room keeps it: its ``selection`` and ``draw(lang)`` (its outputs, None: nothing to
    show) in each language, on the session's run."""
    run = session_run(state)
    sub, names, shown = VIEWS[key]
    record = {"view": key, "sub": sub, "id": str(run.id) if run is not None else ""}
    record["selection"] = {name: selection.get(name) for name in names}
    for lang, field in (("en", "out"), ("zh-CN", "out_zh")):
        out = draw(lang)
        if out is None:
            return None
        record[field] = {name: plain(value) for name, value in zip(shown, out[: len(shown)]) if name is not None}
    return record


def publisher(key: str, view, arg_names=(), by_hand: bool = True):
    """The handler chained after Inside view ``key`` is drawn: the teacher's page publishes it; a
    student's page whose own hand drew it (``by_hand``: not the tab opened as it followed) stepped away."""

    def publish(state, room, *args) -> Away:
        room = room or {}
        if not room.get("key"):
            return _away(state, room) if by_hand else Away(gr.skip(), gr.skip(), gr.skip())
        try:
            if key not in NO_RUN and session_run(state) is None:
                return Away(gr.skip(), gr.skip(), gr.skip())  # (no run: nothing drawn to publish)
            record = drawn_for_room(state, key, view, args, arg_names)
            if record is None:
                return Away(gr.skip(), gr.skip(), gr.skip())
            ROOMS.publish_inside(room["code"], room["key"], record, client_address())
        except Exception as e:
            return Away(gr.skip(), fail(e, lang_of(state)), gr.skip())
        return Away(gr.skip(), gr.skip(), gr.skip())

    publish.__name__ = f"room_inside_{key}"
    return publish


def publish_streamed(state, key: str, draw, selection: dict) -> None:
    """A long view's partial figure (``listeners.streamed``), published to the room the session leads: its
    followers see the curve, the sweep or the patching grid grow, not only the finished figure. A room that ended (or a key
    no longer its teacher's) is forgotten; nothing here fails the teacher's view."""
    led = room_lead.led(state)
    if led is None or key not in VIEWS:
        return
    present = bool((state or {}).get("present"))
    try:
        record = _record(state, key, selection, lambda lang: draw(lang, present))
        ROOMS.publish_inside(led["code"], led["key"], record, client_address())
    except RoomError:
        room_lead.leading(state, None)
    except Exception:  # a figure that could not be drawn or sent: the finished one is published after the view
        log.exception("publishing a partial %s view", key)


def page_value(value):
    """What the room kept of an output, as the page's component takes it."""
    if isinstance(value, dict) and "figure" in value:
        return PlotData(type="plotly", plot=value["figure"])
    if isinstance(value, dict) and "rows" in value:
        return pd.DataFrame(value["rows"], columns=value["headers"])
    return value


def follow_inside(room: dict, published: dict, lang: str) -> tuple[dict, dict]:
    """(the page's room record, the outputs of ``Followed`` that change): the teacher's Inside view when it
    is new to the page, in the page's language; the page forgets it when the teacher leaves the tab."""
    inside = published.get("inside")
    if published.get("tab") != "inside" or not isinstance(inside, dict) or inside.get("view") not in VIEWS:
        return ({**room, "inside_version": None}, {"room_followed": None}) if room.get("inside_version") else (room, {})
    if inside.get("version") == room.get("inside_version"):
        return room, {}
    sub, _, names = VIEWS[inside["view"]]
    out: dict = {"sub_tabs": gr.Tabs(selected=sub), "room_followed": inside.get("version"), "inside_msg": ""}
    drawn = (lang == "zh-CN" and inside.get("out_zh")) or inside.get("out") or {}
    for name in names:
        if name is not None and name in drawn:
            out[name] = page_value(drawn[name])
    for name, value in (inside.get("selection") or {}).items():
        if name in SHOWN and value is not None:
            out[name] = value
    for name in CLEARED.get(inside["view"], ()):
        out[name] = None
    return {**room, "inside_version": inside.get("version")}, out


def redrawn(state, room) -> tuple:
    """After the page's language changed: a following student's page shows the teacher's Inside view in
    its new language (the room holds both; nothing is drawn again)."""
    room = room or {}
    skipped = tuple(gr.skip() for _ in Followed._fields)
    if not (room.get("member") and room.get("follow") and room.get("inside_version")):
        return skipped
    try:
        published = ROOMS.state(room["code"], client=client_address()).get("state") or {}
    except Exception:  # (an ended room: its next poll says so)
        return skipped
    _, out = follow_inside({**room, "inside_version": None}, published, lang_of(state))
    kept = {name: out[name] for name in SHOWN if name in out}
    return tuple(kept.get(name, gr.skip()) for name in Followed._fields)


def wire(page) -> None:
    """The teacher's publishing after each Inside view drawn (chained after the Inside tab's own events)."""
    c, state = page.lessons, page.state
    away = [c.room, c.room_status, c.room_follow]
    listeners.on_streamed(publish_streamed)
    followed = outputs(Followed, page.inside, page.inside.patching, inside_msg=page.inside.msg)
    listeners.on_change(page, redrawn, [c.room], followed)
    for key, event, inputs, view, names, by_hand in page.inside.room_drawn:
        handler = publisher(key, view, names, by_hand)
        event.then(handler, [state, c.room, *inputs], away, api_visibility="private", show_progress="hidden")
