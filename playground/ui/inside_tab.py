"""The Inside tab: logit lens, direct logit attribution, attention maths step by step, and
interventions, for the session's current run (prompt + generated tokens, its last context window).

Each view has a data function (``*_data``: plain numbers, also an API endpoint) and a view handler
that draws it. Positions are absolute (as in the Generate tab): a run longer than the context
shows its last window, and the lens heatmap shows as many positions as fit the page's width (at
most LENS_WINDOW, each cell wide enough for its text) at a time, scrolled by a slider (said on screen).
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pandas as pd

from playground.engine.tokenizer import load_tokenizer
from playground.figures import inside as lf
from playground.inside.interventions import Intervention

from . import inside_picks, redraw
from .cell_click import cols_js
from .common import T, dress, fail, lang_of, parse_number, say, tr, tr_error, warn
from .inside_data import (
    LENS_WINDOW,
    MIN_WINDOW,
    attribution_data,
    describe_intervention,
    dose_data,
    intervene_data,
    lens_cell_data,
    lens_data,
    maths_data,
    run_context,
    sweep_data,
)

# ----------------------------------------------------------------------------------------------
# Views (figures + messages)


def _lang(state) -> tuple[str, bool]:
    return lang_of(state), bool((state or {}).get("present"))


def _error(e, n: int, lang="en"):
    return (gr.skip(),) * n + (warn(say(lang, e)) if isinstance(e, dict) and e.get("error") else fail(e, lang),)


def _layer(name: str, lang) -> str:
    """'embeddings', 'after block 3' (lenses.layer_names) in the page's language."""
    if lang == "en":
        return name
    if name == "embeddings":
        return tr(lang, "in_embeddings")
    return tr(lang, "in_after_block", i=name.rsplit(" ", 1)[-1]) if name.startswith("after block ") else name


def lens_view(state, scroll, layer, position, shown=None):
    """(heatmap, window note, scroll slider, top-10 bars, cell text, message). ``shown``: how many
    positions fit the page's width (the page script measures it; at most LENS_WINDOW)."""
    lang, present = _lang(state)
    window = lens_window(shown)
    try:
        model, _, start, ids, labels = run_context(state)
    except Exception as e:
        return (gr.skip(),) * 5 + (fail(e, lang),)
    T, L1 = len(ids), model.cfg.n_layers + 1
    newest = max(0, T - window)
    first = newest if scroll in (None, "") else parse_whole_or(scroll, start + newest) - start
    first = max(0, min(first, newest))
    d = lens_data(state, start + first, start + min(T, first + window) - 1)
    if "error" in d:
        return _error(d, 5, lang)
    cols = range(first, min(T, first + window))
    cell_layer = L1 - 1 if layer in (None, "") else parse_whole_or(layer, L1 - 1)
    cell_layer = max(0, min(cell_layer, L1 - 1))
    cell_pos = (start + T - 1) if position in (None, "") else parse_whole_or(position, start + T - 1)
    cell_pos = max(start, min(cell_pos, start + T - 1))
    layers = [_layer(name, lang) for name in d["layers"]]
    fig = dress(
        lf.lens_heatmap(
            layers,
            [start + j for j in cols],
            [labels[j] for j in cols],
            d["top_token"],
            d["top_prob"],
            d["next_prob"],
            title=tr(lang, "in_fig_lens"),
            selected=(cell_layer, cell_pos) if cols[0] <= cell_pos - start <= cols[-1] else None,
            cell_font=lf.PRESENT_CELL_FONT if present else lf.CELL_FONT,
        ),
        lang,
        present,
    )
    if T > window:
        note = tr(lang, "in_window", a=start + first, b=start + cols[-1], lo=start, hi=start + T - 1)
    else:
        note = tr(lang, "in_window_all", n=T)
    if start:
        note += tr(lang, "in_cropped", n=T, lo=start)
    scroll_update = gr.update(
        minimum=start, maximum=max(start + 1, start + newest), value=start + first, visible=T > window
    )
    cell = lens_cell_data(state, cell_layer, cell_pos)
    if "error" in cell:
        return fig, note, scroll_update, gr.skip(), "", warn(say(lang, cell))
    bars = dress(
        lf.top_bars(
            [f"{t} ({i})" for i, t, _ in cell["top"]],
            [p for _, _, p in cell["top"]],
            title=tr(lang, "in_fig_cell", layer=layers[cell_layer], pos=cell_pos),
        ),
        lang,
        present,
    )
    text = tr(
        lang,
        "in_cell",
        layer=layers[cell_layer],
        pos=cell_pos,
        tok=labels[cell_pos - start],
        kl=f"{cell['kl_to_final_nats']:.3f}",
    )
    return fig, note, scroll_update, bars, text, ""


def lens_window(shown) -> int:
    """Positions the lens shows at once: as many as fit the page (``shown``), MIN_WINDOW–LENS_WINDOW."""
    return max(MIN_WINDOW, min(LENS_WINDOW, parse_whole_or(shown, LENS_WINDOW)))


def open_tab(state, seen_run, scroll, layer, position, shown=None):
    """Opening the tab draws the lens. For a run not seen before, every position field starts
    where it says something: the lens cell at the final layer × last position, attribution and
    interventions at the last position with a next token, the attention maths at the prompt's last
    token (its keys after it are masked). Outputs: the lens view's, then those fields, seen run."""
    try:
        model, run, start, ids, _ = run_context(state)
    except Exception as e:
        return (gr.skip(),) * 5 + (warn(tr_error(lang_of(state), e)),) + (gr.skip(),) * 6
    if run.id == seen_run:
        return lens_view(state, scroll, layer, position, shown) + (gr.skip(),) * 6
    T, L = len(ids), model.cfg.n_layers
    last, before_last = start + T - 1, start + max(0, T - 2)
    prompt_end = max(start, min(last, len(run.prompt_ids) - 1))
    return lens_view(state, None, L, last, shown) + (L, last, before_last, prompt_end, before_last, run.id)


def parse_whole_or(value, fallback: int) -> int:
    try:
        return int(parse_number(value, "value"))
    except ValueError:
        return fallback


def attribution_view(state, position, target):
    """(layer × head heatmap, waterfall, text, message)."""
    lang, present = _lang(state)
    d = attribution_data(state, position, target)
    if "error" in d:
        return _error(d, 3, lang)
    L = len(d["heads"])
    heat = dress(
        lf.attribution_heatmap(d["heads"], d["mlp"], title=tr(lang, "in_fig_dla", tok=d["target"], pos=d["position"])),
        lang,
        present,
    )
    names, values = ["tok_emb", "pos_emb"], [d["tok_emb"], d["pos_emb"]]
    for i in range(L):
        names += [f"L{i} attn", f"L{i} MLP"]
        values += [sum(d["heads"][i]) + d["attn_bias"][i], d["mlp"][i]]
    names.append("final_norm shift")
    values.append(d["final_norm_shift"])
    fall = dress(lf.attribution_waterfall(names, values, d["total"], title=tr(lang, "in_fig_waterfall")), lang, present)
    text = tr(
        lang,
        "in_dla",
        tok=d["target"],
        pos=d["position"],
        total=f"{d['total']:.4f}",
        logit=f"{d['model_logit']:.4f}",
        diff=f"{abs(d['total'] - d['model_logit']):.1e}",
        sigma=f"{d['final_norm_sigma']:.3f}",
        shift=f"{d['final_norm_shift']:+.3f}",
    )
    return heat, fall, text, ""


def _vec(values, n: int = 8, lang="en") -> str:
    shown = ", ".join(f"{v:+.3f}" for v in values[:n])
    return f"[{shown}{', …' if len(values) > n else ''}] " + tr(lang, "in_numbers", n=len(values))


def maths_view(state, layer, head, position):
    """(table, bars, text, message)."""
    lang, present = _lang(state)
    d = maths_data(state, layer, head, position)
    if "error" in d:
        return _error(d, 3, lang)
    start, labels, p = d["window_start"], d["tokens"], d["position"] - d["window_start"]
    rows = []
    for j in range(len(labels)):
        masked = d["masked"][j]
        rows.append(
            [
                start + j,
                labels[j],
                round(d["scores"][j], 4),
                round(d["scaled"][j], 4),
                tr(lang, "in_future") if masked is None else round(masked, 4),
                round(d["softmax"][j], 6),
            ]
        )
    fig = dress(
        lf.attention_steps_figure(
            [start + j for j in range(len(labels))],
            labels,
            d["masked"],
            d["softmax"],
            title=tr(lang, "in_fig_maths", layer=d["layer"], head=d["head"], pos=d["position"]),
        ),
        lang,
        present,
    )
    text = tr(
        lang,
        "in_maths",
        layer=d["layer"],
        head=d["head"],
        pos=d["position"],
        tok=labels[p],
        hd=d["head_dim"],
        sq=f"{d['sqrt_head_dim']:.3f}",
        q=_vec(d["q"], lang=lang),
        wv=_vec(d["weighted_v"], lang=lang),
        ctx=_vec(d["ctx"], lang=lang),
    )
    rows = pd.DataFrame(rows, columns=tr(lang, "in_maths_headers").split("|"))  # the headers in the page's language
    return rows, fig, text, ""


def intervene_view(
    state, zero_heads, mean_heads, scale_head, alpha, skip_mlps, unmasked, drop_pos, position, shown=None
):
    """(before/after bars, loss lines, lens after, text, message). The lens after shows the last
    ``shown`` positions (as many as fit the page, as the lens view; at most the API's LENS_WINDOW)."""
    lang, present = _lang(state)
    d = intervene_data(state, zero_heads, mean_heads, scale_head, alpha, skip_mlps, unmasked, drop_pos, position)
    if "error" in d:
        return _error(d, 4, lang)
    start, labels = d["window_start"], d["tokens"]
    T = len(labels)
    spec = Intervention.from_dict(d["intervention"])
    bars = dress(
        lf.before_after_bars(
            d["token_labels"], d["before"], d["after"], title=tr(lang, "in_fig_before_after", pos=d["position"])
        ),
        lang,
        present,
    )
    loss = dress(
        lf.loss_lines(
            list(range(start, start + T - 1)),
            labels[:-1],
            d["loss_before"],
            d["loss_after"],
            title=tr(lang, "in_fig_loss"),
        ),
        lang,
        present,
    )
    lens = d["lens_after"]
    tok = load_tokenizer()
    skip = max(0, T - (lens["first"] - start) - lens_window(shown))
    cols = range(lens["first"] - start + skip, T)
    lens_fig = dress(
        lf.lens_heatmap(
            [_layer(name, lang) for name in lens["layers"]],
            [start + j for j in cols],
            [labels[j] for j in cols],
            [[tok.piece(t).display for t in row[skip:]] for row in lens["top_id"]],
            [row[skip:] for row in lens["top_prob"]],
            [row[skip:] for row in lens["next_prob"]],
            title=tr(lang, "in_fig_lens_after", n=len(cols)),
            cell_font=lf.PRESENT_CELL_FONT if present else lf.CELL_FONT,
        ),
        lang,
        present,
    )
    what = describe_intervention(spec, lang)
    text = tr(
        lang,
        "in_compare",
        what=what[:1].upper() + what[1:],
        lb=f"{d['mean_loss_before']:.3f}",
        la=f"{d['mean_loss_after']:.3f}",
        d=f"{d['mean_loss_after'] - d['mean_loss_before']:+.3f}",
        pos=d["position"],
        tok=labels[d["position"] - start],
    )
    return bars, loss, lens_fig, text, ""


def dose_view(state, scale_head, position, target):
    lang, present = _lang(state)
    d = dose_data(state, scale_head, position, target)
    if "error" in d:
        return _error(d, 1, lang)
    fig = dress(
        lf.dose_curve(
            d["alphas"],
            d["logprob"],
            title=tr(lang, "in_dose", tok=d["target"], pos=d["position"], head=d["head"], layer=d["layer"]),
        ),
        lang,
        present,
    )
    return fig, ""


def sweep_view(state, progress=gr.Progress()):
    return draw_sweep(sweep_data(state, progress), *_lang(state))


def draw_sweep(d, lang, present):
    if "error" in d:
        return _error(d, 2, lang)
    delta = d["delta_loss"]
    layer, h = max(
        ((i, j) for i in range(len(delta)) for j in range(len(delta[0]))), key=lambda ij: delta[ij[0]][ij[1]]
    )
    text = tr(
        lang,
        "in_sweep",
        n=d["n_tokens"],
        base=f"{d['base_loss']:.3f}",
        s=f"{d['seconds']:.1f}",
        e=f"{d['estimate_s']:.1f}",
        h=h,
        l=layer,
        dl=f"{delta[layer][h]:+.3f}",
    )
    return dress(lf.sweep_heatmap(delta, title=tr(lang, "in_fig_sweep")), lang, present), text, ""


# ----------------------------------------------------------------------------------------------
# Drawn again in the page's new language: each view the page drew, for the run it drew it for


SUB_TABS = ("inside_lens", "inside_dla", "inside_maths", "inside_interventions")
VIEWS = {
    "dla": (attribution_view, 3),
    "maths": (maths_view, 3),
    "intervene": (intervene_view, 4),
    "dose": (dose_view, 1),
    "sweep": (None, 2),
}  # key -> (view, outputs before the message)


def remembering(key: str):
    """The view's event handler: draws it and remembers how to draw it again (same run, same fields;
    the sweep from its numbers, which take up to a minute to measure)."""
    view = VIEWS[key][0]

    def handler(request: gr.Request, state, *args):
        out = view(state, *args)
        note_drawn(request, key, state, *args)
        return out

    def sweep(request: gr.Request, state, progress=gr.Progress()):
        d = sweep_data(state, progress)
        redraw.remember(request, "inside_sweep", lambda lang, present: draw_sweep(d, lang, present))
        return draw_sweep(d, *_lang(state))

    return sweep if key == "sweep" else handler


def note_drawn(request, key: str, state, *args) -> None:
    """View ``key`` was just drawn from ``args`` (by its button or a click on another view's cell)."""
    view, frozen = VIEWS[key][0], dict(state or {})

    def draw(lang, present):
        out = view({**frozen, "lang": lang, "present": present}, *args)
        return out

    redraw.remember(request, "inside_" + key, draw)


def redraw_views(request: gr.Request, state, layer, position, shown=None):
    """After a language switch: the lens (for the current run, its newest positions), then every
    other view the page drew; the message is the one of the view drawn last. (The lens' scroll slider
    is not read: Gradio checks its value against the bounds it had when the page loaded.)"""
    lang, present = _lang(state)
    try:
        run_context(state)
        lens = lens_view(state, None, layer, position, shown)
    except Exception:
        lens = (gr.skip(),) * 6
    out, messages = list(lens[:-1]), {"lens": lens[-1]}
    for key, (_, n) in VIEWS.items():
        drawn = redraw.redraw(request, "inside_" + key, lang, present, n + 1)
        out += drawn[:-1]
        messages[key] = drawn[-1]
    last = redraw.order(request, ["inside_" + k for k in VIEWS])
    return tuple(out) + (messages[last[-1][7:]] if last else messages["lens"],)


# ----------------------------------------------------------------------------------------------
# Layout and wiring


def layout() -> SimpleNamespace:
    """The tab's components (built inside its ``gr.Tab``)."""
    gr.Markdown(T("inside_intro"))
    msg = gr.HTML(elem_id="pg-inside-msg")
    seen_run = gr.State(None)  # the run whose defaults the position fields hold
    with gr.Tabs():
        with gr.Tab(T("inside_lens"), id="inside-lens") as lens_tab:
            with gr.Row():
                lens_btn = gr.Button(T("inside_show_lens"), variant="primary", elem_id="pg-lens-btn")
                lens_layer = gr.Number(
                    None, label=T("inside_lens_layer"), precision=0, minimum=0, elem_id="pg-lens-layer"
                )
                lens_pos = gr.Number(None, label=T("inside_position"), precision=0, minimum=0, elem_id="pg-lens-pos")
            lens_note = gr.Markdown(elem_id="pg-lens-note")
            inside_picks.layout_hint("inside_click_lens")
            lens_scroll = gr.Slider(0, 1, value=0, step=1, label=T("inside_scroll"), visible=False)
            lens_plot = gr.Plot(show_label=False, elem_id="pg-lens")
            # positions that fit the page's width: the page script (cell_click) keeps it up to date
            lens_cols = gr.Number(
                LENS_WINDOW, precision=0, show_label=False, elem_id="pg-lens-cols", elem_classes=["pg-offscreen"]
            )
            lens_pick = gr.Button("pick", elem_id="pg-lens-pick", elem_classes=["pg-offscreen"])
            with gr.Row():
                cell_plot = gr.Plot(show_label=False, elem_id="pg-lens-cell")
                cell_md = gr.Markdown()
        with gr.Tab(T("inside_dla"), id="inside-dla") as dla_tab:
            with gr.Row():
                dla_pos = gr.Number(None, label=T("inside_position"), precision=0, minimum=0)
                dla_target = gr.Textbox("", label=T("inside_target"), max_length=200)
                dla_btn = gr.Button(T("inside_attribute"), variant="primary", elem_id="pg-dla-btn")
            dla_md = gr.Markdown(elem_id="pg-dla-md")
            inside_picks.layout_hint("inside_click_head")
            dla_shown = gr.State(None)  # the position and target the heatmap was drawn for
            dla_pick = gr.Button("pick", elem_id="pg-dla-pick", elem_classes=["pg-offscreen"])
            dla_note = gr.Markdown(elem_id="pg-dla-pick-md")
            with gr.Row():
                dla_heat = gr.Plot(show_label=False, elem_id="pg-dla-heat")
                dla_fall = gr.Plot(show_label=False, elem_id="pg-dla-fall")
        with gr.Tab(T("inside_maths"), id="inside-maths") as maths_tab:
            with gr.Row():
                m_layer = gr.Number(0, label=T("layer"), precision=0, minimum=0)
                m_head = gr.Number(0, label=T("head"), precision=0, minimum=0)
                m_pos = gr.Number(None, label=T("inside_query_position"), precision=0, minimum=0)
                m_btn = gr.Button(T("inside_step_through"), variant="primary", elem_id="pg-maths-btn")
            m_md = gr.Markdown(elem_id="pg-maths-md")
            with gr.Row():
                # before the first draw, the formula's symbols (the same in every language); a drawn
                # table carries its headers in the page's language
                m_table = gr.Dataframe(
                    headers=["j", "token", "q·kⱼ", "÷√d", "+ M", "softmax"],
                    interactive=False,
                    max_height=420,
                    elem_id="pg-maths-table",
                    min_width=560,
                )
                # (side by side from 1200 px; a 1024-px projector stacks them rather than cut the softmax column)
                m_plot = gr.Plot(show_label=False, elem_id="pg-maths-plot", min_width=420)
        with gr.Tab(T("inside_interventions"), id="inside-intervene") as intervene_tab:
            with gr.Row():
                i_zero = gr.Textbox("", label=T("inside_zero_heads"), placeholder="0.1, 2.3", max_length=2000)
                i_mean = gr.Textbox("", label=T("inside_mean_heads"), placeholder="1.0", max_length=2000)
                i_scale = gr.Textbox("", label=T("inside_scale_head"), placeholder="1.2", max_length=50)
                i_alpha = gr.Slider(0, 2, value=0.0, step=0.1, label=T("inside_alpha"))
            with gr.Row():
                i_mlps = gr.Textbox("", label=T("inside_skip_mlps"), placeholder="0, 3", max_length=500)
                i_unmask = gr.Textbox("", label=T("inside_unmask"), placeholder="0", max_length=500)
                i_drop = gr.Checkbox(False, label=T("inside_drop_pos"))
                i_pos = gr.Number(None, label=T("inside_position"), precision=0, minimum=0)
                i_target = gr.Textbox("", label=T("inside_target"), max_length=200)
            with gr.Row():
                i_btn = gr.Button(T("inside_run_intervention"), variant="primary", elem_id="pg-intervene-btn")
                dose_btn = gr.Button(T("inside_dose"), elem_id="pg-dose-btn")
                sweep_btn = gr.Button(T("inside_sweep"), elem_id="pg-sweep-btn")
            i_md = gr.Markdown(elem_id="pg-intervene-md")
            with gr.Row():
                i_bars = gr.Plot(show_label=False, elem_id="pg-intervene-bars")
                i_loss = gr.Plot(show_label=False, elem_id="pg-intervene-loss")
            i_lens = gr.Plot(show_label=False, elem_id="pg-intervene-lens")
            with gr.Row():
                dose_plot = gr.Plot(show_label=False, elem_id="pg-dose")
                with gr.Column():
                    sweep_md = gr.Markdown(elem_id="pg-sweep-md")
                    inside_picks.layout_hint("inside_click_sweep")
                    sweep_pick = gr.Button("pick", elem_id="pg-sweep-pick", elem_classes=["pg-offscreen"])
                    sweep_plot = gr.Plot(show_label=False, elem_id="pg-sweep")
    # API-only endpoints (plain numbers): their hidden buttons and output, and the lens window bounds
    api_out = gr.JSON(visible=False)
    api_first, api_last = gr.Number(None, visible=False), gr.Number(None, visible=False)
    api_buttons = [gr.Button(visible=False) for _ in range(7)]
    return SimpleNamespace(**{k: v for k, v in locals().items()})


def wire(page) -> None:
    """The tab's events; ``page.inside`` holds its components, ``page.state`` the session."""
    c, state = page.inside, page.state
    # ---- views ----
    lens_inputs = [state, c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols]
    lens_outputs = [c.lens_plot, c.lens_note, c.lens_scroll, c.cell_plot, c.cell_md, c.msg]
    fit = cols_js(4)  # the events read how many positions fit the page as they are sent
    c.lens_btn.click(lens_view, lens_inputs, lens_outputs, js=fit, api_visibility="private", concurrency_id="inside")
    for control in (c.lens_layer, c.lens_pos):
        control.submit(lens_view, lens_inputs, lens_outputs, js=fit, api_visibility="private", concurrency_id="inside")
    c.lens_scroll.release(
        lens_view,
        lens_inputs,
        lens_outputs,
        js=fit,
        api_visibility="private",
        concurrency_id="inside",
        trigger_mode="always_last",
    )
    page.inside_tab.select(
        open_tab,
        [state, c.seen_run, c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols],
        lens_outputs + [c.lens_layer, c.lens_pos, c.dla_pos, c.m_pos, c.i_pos, c.seen_run],
        js=cols_js(5),
        api_visibility="private",
        concurrency_id="inside",
    )
    c.dla_btn.click(
        remembering("dla"),
        [state, c.dla_pos, c.dla_target],
        [c.dla_heat, c.dla_fall, c.dla_md, c.msg],
        api_visibility="private",
        concurrency_id="inside",
    )
    c.m_btn.click(
        remembering("maths"),
        [state, c.m_layer, c.m_head, c.m_pos],
        [c.m_table, c.m_plot, c.m_md, c.msg],
        api_visibility="private",
        concurrency_id="inside",
    )
    i_inputs = [state, c.i_zero, c.i_mean, c.i_scale, c.i_alpha, c.i_mlps, c.i_unmask, c.i_drop, c.i_pos]
    c.i_btn.click(
        remembering("intervene"),
        i_inputs + [c.lens_cols],
        [c.i_bars, c.i_loss, c.i_lens, c.i_md, c.msg],
        js=cols_js(len(i_inputs)),
        api_visibility="private",
        concurrency_id="inside",
    )
    c.dose_btn.click(
        remembering("dose"),
        [state, c.i_scale, c.i_pos, c.i_target],
        [c.dose_plot, c.msg],
        api_visibility="private",
        concurrency_id="inside",
    )
    # One sweep at a time on this server: it keeps every core busy for up to a minute.
    c.sweep_btn.click(
        remembering("sweep"),
        state,
        [c.sweep_plot, c.sweep_md, c.msg],
        api_visibility="private",
        concurrency_id="inside_sweep",
        concurrency_limit=1,
    )
    # A language switch redraws the lens (when there is a run) and every other view drawn.
    from . import prefs  # (prefs imports the tab modules)

    # Plotly measures a figure when it is drawn: one drawn in a hidden tab is re-measured when shown.
    from .style import RESIZE_JS

    for tab in (c.lens_tab, c.dla_tab, c.maths_tab, c.intervene_tab):
        tab.select(None, None, None, js=RESIZE_JS)
    # (its own tabs' titles too: Gradio translated them once, when they were first drawn)
    prefs.on_change(
        page,
        lambda st: tuple(gr.update(label=tr(lang_of(st), key)) for key in SUB_TABS),
        [],
        [c.lens_tab, c.dla_tab, c.maths_tab, c.intervene_tab],
    )
    prefs.on_change(
        page,
        redraw_views,
        lens_inputs[2:],
        lens_outputs[:-1]
        + [
            c.dla_heat,
            c.dla_fall,
            c.dla_md,
            c.m_table,
            c.m_plot,
            c.m_md,
            c.i_bars,
            c.i_loss,
            c.i_lens,
            c.i_md,
            c.dose_plot,
            c.sweep_plot,
            c.sweep_md,
            c.msg,
        ],
    )

    inside_picks.wire(page)  # clicking a heatmap cell

    # ---- API: plain numbers ----
    out, hidden = c.api_out, iter(c.api_buttons).__next__
    hidden().click(lens_data, [state, c.api_first, c.api_last], out, api_name="logit_lens", concurrency_id="inside")
    hidden().click(
        lens_cell_data, [state, c.lens_layer, c.lens_pos], out, api_name="lens_cell", concurrency_id="inside"
    )
    hidden().click(
        attribution_data, [state, c.dla_pos, c.dla_target], out, api_name="logit_attribution", concurrency_id="inside"
    )
    hidden().click(
        maths_data, [state, c.m_layer, c.m_head, c.m_pos], out, api_name="attention_maths", concurrency_id="inside"
    )
    hidden().click(intervene_data, i_inputs, out, api_name="intervene", concurrency_id="inside")
    hidden().click(
        dose_data, [state, c.i_scale, c.i_pos, c.i_target], out, api_name="dose_response", concurrency_id="inside"
    )
    hidden().click(sweep_data, state, out, api_name="head_sweep", concurrency_id="inside_sweep", concurrency_limit=1)
