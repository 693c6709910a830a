"""The Inside tab's Activation patching view: its components, its events, its figures.

Two prompts of the same token length (a suggested pair fills them), an answer and a wrong token, and
what to patch; the grid fills as it is measured (a message under the buttons says how far, Stop ends
it within one block), and the attribution-patching estimate is drawn beside it with their correlation.
The numbers come from ``playground.server.patching_views`` (also the ``/activation_patching`` and
``/path_patching`` endpoints); a language switch redraws the last drawn result.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import gradio as gr

from playground.figures import patching as pf
from playground.figures.style import empty_figure
from playground.server import patching_views as pv
from playground.server.inside_views import StopRequested
from playground.settings import parse_optional_whole
from playground.ui import listeners
from playground.ui.common import T, choices, dress, fail, for_the_session, lang_of, session_model, tr
from playground.ui.messages import Refusal
from playground.ui.results import only, outputs, result
from playground.ui.style import HIDE_EMPTY
from playground.ui.widgets import Dropdown, Number, Radio

from .data import parse_heads
from .live import ask_js, finished_view, keep_finished, stop, stop_flag, stop_js, stopped

TARGET_KEYS = {t: f"pt_t_{t}" for t in pv.TARGETS}
PAIR_KEYS = {p["name"]: f"pt_pair_{p['name']}" for p in pv.SUGGESTED_PAIRS}
MIN_UPDATE_S = 0.3  # partial grids a second at most ~3: each is a plotly redraw in the page
PatchView = result("PatchView", "pt_exact", "pt_attr", "pt_md", "pt_shown", "pt_msg")


def layout() -> SimpleNamespace:
    """The sub-tab's components (built inside its ``gr.Tab``)."""
    first = pv.SUGGESTED_PAIRS[0]
    gr.Markdown(T("pt_intro"))
    with gr.Row():
        pt_pair = Dropdown(choices(PAIR_KEYS), value=first["name"], label=T("pt_pair"), scale=1, min_width=260)
        # two lines: a prompt may hold a line break (the Romeo and Juliet pair does)
        pt_clean = gr.Textbox(first["clean"], label=T("pt_clean"), lines=2, max_length=pv.MAX_PROMPT_CHARS, scale=3)
        pt_corrupted = gr.Textbox(
            first["corrupted"],
            label=T("pt_corrupted"),
            lines=2,
            max_length=pv.MAX_PROMPT_CHARS,
            scale=3,
            elem_id="pg-patch-corrupted",
        )
    with gr.Row():
        pt_answer = gr.Textbox(first["answer"], label=T("pt_answer"), max_length=200)
        pt_wrong = gr.Textbox(first["wrong"], label=T("pt_wrong"), max_length=200)
        pt_target = Dropdown(
            choices(TARGET_KEYS), value="resid_pre", label=T("pt_target"), scale=2, elem_id="pg-patch-target"
        )
        pt_layer = Number(0, label=T("pt_layer"), precision=0, minimum=0)
    with gr.Row():
        pt_sender = gr.Textbox("0.2", label=T("pt_sender"), placeholder=T("ph_head"), max_length=20)
        pt_receiver = gr.Textbox("1.3", label=T("pt_receiver"), placeholder=T("ph_head"), max_length=20)
        pt_via = Radio(["q", "k", "v"], value="k", label=T("pt_input"))
        pt_btn = gr.Button(T("pt_run"), variant="primary", elem_id="pg-patch-btn")
        pt_stop = gr.Button(T("stop"), variant="stop", elem_id="pg-patch-stop")
    pt_msg = gr.HTML(elem_id="pg-patch-msg")
    pt_md = gr.Markdown(elem_id="pg-patch-md", elem_classes=HIDE_EMPTY)
    # side by side from ~1100 px; a 1024-px projector stacks them, each wide enough for its cells' text
    with gr.Row():
        pt_exact = gr.Plot(show_label=False, elem_id="pg-patch-exact", min_width=520)
        pt_attr = gr.Plot(show_label=False, elem_id="pg-patch-attr", min_width=520)
    pt_shown = gr.State(None)  # the last drawn result: a language switch draws it again
    pt_ask = gr.Textbox(visible=False)  # this press's name, for a Stop that arrives before it starts
    pt_api_out = gr.JSON(visible=False)
    pt_api_buttons = [gr.Button(visible=False) for _ in range(2)]
    return SimpleNamespace(**{k: v for k, v in locals().items() if k != "first"})


def wire(page, c) -> None:
    """The sub-tab's events; ``c`` holds its components."""
    state = page.state
    c.pt_pair.change(
        suggest, c.pt_pair, [c.pt_clean, c.pt_corrupted, c.pt_answer, c.pt_wrong], api_name="patching_pair"
    )
    inputs = [state, c.pt_clean, c.pt_corrupted, c.pt_answer, c.pt_wrong, c.pt_target, c.pt_layer]
    inputs += [c.pt_sender, c.pt_receiver, c.pt_via]
    run = c.pt_btn.click(
        patch_live,
        [*inputs, c.pt_ask],
        outputs(PatchView, c),
        js=ask_js(len(inputs)),
        api_visibility="private",
        concurrency_id="inside_sweep",  # like the head sweep: it keeps every core busy for seconds
        concurrency_limit=1,
        show_progress="hidden",
    )
    c.pt_stop.click(stop, [state, c.pt_ask], c.pt_msg, js=stop_js(1), api_visibility="private", queue=False)
    # (a room is shown the finished grid, drawn from the numbers the page's own patching measured)
    names = ("pt_clean", "pt_corrupted", "pt_answer", "pt_wrong", "pt_target", "pt_layer")
    names += ("pt_sender", "pt_receiver", "pt_via")
    page.inside.room_drawn.append(("patch", run, inputs[1:], finished_view("patch", draw), names, True))
    listeners.on_change(page, redraw, [c.pt_shown], outputs(PatchView, c))
    out, hidden = c.pt_api_out, iter(c.pt_api_buttons).__next__
    hidden().click(
        activation_patching_data,
        [state, c.pt_clean, c.pt_corrupted, c.pt_answer, c.pt_wrong, c.pt_target, c.pt_layer],
        out,
        api_name="activation_patching",
        concurrency_id="inside_sweep",
        concurrency_limit=1,
    )
    hidden().click(
        path_patching_data,
        [state, c.pt_clean, c.pt_corrupted, c.pt_answer, c.pt_wrong, c.pt_sender, c.pt_receiver, c.pt_via],
        out,
        api_name="path_patching",
        concurrency_id="inside_sweep",
        concurrency_limit=1,
    )


def suggest(name):
    pair = next((p for p in pv.SUGGESTED_PAIRS if p["name"] == name), pv.SUGGESTED_PAIRS[0])
    return pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"]


# ----------------------------------------------------------------------------------------------
# Data (API endpoints)


def _head(text, name: str):
    heads = parse_heads(text, name)
    if len(heads) != 1:
        raise pv.patching.PatchingError(
            "inside.patch_head_field", "{name}: write one head as layer.head (e.g. 0.2).", name=name
        )
    return heads[0]


def _steps(state, clean, corrupted, answer, wrong, target, layer, sender, receiver, via, stop=None):
    model = session_model(state)
    path = {}
    if target == "path":
        path = {"sender": _head(sender, "Sender head"), "receiver": _head(receiver, "Receiver head"), "via": via}
    layer = parse_optional_whole(layer, "Layer")
    return pv.patching_steps(model, clean, corrupted, answer, wrong, target, layer, stop=stop, **path)


@for_the_session
def activation_patching_data(state, clean, corrupted, answer, wrong, target="resid_pre", layer=0):
    """The whole grid as JSON: clean and corrupted logit differences, row and column labels, ``values``."""
    try:
        *_, last = _steps(state, clean, corrupted, answer, wrong, target, layer, None, None, "k")
        return last
    except Exception as e:
        return Refusal(e)


@for_the_session
def path_patching_data(state, clean, corrupted, answer, wrong, sender="0.2", receiver="1.3", via="k"):
    try:
        *_, last = _steps(state, clean, corrupted, answer, wrong, "path", None, sender, receiver, via)
        return last
    except Exception as e:
        return Refusal(e)


# ----------------------------------------------------------------------------------------------
# The view


def _progress(text: str) -> str:
    return f"<div class='pg-msg pg-progress'>⏳ {text}</div>"


@for_the_session
def patch_live(
    request: gr.Request, state, clean, corrupted, answer, wrong, target, layer, sender, receiver, via, ask=None
):
    """The Patch button: the grid fills as measured (outputs: exact, attribution, text, shown, message)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    sent_at = None
    d = None
    keep_finished(state, "patch", None)
    asked = dict(pt_clean=clean, pt_corrupted=corrupted, pt_answer=answer, pt_wrong=wrong, pt_target=target)
    asked.update(pt_layer=layer, pt_sender=sender, pt_receiver=receiver, pt_via=via)
    with stop_flag(request, ask) as flag:
        if flag.is_set():  # stopped before it started: nothing measured
            yield only(PatchView, pt_msg=stopped(state))
            return
        try:
            for d in _steps(state, clean, corrupted, answer, wrong, target, layer, sender, receiver, via, flag.is_set):
                final = "attribution" in d or (target == "path" and d["done"] >= d_total(d))
                if not final and sent_at is not None and time.perf_counter() - sent_at < MIN_UPDATE_S:
                    continue
                if not final:
                    text = tr(lang, "pt_progress", done=d["done"], total=d_total(d), s=f"{d['seconds']:.1f}")
                    yield PatchView(*draw(d, lang, present)[:3], gr.skip(), _progress(text))
                    sent_at = time.perf_counter()
                    listeners.streamed(state, "patch", lambda lang, present, d=d: draw(d, lang, present), asked)
        except StopRequested:  # the figures keep the last drawn update
            yield only(PatchView, pt_msg=stopped(state))
            return
        except Exception as e:
            yield only(PatchView, pt_msg=fail(e, lang))
            return
    if d is not None:
        keep_finished(state, "patch", d)
        yield PatchView(*draw(d, lang, present), d, "")


@for_the_session
def patched(state, clean, corrupted, answer, wrong, sender, receiver, via) -> PatchView:
    """A path patching drawn whole, in one go (a lesson's "Show me" opens the view on its pair)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    try:
        *_, d = _steps(state, clean, corrupted, answer, wrong, "path", None, sender, receiver, via)
    except Exception as e:
        return only(PatchView, pt_msg=fail(e, lang))
    return PatchView(*draw(d, lang, present), d, "")


def d_total(d: dict) -> int:
    """Cells (or receiver layers, for a path) in all."""
    return d.get("total") or len(d["rows"]) - d["sender"][0] - 1


def redraw(state, shown):
    if not shown:
        return only(PatchView)
    return PatchView(*draw(shown, lang_of(state), bool((state or {}).get("present"))), gr.skip(), gr.skip())


def draw(d: dict, lang: str, present: bool) -> tuple:
    """(exact figure, attribution figure, text) of a result."""
    target = d["target"]
    x_title = tr(lang, "pt_x_head" if d["column_kind"] == "head" else "pt_x_position")
    y_title = tr(lang, "pt_y_head" if target == "attn_head_pos" else "pt_y_layer")
    summary = tr(
        lang,
        "pt_summary",
        answer=d["answer"],
        wrong=d["wrong"],
        clean=f"{d['clean_logit_diff']:.3f}",
        corrupted=f"{d['corrupted_logit_diff']:.3f}",
        s=f"{d['seconds']:.1f}",
    )
    if target == "path":
        (sl, sh), (rl, rh), via = d["sender"], d["receiver"], d["input"]
        title = tr(lang, "pt_fig_path", l=sl, h=sh, via=via)
        exact = pf.patching_heatmap(
            d["values"], d["rows"], d["columns"], title=title, x_title=x_title, y_title=y_title, mark=(rl, rh)
        )
        bars = pf.input_bars(d["by_input"], title=tr(lang, "pt_fig_inputs", sl=sl, sh=sh, rl=rl, rh=rh))
        value = tr(lang, "pt_path_value", sl=sl, sh=sh, rl=rl, rh=rh, via=via, value=f"{d['value']:.3f}")
        return dress(exact, lang, present), dress(bars, lang, present), summary + "\n\n" + value
    name = tr(lang, TARGET_KEYS[target])
    if target == "attn_head_pos":
        name += f" (L{d['layer']})"
    attr = d.get("attribution")
    peak = pf._peak(d["values"], attr)
    exact = pf.patching_heatmap(
        d["values"], d["rows"], d["columns"], title=tr(lang, "pt_fig_exact", name=name), x_title=x_title,
        y_title=y_title, peak=peak,
    )  # fmt: skip
    if attr is None:
        note = tr(lang, "pt_agree_none") if "attribution" in d else ""
        return dress(exact, lang, present), empty_figure(), summary + ("\n\n" + note if note else "")
    fig = pf.patching_heatmap(
        attr, d["rows"], d["columns"], title=tr(lang, "pt_fig_attr"), x_title=x_title, y_title=y_title, peak=peak
    )
    r = d.get("correlation")
    agree = tr(lang, "pt_agree", r="—" if r is None else f"{r:.2f}")
    return dress(exact, lang, present), dress(fig, lang, present), summary + "\n\n" + agree
