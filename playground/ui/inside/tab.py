"""The Inside tab's views drawn from their numbers: lens, attribution, maths, interventions, sweep.

The Inside tab's views, drawn: logit lens, direct logit attribution, attention maths step by step,
and interventions, for the session's current run (prompt + generated tokens, its last context
window).

Each view has a data function (``*_data`` in inside_data: plain numbers, also an API endpoint) and a
view handler here that draws it; inside_layout builds the components and wires them, inside_redraw
remembers what a page drew and draws it again in a new language. Positions are absolute (as in the
Generate tab): a run longer than the context shows its last window, and the lens heatmap shows as
many positions as fit the page's width (at most LENS_WINDOW, each cell wide enough for its text) at
a time, scrolled by a slider (said on screen).
"""

from __future__ import annotations

import gradio as gr
import pandas as pd

from playground.figures import inside as lf
from playground.server.inside_views import Intervention
from playground.server.tokens import tokenizer_of
from playground.settings import parse_optional_whole
from playground.ui.common import dress, fail, for_the_session, lang_of, say, session_model, tr, warn
from playground.ui.results import only, result

from .data import (
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

# Each view's outputs (the Inside tab's components), its message last.
LensView = result("LensView", "lens_plot", "lens_note", "lens_scroll", "cell_plot", "cell_md", "msg")
DlaView = result("DlaView", "dla_heat", "dla_fall", "dla_md", "msg")
MathsView = result("MathsView", "m_table", "m_plot", "m_md", "msg")
InterveneView = result("InterveneView", "i_bars", "i_loss", "i_lens", "i_md", "msg")
DoseView = result("DoseView", "dose_plot", "msg")
SweepView = result("SweepView", "sweep_plot", "sweep_md", "msg")

# ----------------------------------------------------------------------------------------------
# Views (figures + messages)


def page_lang(state) -> tuple[str, bool]:
    """(the page's language, presenter mode) from the session state."""
    return lang_of(state), bool((state or {}).get("present"))


def _error(e, view, lang="en"):
    """A ``view`` (result type) that only says what went wrong."""
    return only(view, msg=warn(say(lang, e)) if isinstance(e, dict) and e.get("error") else fail(e, lang))


def _layer(name: str, lang) -> str:
    """'embeddings', 'after block 3' (lenses.layer_names) in the page's language."""
    if lang == "en":
        return name
    if name == "embeddings":
        return tr(lang, "in_embeddings")
    return tr(lang, "in_after_block", i=name.rsplit(" ", 1)[-1]) if name.startswith("after block ") else name


@for_the_session
def lens_view(state, scroll, layer, position, shown=None):
    """(heatmap, window note, scroll slider, top-10 bars, cell text, message). ``shown``: how many
    positions fit the page's width (the page script measures it; at most LENS_WINDOW)."""
    lang, present = page_lang(state)
    try:
        window = lens_window(shown)
        first = parse_optional_whole(scroll, "Scroll")
        cell_layer = parse_optional_whole(layer, "Lens layer")
        cell_pos = parse_optional_whole(position, "Position")
        model, _, start, ids, labels = run_context(state)
    except Exception as e:
        return only(LensView, msg=fail(e, lang))
    T, L1 = len(ids), model.cfg.n_layers + 1
    newest = max(0, T - window)
    first = newest if first is None else first - start
    first = max(0, min(first, newest))
    d = lens_data(state, start + first, start + min(T, first + window) - 1)
    if "error" in d:
        return _error(d, LensView, lang)
    cols = range(first, min(T, first + window))
    # (a typed layer or position beyond the run's is moved to its nearest cell)
    cell_layer = max(0, min(L1 - 1 if cell_layer is None else cell_layer, L1 - 1))
    cell_pos = max(start, min(start + T - 1 if cell_pos is None else cell_pos, start + T - 1))
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
        column="full",
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
        return LensView(fig, note, scroll_update, gr.skip(), "", warn(say(lang, cell)))
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
    return LensView(fig, note, scroll_update, bars, text, "")


def lens_window(shown) -> int:
    """Positions the lens shows at once: as many as fit the page (``shown``), MIN_WINDOW–LENS_WINDOW."""
    try:
        shown = parse_optional_whole(shown, "Positions shown")
    except ValueError:  # the page script's measurement, not a typed value: without one, the widest window
        shown = None
    return max(MIN_WINDOW, min(LENS_WINDOW, LENS_WINDOW if shown is None else shown))


@for_the_session
def attribution_view(state, position, target):
    """(layer × head heatmap, waterfall, text, message)."""
    lang, present = page_lang(state)
    d = attribution_data(state, position, target)
    if "error" in d:
        return _error(d, DlaView, lang)
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
    rms = d.get("final_norm") == "rmsnorm"
    if not rms:  # an RMSNorm has no shift: no bar for it
        names.append("final_norm shift")
        values.append(d["final_norm_shift"])
    fall = dress(lf.attribution_waterfall(names, values, d["total"], title=tr(lang, "in_fig_waterfall")), lang, present)
    text = tr(
        lang,
        "in_dla_rms" if rms else "in_dla",
        tok=d["target"],
        pos=d["position"],
        total=f"{d['total']:.4f}",
        logit=f"{d['model_logit']:.4f}",
        diff=f"{abs(d['total'] - d['model_logit']):.1e}",
        sigma=f"{d['final_norm_sigma']:.3f}",
        shift=f"{d['final_norm_shift']:+.3f}",
    )
    return DlaView(heat, fall, text, "")


def _vec(values, n: int = 8, lang="en") -> str:
    shown = ", ".join(f"{v:+.3f}" for v in values[:n])
    return f"[{shown}{', …' if len(values) > n else ''}] " + tr(lang, "in_numbers", n=len(values))


@for_the_session
def maths_view(state, layer, head, position):
    """(table, bars, text, message)."""
    lang, present = page_lang(state)
    d = maths_data(state, layer, head, position)
    if "error" in d:
        return _error(d, MathsView, lang)
    start, labels, p = d["window_start"], d["tokens"], d["position"] - d["window_start"]
    # Only the keys the query can see (0..p): the later ones are masked, said in one last row.
    rows = [
        [start + j, labels[j], round(d["scores"][j], 4), round(d["scaled"][j], 4), round(d["masked"][j], 4)]
        + [round(d["softmax"][j], 6)]
        for j in range(p + 1)
    ]
    if p + 1 < len(labels):
        later = tr(lang, "in_maths_later", a=start + p + 1, b=start + len(labels) - 1)
        rows.append([f"{start + p + 1}–{start + len(labels) - 1}", later, "", "", tr(lang, "in_future"), 0.0])
    fig = dress(
        lf.attention_steps_figure(
            [start + j for j in range(p + 1)],
            labels[: p + 1],
            d["masked"][: p + 1],
            d["softmax"][: p + 1],
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
    return MathsView(rows, fig, text, "")


@for_the_session
def intervene_view(
    state, zero_heads, mean_heads, scale_head, alpha, skip_mlps, unmasked, drop_pos, position, shown=None
):
    """(before/after bars, loss lines, lens after, text, message). The lens after shows the last
    ``shown`` positions (as many as fit the page, as the lens view; at most the API's LENS_WINDOW)."""
    lang, present = page_lang(state)
    d = intervene_data(state, zero_heads, mean_heads, scale_head, alpha, skip_mlps, unmasked, drop_pos, position)
    if "error" in d:
        return _error(d, InterveneView, lang)
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
    tok = tokenizer_of(session_model(state))
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
        column="full",
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
    return InterveneView(bars, loss, lens_fig, text, "")


@for_the_session
def dose_view(state, scale_head, position, target):
    lang, present = page_lang(state)
    d = dose_data(state, scale_head, position, target)
    if "error" in d:
        return _error(d, DoseView, lang)
    fig = dress(
        lf.dose_curve(
            d["alphas"],
            d["logprob"],
            title=tr(lang, "in_dose", tok=d["target"], pos=d["position"], head=d["head"], layer=d["layer"]),
        ),
        lang,
        present,
    )
    return DoseView(fig, "")


@for_the_session
def sweep_view(state, progress=gr.Progress()):
    return draw_sweep(sweep_data(state, progress), *page_lang(state))


def draw_sweep(d, lang, present):
    if "error" in d:
        return _error(d, SweepView, lang)
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
    return SweepView(dress(lf.sweep_heatmap(delta, title=tr(lang, "in_fig_sweep")), lang, present), text, "")
