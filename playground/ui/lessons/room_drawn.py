"""What a following student's page is shown of the teacher's: the step on the teacher's model, and that model.

The teacher's page publishes its session's recipe with each move (``ROOMS.publish(..., recipe=)``). A
following student's page takes that model (``follow_model``): its session's recipe becomes the
teacher's, so the model cache hands every follower the one model it holds for it, and the Model tab's
form and views describe it (a student who steps away and builds another model has theirs until they
press Follow). The lesson step the room is on is drawn on the teacher's model once per language for
the whole room (``step``, through ``server.room_steps.DRAWN``), its figures turned into JSON once: each
follower is sent the same figures, not a forward pass of its own.
"""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go
from gradio.components.plot import PlotData

from playground.server.model_cache import CACHE
from playground.server.recipes import recipe_key
from playground.server.room_steps import DRAWN
from playground.ui.common import lang_of
from playground.ui.model_switch import FORM_FIELDS, VIEW_FIELDS, form_values, model_views
from playground.ui.results import result

from . import tab as lessons_tab

# The Model tab's views of the teacher's model (the layer/head sliders follow the teacher's run instead)
MODEL_VIEWS = tuple(f for f in VIEW_FIELDS if f not in ("layer", "head"))
Modelled = result("Modelled", "state", *MODEL_VIEWS, *FORM_FIELDS, "head_box")


def frozen(value):
    """A figure (or an update holding one) as the JSON Gradio sends: made once, sent to every follower."""
    if isinstance(value, go.Figure):
        return PlotData(type="plotly", plot=value.to_json())
    if isinstance(value, dict) and isinstance(value.get("value"), go.Figure):
        return {**value, "value": frozen(value["value"])}
    return value


def fresh(drawn):
    """A kept drawing's outputs for one page: its updates copied (Gradio takes their value out as it sends them)."""
    return type(drawn)(*(dict(v) if isinstance(v, dict) else v for v in drawn))


def teacher_model(published: dict):
    """The model the room's teacher uses, from the shared model cache (built there if it was let go)."""
    return CACHE.get(published["recipe"])


def step(code: str, published: dict, pos: dict, prompt, lang: str, present: bool) -> lessons_tab.Shown:
    """Step ``pos`` on the teacher's model and ``prompt``, drawn once for room ``code`` in ``lang``."""
    key = ("step", published.get("model_key"), pos.get("lesson"), pos.get("step", 0), prompt, lang, present)

    def draw() -> lessons_tab.Shown:
        shown = lessons_tab.show({"lang": lang, "present": present}, pos, prompt, model=teacher_model(published))
        return type(shown)(*(frozen(v) for v in shown))

    return fresh(DRAWN.get(code, key, draw))


def follow_model(code: str, published: dict, state: dict, room: dict) -> tuple[dict, dict]:
    """(the page's room record, the ``Modelled`` outputs that change, and the layer/head sliders' ranges):
    the teacher's model taken when it is new to this page; the Model tab's views of it drawn once for the room in each language."""
    key, recipe = published.get("model_key"), published.get("recipe")
    if not isinstance(recipe, dict) or not key or key == room.get("model_key"):
        return room, {}
    room = {**room, "model_key": key}
    if recipe_key((state or {}).get("recipe") or {}) == key:
        return room, {}  # the page's model already
    lang, present = lang_of(state), bool((state or {}).get("present"))

    def draw() -> tuple:
        model = teacher_model(published)
        views = model_views(model, recipe, lang=lang, present=present)
        return tuple(frozen(v) for v in views), tuple(form_values(model, recipe))

    views, form = DRAWN.get(code, ("model", key, lang, present), draw)
    # (with the Generate tab's layer and head sliders' ranges: a followed run sets them too, and wins)
    out = {name: dict(v) if isinstance(v, dict) else v for name, v in zip(VIEW_FIELDS, views)}
    out.update({name: dict(v) if isinstance(v, dict) else v for name, v in zip(FORM_FIELDS, form)})
    # the session's model is now the teacher's (its own run belonged to its own model)
    out["state"] = {**state, "recipe": recipe, "run_id": None}
    out["head_box"] = gr.update(visible=recipe.get("kind") == "bundled")
    return room, out
