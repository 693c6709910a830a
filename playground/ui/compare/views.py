"""HTML and figures of the Score & compare tab: surprisal and difference chips, streams, receipts.

HTML and figures of the Score & compare tab: surprisal chips, difference chips, two token streams
side by side, and the sampling receipt. Pure functions of library results (no gradio).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from playground.figures import format_prob
from playground.i18n import tr
from playground.server.scores import explain
from playground.server.tokens import gpt2_tokenizer

MAX_CHIPS = 2_000  # chips drawn per view; the figures and totals always cover the whole text

# Surprisal (bits) -> colour, dark enough for white text (>= 4.5:1) at every step.
SURPRISAL_STEPS = ((1, "#1e3a8a"), (3, "#1d4ed8"), (6, "#6d28d9"), (10, "#b45309"), (float("inf"), "#b91c1c"))
BETTER, WORSE, SAME = "#15803d", "#b91c1c", "#4b5563"


def surprisal_color(bits: float) -> str:
    return next(color for limit, color in SURPRISAL_STEPS if bits < limit)


def surprisal_legend(lang: str = "en") -> str:
    edges = ["< 1", "1–3", "3–6", "6–10", "≥ 10"]
    swatches = " · ".join(
        f"<span class='pg-swatch' style='background:{c}'></span> {e}" for e, (_, c) in zip(edges, SURPRISAL_STEPS)
    )
    return f"<div class='pg-legend'>{tr(lang, 'cmp_legend', swatches=swatches)}</div>"


def _swatch(color: str) -> str:
    return f"<span class='pg-swatch' style='background:{color}'></span>"


def _piece(i: int) -> str:
    return gpt2_tokenizer().piece(int(i)).display


def score_chips(scores, elem_class: str = "", lang: str = "en") -> str:
    """The text as chips coloured by surprisal; the first token (not scored) is grey."""
    ids = scores.token_ids
    n = min(len(ids), MAX_CHIPS)
    first = html.escape(tr(lang, "cmp_first_title", id=ids[0]), quote=True)
    parts = [f"<span class='pg-chip pg-prompt' title='{first}'>{html.escape(_piece(ids[0]))}</span>"]
    for t in range(1, n):
        k = t - 1
        bits = float(scores.surprisal_bits[k])
        title = tr(
            lang,
            "cmp_chip_title",
            t=t,
            id=ids[t],
            bits=f"{bits:.2f}",
            p=format_prob(float(scores.prob[k])),
            rank=f"{int(scores.rank[k]):,}",
            top=_piece(scores.top_id[k]),
            ctx=int(scores.context[k]),
        )
        parts.append(
            f"<span class='pg-chip' style='background:{surprisal_color(bits)}' data-pos='{t}' "
            f"data-bits='{bits:.4f}' title='{html.escape(title, quote=True)}'>{html.escape(_piece(ids[t]))}</span>"
        )
    more = (
        (
            f"<div class='pg-note'>{html.escape(tr(lang, 'cmp_more', shown=f'{MAX_CHIPS:,}', total=f'{len(ids):,}'))}"
            f"</div>"
        )
        if len(ids) > MAX_CHIPS
        else ""
    )
    figures = tr(lang, "cmp_head", loss=f"{scores.loss_nats:.3f}", bpb=f"{scores.bits_per_byte:.3f}")
    head = (
        f"<div class='pg-note'><b>{html.escape(scores.label)}</b> · {html.escape(figures)}</div>"
        if scores.label
        else ""
    )
    return f"{head}<div class='pg-chipbox pg-scorebox {elem_class}'>{''.join(parts)}</div>{more}"


def difference_chips(comparison, lang: str = "en") -> str:
    """Each token coloured by B's surprisal minus A's: green where B found it easier."""
    ids, d = comparison.a.token_ids, comparison.difference_bits
    n = min(len(ids), MAX_CHIPS)
    parts = [f"<span class='pg-chip pg-prompt'>{html.escape(_piece(ids[0]))}</span>"]
    for t in range(1, n):
        x = float(d[t - 1])
        color = BETTER if x <= -1 else WORSE if x >= 1 else SAME
        title = tr(
            lang,
            "cmp_diff_title",
            t=t,
            a=f"{comparison.a.surprisal_bits[t - 1]:.2f}",
            b=f"{comparison.b.surprisal_bits[t - 1]:.2f}",
            d=f"{x:+.2f}",
        )
        parts.append(
            f"<span class='pg-chip' style='background:{color}' data-pos='{t}' data-diff='{x:.4f}' "
            f"title='{html.escape(title, quote=True)}'>{html.escape(_piece(ids[t]))}</span>"
        )
    legend = (
        f"<div class='pg-legend'>{tr(lang, 'cmp_diff_legend', better=_swatch(BETTER), same=_swatch(SAME), worse=_swatch(WORSE))}"
        f"</div>"
    )
    return legend + f"<div class='pg-chipbox pg-diffbox'>{''.join(parts)}</div>"


def figures_table(*scores, lang: str = "en") -> str:
    """Markdown: loss, perplexity and bits per byte of one or two scorings."""
    rows = ["| " + " | ".join(tr(lang, "cmp_table_head").split("|")) + " |", "|---|---:|---:|---:|---:|---|"]
    for s in scores:
        windows = tr(lang, "cmp_windows", n=s.n_windows, w=s.window, s=s.stride)
        rows.append(
            f"| {s.label} | {s.n_scored:,} | {s.loss_nats:.3f} | {s.perplexity:,.1f} | {s.bits_per_byte:.3f} "
            f"| {windows} |"
        )
    notes = []
    s = scores[0]
    if s.truncated_from:
        notes.append(tr(lang, "cmp_truncated", total=f"{s.truncated_from:,}", n=f"{len(s.token_ids):,}"))
    if s.chars_read:
        notes.append(tr(lang, "cmp_chars_cut", n=f"{s.chars_read[0]:,}", total=f"{s.chars_read[1]:,}"))
    least = tr(lang, "cmp_and").join(f"{x.window - x.stride + 1} ({x.label.split(':')[0]})" for x in scores)
    notes.append(tr(lang, "cmp_context_note", least=least))
    return "\n".join(rows) + "\n\n" + " ".join(notes)


def surprisal_figure(*scores, smooth: int = 16, lang: str = "en") -> go.Figure:
    """Surprisal along the text (running mean over ``smooth`` tokens), one line per model."""
    fig = go.Figure()
    for s in scores:
        y = s.surprisal_bits
        k = max(1, min(smooth, len(y) // 4))  # a short text is drawn token by token
        mean = np.convolve(y, np.ones(k) / k, mode="valid")
        fig.add_trace(
            go.Scatter(
                x=np.arange(k, len(y) + 1), y=mean, mode="lines+markers" if k == 1 else "lines", name=f"{s.label}"
            )
        )
    k = max(1, min(smooth, len(scores[0].surprisal_bits) // 4))
    title = tr(lang, "cmp_fig_surprisal_mean", k=k) if k > 1 else tr(lang, "cmp_fig_surprisal")
    fig.update_layout(
        title=title,
        xaxis_title="position",
        yaxis_title="bits",
        height=380,
        margin=dict(l=50, r=20, t=70, b=110),
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        # below the axis: two long model names above the plot ran into the title
        legend=dict(orientation="h", y=-0.28, yanchor="top", x=0),
    )
    return fig


# ----------------------------------------------------------------------------------------------
# Two streams side by side


def first_divergence(a_ids, b_ids) -> int | None:
    """The first step where the two streams chose different tokens (None if they agree so far)."""
    for i, (x, y) in enumerate(zip(a_ids, b_ids)):
        if x != y:
            return i
    return None


def mean_surprisal(steps) -> float:
    """Mean of -log2 p(token) under each step's plain softmax: how surprising the chosen tokens were."""
    return float(np.mean([-np.log2(max(s.raw_prob, 1e-300)) for s in steps])) if steps else float("nan")


def stream_column(title: str, prompt_ids, steps, diverge: int | None, done: bool, lang: str = "en") -> str:
    tok = gpt2_tokenizer()
    chips = [f"<span class='pg-chip pg-prompt'>{html.escape(p.display)}</span>" for p in tok.pieces(prompt_ids[-40:])]
    for s in steps:
        mark = " pg-diverge" if diverge is not None and s.index == diverge else ""
        title_attr = tr(
            lang,
            "cmp_step_title",
            i=s.index,
            id=s.token_id,
            p=format_prob(s.prob),
            bits=f"{-np.log2(max(s.raw_prob, 1e-300)):.2f}",
        )
        chips.append(
            f"<span class='pg-chip{mark}' style='background:{surprisal_color(-np.log2(max(s.raw_prob, 1e-300)))}' "
            f"data-step='{s.index}' title='{html.escape(title_attr, quote=True)}'>"
            f"{html.escape(tok.piece(s.token_id).display)}</span>"
        )
    stats = tr(lang, "cmp_stream_stats", n=len(steps), bits=f"{mean_surprisal(steps):.2f}") + (
        "" if done else tr(lang, "cmp_running")
    )
    return (
        f"<div class='pg-stream'><div class='pg-stream-head'><b>{html.escape(title)}</b><br><small>"
        f"{html.escape(stats)}</small></div><div class='pg-chipbox'>{''.join(chips)}</div></div>"
    )


def side_by_side(titles, prompt_ids, steps_a, steps_b, done: bool, lang: str = "en") -> str:
    d = first_divergence([s.token_id for s in steps_a], [s.token_id for s in steps_b])
    if d is not None:
        head = tr(lang, "cmp_diverge", d=d) if d > 0 else tr(lang, "cmp_diverge_first")
    elif done:
        head = tr(lang, "cmp_identical_streams", n=min(len(steps_a), len(steps_b)))
    else:
        head = tr(lang, "cmp_so_far")
    cols = stream_column(titles[0], prompt_ids, steps_a, d, done, lang) + stream_column(
        titles[1], prompt_ids, steps_b, d, done, lang
    )
    return (
        f"<div class='pg-diverge-note' data-diverge='{'' if d is None else d}'>{html.escape(head)}</div>"
        f"<div class='pg-side'>{cols}</div>"
    )


# ----------------------------------------------------------------------------------------------
# The sampling receipt


def explain_text(r, piece, lang: str = "en") -> str:
    """``receipts.explain`` in the page's language (the library's English for "en")."""
    if lang == "en":
        return explain(r, piece=piece)
    if r.greedy:
        return tr(lang, "cmp_rc_greedy", step=r.step, tok=piece(r.token_id))
    lo, hi = r.chosen
    text = tr(lang, "cmp_rc_draw", step=r.step, u=f"{r.u:.6f}", tok=piece(r.token_id), lo=f"{lo:.6f}", hi=f"{hi:.6f}")
    if r.most_likely != r.token_id:
        ml = next(((a, b) for i, _, a, b in r.slices if i == r.most_likely), None)
        if ml is not None:
            text += tr(lang, "cmp_rc_wider", tok=piece(r.most_likely), lo=f"{ml[0]:.6f}", hi=f"{ml[1]:.6f}")
    else:
        text += tr(lang, "cmp_rc_same")
    return text


def receipt_html(r, explanation: str, lang: str = "en") -> str:
    """A bar of [0, 1) with the shown tokens' slices where they lie, u marked, and a table."""
    if r.greedy:
        return f"<div class='pg-receipt'><p>{html.escape(explanation)}</p></div>"
    segs = []
    for i, _p, lo, hi in r.slices:
        chosen = i == r.token_id
        color = "#b91c1c" if chosen else "#1d4ed8" if i == r.most_likely else "#6b7280"
        segs.append(
            f"<div class='pg-slice' title='{html.escape(_piece(i), quote=True)} [{lo:.4f}, {hi:.4f})' "
            f"style='left:{lo * 100:.4f}%;width:{max((hi - lo) * 100, 0.15):.4f}%;background:{color}'></div>"
        )
    bar = (
        f"<div class='pg-receipt-bar'>{''.join(segs)}<div class='pg-u' style='left:{r.u * 100:.4f}%' "
        f"title='u = {r.u:.6f}'></div></div><div class='pg-axis'><span>0</span><span>u = {r.u:.4f}</span>"
        f"<span>1</span></div>"
    )
    rows = "".join(
        f"<tr{' class=pg-chosen' if i == r.token_id else ''}><td>{html.escape(_piece(i))}</td><td>{i}</td>"
        f"<td>{format_prob(p)}</td><td>[{lo:.6f}, {hi:.6f})</td><td>{tr(lang, 'cmp_u_here') if i == r.token_id else ''}</td></tr>"
        for i, p, lo, hi in r.slices
    )
    head = "".join(f"<th>{html.escape(h)}</th>" for h in tr(lang, "cmp_receipt_head").split("|"))
    table = f"<table class='pg-receipt-table'><tr>{head}<th></th></tr>{rows}</table>"
    return f"<div class='pg-receipt'><p>{html.escape(explanation)}</p>{bar}{table}</div>"


CSS = """
.pg-side { display: flex; gap: 12px; flex-wrap: wrap; }
.pg-stream { flex: 1 1 320px; min-width: 280px; border: 1px solid #d1d5db; border-radius: 8px; padding: 6px; }
.pg-stream-head { margin-bottom: 4px; }
.pg-chip.pg-diverge { outline: 3px solid #f59e0b; outline-offset: 1px; }
.pg-diverge-note, .pg-legend, .pg-note { font-size: 14px; margin: 4px 0; }
.pg-scorebox, .pg-diffbox { max-height: 260px; }
.pg-receipt-bar { position: relative; height: 28px; background: #e5e7eb; border-radius: 4px; margin: 8px 0 2px; }
.pg-slice { position: absolute; top: 0; height: 100%; opacity: 0.9; border-right: 1px solid #fff; }
.pg-u { position: absolute; top: -4px; height: 36px; width: 3px; background: #f59e0b; }
.pg-axis { display: flex; justify-content: space-between; font-size: 12px; }
.pg-receipt-table td, .pg-receipt-table th { padding: 2px 8px; font-size: 14px; }
.pg-receipt-table tr.pg-chosen { font-weight: bold; }
"""
