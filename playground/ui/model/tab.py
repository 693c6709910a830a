"""The Model tab's handlers: build or load a model from the form, and show where its parameters live.

The form always tells the truth about the model the session is using: after the page loads, a
build, or "Use the trained model", the weights choice, preset, config fields and precision are set
from the loaded model itself (``model_switch``).
"""

from __future__ import annotations

import time

import gradio as gr

from playground.server.catalog import count_parameters
from playground.server.files import discard_upload
from playground.server.recipes import recipe_key
from playground.settings import parse_whole
from playground.ui import redraw
from playground.ui.common import (
    choices,
    fail,
    lang_of,
    leased_model,
    new_state,
    ok,
    page_prefs,
    session_model,
    tr,
    tr_error,
    warn,
)
from playground.ui.model_switch import (
    FIELDS,
    FORM_FIELDS,
    FORM_PRESETS,
    VIEW_FIELDS,
    WEIGHT_KEYS,
    Switch,
    form_values,
    hub_choices,
    model_views,
    page_recipe,
    preset_choices,
    recipe_from_form,
    switch_model,
    table,
    took_model,
)
from playground.ui.model_words import describe_recipe, tree_table, tying_explanation
from playground.ui.results import only, result, skipped

from .kernels_box import kernels_table

PresetFields = result("PresetFields", *FIELDS, "tying_md")
# The page's first load: the session, the model's views, the kernels box, the form, the head examples.
Loaded = result("Loaded", "state", *VIEW_FIELDS, "kernels_md", *FORM_FIELDS, "head_box")
# After a change of the page's language: every text this tab built.
Relabelled = result(
    "Relabelled",
    "summary",
    "weights",
    "preset",
    "hub_name",
    "dtype",
    "tying_md",
    "breakdown_df",
    "treemap",
    "memory_plot",
    "tree_df",
    "kernels_md",
    "build_msg",
)


def preset_fields(name: str, state=None) -> PresetFields:
    """Fill the config form from a preset (and preview the tying explanation); "custom" keeps the form."""
    if name not in FORM_PRESETS:
        return skipped(PresetFields)
    cfg = FORM_PRESETS[name]
    return PresetFields(*(getattr(cfg, f) for f in FIELDS), tying_explanation(cfg, lang_of(state)))


def build_model(
    state, weights, seed, hub_name, upload, dtype, *fields, train_state=None, progress=gr.Progress(), request=None
):
    """Build or load the model the form describes; on any problem the previous model stays. The
    message is remembered for a language switch to say again (``redraw``)."""
    lang = lang_of(state)
    recipe = None
    try:
        recipe = recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=train_state, lang=lang)
        upload_path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        t0 = time.perf_counter()
        try:
            # the session's lease moves to this model, with the room for its first generation
            model = leased_model(recipe, state, progress=lambda frac, desc: progress(frac, desc=desc))
        except Exception:
            if weights == "upload":  # a refused upload is not kept on disk
                discard_upload(recipe["path"])
                discard_upload(upload_path)
            raise
        elapsed = time.perf_counter() - t0
    except Exception as e:  # the previous model and run stay as they were
        if recipe is None:  # a field the form cannot take: the form keeps it, for the user to fix
            redraw.remember(request, "model_build", lambda lang, present=False, e=e: fail(e, lang))
            return only(Switch, state=state, message=fail(e, lang))
        # The build itself failed (e.g. the hub while offline): the form goes back to the model that
        # is still loaded, and the message says which one that is.
        loaded = state["recipe"]

        def failed(lang, present=False, e=e):
            return fail(e, lang) + warn(tr(lang, "still_loaded", model=describe_recipe(loaded, lang)))

        redraw.remember(request, "model_build", failed)
        try:
            kept = session_model(state)
            # (and the tying text the form previewed for the refused config goes back to the kept model's)
            values = {**form_values(kept, loaded)._asdict(), "tying_md": tying_explanation(kept.cfg, lang)}
        except MemoryError:  # the budget is full even for the session's own model: the form stays as typed
            values = {}
        return only(Switch, state=state, message=failed(lang), **values)
    report = getattr(model, "load_report", None)

    def say(lang, present=False):
        extra = tr(lang, "loaded_weights", report=report.summary()) if report is not None else ""
        return ok(tr(lang, "ready", model=describe_recipe(recipe, lang), seconds=f"{elapsed:.2f}", extra=extra))

    redraw.remember(request, "model_build", say)
    return switch_model(model, recipe, say(lang), state, request)._replace(kernels_md=kernels_table(lang))


def build_from_form(
    request: gr.Request, state, train_state, weights, seed, hub_name, upload, dtype, *fields, progress=gr.Progress()
):
    """The Build button: the form plus the session's training state (for the "trained" weights)."""
    return build_model(
        state,
        weights,
        seed,
        hub_name,
        upload,
        dtype,
        *fields,
        train_state=train_state,
        progress=progress,
        request=request,
    )


def show_tree(state, depth):
    """The module tree to ``depth``; a depth that is not 1–10 is refused in the page's toast (the
    tree has no message box of its own), without a traceback in the log."""
    lang = lang_of(state)
    try:
        depth = parse_whole(depth, "Tree depth", 1, 10)
    except ValueError as e:
        raise gr.Error(tr_error(lang, e), print_exception=False) from None
    try:
        return table(tree_table(session_model(state), depth, lang), "tree_headers", lang)
    except Exception:
        return gr.skip()


def _depth_or_default(depth) -> int:
    """The tree depth a redraw uses: the slider's value when it is one, else the default 3."""
    try:
        return parse_whole(depth, "Tree depth", 1, 10)
    except ValueError:
        return 3


def load_session(state=None, request: gr.Request = None) -> Loaded:
    """Page load: a fresh session on the default model, with the form describing it, in the page's
    language (``?lang=`` in its address, else the browser's Accept-Language; English for the API)."""
    lang, present = page_prefs(request)
    state = {**new_state(lang), "present": present}
    model = session_model(state)
    recipe = state["recipe"]
    took_model(request, recipe)
    return Loaded(
        state=state,
        **model_views(model, recipe, lang=lang, present=present)._asdict(),
        kernels_md=kernels_table(lang),
        **form_values(model, recipe)._asdict(),
        head_box=gr.update(visible=recipe["kind"] == "bundled"),
    )


def relabel(request: gr.Request, state, depth) -> Relabelled:
    """After a change of the page's language: the model's views, the choices' labels, the kernels
    box and the last build's message, in the new language."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    with redraw.page_lock(request):  # (the model the page holds now: see model_switch.took_model)
        recipe = page_recipe(request, state)
        redraw.note(request, RELABELLED, recipe)
        views = model_views(leased_model(recipe, state), recipe, _depth_or_default(depth), lang, present)
    return Relabelled(
        summary=views.summary,
        weights=gr.update(choices=choices(WEIGHT_KEYS, lang)),
        preset=gr.update(choices=preset_choices(lang)),
        hub_name=gr.update(choices=hub_choices(lang)),
        dtype=gr.update(info=tr(lang, "dtype_info")),
        tying_md=views.tying_md,
        breakdown_df=table(views.breakdown_df, "breakdown_headers", lang, relabel=True),
        treemap=views.treemap,
        memory_plot=views.memory_plot,
        tree_df=table(views.tree_df, "tree_headers", lang, relabel=True),
        kernels_md=kernels_table(lang),
        build_msg=build_message(request, state),
    )


# The model a language redraw drew (``relabel``), for the check chained after its answer has landed.
RELABELLED = "relabelled_model"


def relabelled_again(request: gr.Request, state, depth) -> Relabelled:
    """Chained after ``relabel``'s answer has reached the page: the model's views drawn again when the page
    took another model since that redraw read which it held (a classroom follower's poll taking the
    teacher's), else nothing. The lock orders when the two read and note the page's model, not in which
    order their answers reach the page: the redraw's, of the old model, could land after the poll's."""
    return skipped(Relabelled) if _still_drawn(request, state, RELABELLED) else relabel(request, state, depth)


def _still_drawn(request, state, drawn_key: str) -> bool:
    """Whether the model the page holds is the one a redraw noted under ``drawn_key`` as drawn."""
    with redraw.page_lock(request):
        return recipe_key(page_recipe(request, state)) == recipe_key(redraw.noted(request, drawn_key) or {})


IN_USE = "in_use_model"


def in_use(request: gr.Request, state) -> str:
    """What the session has loaded, said first: the form below it is for building another."""
    with redraw.page_lock(request):  # (the model the page holds now: see model_switch.took_model)
        recipe = page_recipe(request, state)
        redraw.note(request, IN_USE, recipe)
        n = f"{count_parameters(leased_model(recipe, state)):,}"
    return tr(lang_of(state), "model_in_use", model=describe_recipe(recipe, lang_of(state)), n=n)


def in_use_again(request: gr.Request, state):
    """``relabelled_again`` for the line saying which model is in use."""
    return gr.skip() if _still_drawn(request, state, IN_USE) else in_use(request, state)


def build_message(request: gr.Request, state):
    """The last build's message in the page's new language."""
    return redraw.redraw(request, "model_build", lang_of(state), bool((state or {}).get("present")), 1)[0]
