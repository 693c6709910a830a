"""HTML and figures of the Score & compare tab: surprisal chips, difference chips, two token streams
side by side, and the sampling receipt. Pure functions of library results (no gradio)."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from ..figures import format_prob
from ..tokenizer import load_tokenizer

MAX_CHIPS = 2_000  # chips drawn per view; the figures and totals always cover the whole text

# Surprisal (bits) -> colour, dark enough for white text (>= 4.5:1) at every step.
SURPRISAL_STEPS = ((1, "#1e3a8a"), (3, "#1d4ed8"), (6, "#6d28d9"), (10, "#b45309"), (float("inf"), "#b91c1c"))
BETTER, WORSE, SAME = "#15803d", "#b91c1c", "#4b5563"


def surprisal_color(bits: float) -> str:
    return next(color for limit, color in SURPRISAL_STEPS if bits < limit)


def surprisal_legend() -> str:
    edges = ["< 1", "1–3", "3–6", "6–10", "≥ 10"]
    swatches = " · ".join(f"<span class='pg-swatch' style='background:{c}'></span> {e}"
                          for e, (_, c) in zip(edges, SURPRISAL_STEPS))
    return f"<div class='pg-legend'>Surprisal in bits: {swatches}. Hover a token for its probability, rank and the model's top guess.</div>"


def _piece(i: int) -> str:
    return load_tokenizer().piece(int(i)).display


def score_chips(scores, elem_class: str = "") -> str:
    """The text as chips coloured by surprisal; the first token (not scored) is grey."""
    ids = scores.token_ids
    n = min(len(ids), MAX_CHIPS)
    parts = [f"<span class='pg-chip pg-prompt' title='position 0 · id {ids[0]} · not scored (nothing before "
             f"it)'>{html.escape(_piece(ids[0]))}</span>"]
    for t in range(1, n):
        k = t - 1
        bits = float(scores.surprisal_bits[k])
        title = (f"position {t} · id {ids[t]} · {bits:.2f} bits · p {format_prob(float(scores.prob[k]))} · "
                 f"rank {int(scores.rank[k]):,} · top guess {_piece(scores.top_id[k])} · "
                 f"{int(scores.context[k])} tokens of context")
        parts.append(f"<span class='pg-chip' style='background:{surprisal_color(bits)}' data-pos='{t}' "
                     f"data-bits='{bits:.4f}' title='{html.escape(title, quote=True)}'>{html.escape(_piece(ids[t]))}</span>")
    more = (f"<div class='pg-note'>Chips for the first {MAX_CHIPS:,} of {len(ids):,} tokens; the figures cover "
            f"all of them.</div>") if len(ids) > MAX_CHIPS else ""
    head = (f"<div class='pg-note'><b>{html.escape(scores.label)}</b> · {scores.loss_nats:.3f} nats/token · "
            f"{scores.bits_per_byte:.3f} bits/byte</div>") if scores.label else ""
    return f"{head}<div class='pg-chipbox pg-scorebox {elem_class}'>{''.join(parts)}</div>{more}"


def difference_chips(comparison) -> str:
    """Each token coloured by B's surprisal minus A's: green where B found it easier."""
    ids, d = comparison.a.token_ids, comparison.difference_bits
    n = min(len(ids), MAX_CHIPS)
    parts = [f"<span class='pg-chip pg-prompt'>{html.escape(_piece(ids[0]))}</span>"]
    for t in range(1, n):
        x = float(d[t - 1])
        color = BETTER if x <= -1 else WORSE if x >= 1 else SAME
        title = (f"position {t} · A {comparison.a.surprisal_bits[t - 1]:.2f} bits · B "
                 f"{comparison.b.surprisal_bits[t - 1]:.2f} bits · B − A {x:+.2f} bits")
        parts.append(f"<span class='pg-chip' style='background:{color}' data-pos='{t}' data-diff='{x:.4f}' "
                     f"title='{html.escape(title, quote=True)}'>{html.escape(_piece(ids[t]))}</span>")
    legend = (f"<div class='pg-legend'>B − A: <span class='pg-swatch' style='background:{BETTER}'></span> B at least "
              f"1 bit less surprised (what B learned) · <span class='pg-swatch' style='background:{SAME}'></span> "
              f"within 1 bit · <span class='pg-swatch' style='background:{WORSE}'></span> B at least 1 bit more "
              f"surprised.</div>")
    return legend + f"<div class='pg-chipbox pg-diffbox'>{''.join(parts)}</div>"


def figures_table(*scores) -> str:
    """Markdown: loss, perplexity and bits per byte of one or two scorings."""
    rows = ["| model | tokens scored | loss (nats/token) | perplexity | bits per byte | windows (stride) |",
            "|---|---:|---:|---:|---:|---|"]
    for s in scores:
        rows.append(f"| {s.label} | {s.n_scored:,} | {s.loss_nats:.3f} | {s.perplexity:,.1f} | {s.bits_per_byte:.3f} "
                    f"| {s.n_windows} of {s.window} tokens (stride {s.stride}) |")
    notes = []
    s = scores[0]
    if s.truncated_from:
        notes.append(f"The text has {s.truncated_from:,} tokens; only the first {len(s.token_ids):,} were scored "
                     f"(the cap).")
    notes += s.notes
    least = " and ".join(f"{x.window - x.stride + 1} ({x.label.split(':')[0]})" for x in scores)
    notes.append(f"Each token is scored once, with at least {least} tokens of left context once past the first "
                 f"window; the first token has nothing before it and is not scored.")
    return "\n".join(rows) + "\n\n" + " ".join(notes)


def surprisal_figure(*scores, smooth: int = 16) -> go.Figure:
    """Surprisal along the text (running mean over ``smooth`` tokens), one line per model."""
    fig = go.Figure()
    for s in scores:
        y = s.surprisal_bits
        k = max(1, min(smooth, len(y) // 4))  # a short text is drawn token by token
        mean = np.convolve(y, np.ones(k) / k, mode="valid")
        fig.add_trace(go.Scatter(x=np.arange(k, len(y) + 1), y=mean, mode="lines+markers" if k == 1 else "lines",
                                 name=f"{s.label}"))
    k = max(1, min(smooth, len(scores[0].surprisal_bits) // 4))
    fig.update_layout(title="Surprisal along the text (bits" + (f", mean of {k} tokens)" if k > 1 else ")"), xaxis_title="position",
                      yaxis_title="bits", height=320, margin=dict(l=50, r=20, t=70, b=40),
                      paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0))
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


def stream_column(title: str, prompt_ids, steps, diverge: int | None, done: bool) -> str:
    tok = load_tokenizer()
    chips = [f"<span class='pg-chip pg-prompt'>{html.escape(p.display)}</span>" for p in tok.pieces(prompt_ids[-40:])]
    for s in steps:
        mark = " pg-diverge" if diverge is not None and s.index == diverge else ""
        title_attr = (f"step {s.index} · id {s.token_id} · p {format_prob(s.prob)} · "
                      f"{-np.log2(max(s.raw_prob, 1e-300)):.2f} bits")
        chips.append(f"<span class='pg-chip{mark}' style='background:{surprisal_color(-np.log2(max(s.raw_prob, 1e-300)))}' "
                     f"data-step='{s.index}' title='{html.escape(title_attr, quote=True)}'>"
                     f"{html.escape(tok.piece(s.token_id).display)}</span>")
    stats = f"{len(steps)} tokens · mean surprisal {mean_surprisal(steps):.2f} bits" + ("" if done else " · running…")
    return (f"<div class='pg-stream'><div class='pg-stream-head'><b>{html.escape(title)}</b><br><small>"
            f"{html.escape(stats)}</small></div><div class='pg-chipbox'>{''.join(chips)}</div></div>")


def side_by_side(titles, prompt_ids, steps_a, steps_b, done: bool) -> str:
    d = first_divergence([s.token_id for s in steps_a], [s.token_id for s in steps_b])
    if d is not None:
        head = f"The streams diverge at step {d} (outlined): everything before it is the same text."
    elif done:
        head = f"The two streams are identical for all {min(len(steps_a), len(steps_b))} steps."
    else:
        head = "Identical so far…"
    cols = (stream_column(titles[0], prompt_ids, steps_a, d, done) + stream_column(titles[1], prompt_ids, steps_b, d, done))
    return (f"<div class='pg-diverge-note' data-diverge='{'' if d is None else d}'>{html.escape(head)}</div>"
            f"<div class='pg-side'>{cols}</div>")


# ----------------------------------------------------------------------------------------------
# The sampling receipt


def receipt_html(r, explanation: str) -> str:
    """A bar of [0, 1) with the shown tokens' slices where they lie, u marked, and a table."""
    if r.greedy:
        return f"<div class='pg-receipt'><p>{html.escape(explanation)}</p></div>"
    segs = []
    for i, p, lo, hi in r.slices:
        chosen = i == r.token_id
        color = "#b91c1c" if chosen else "#1d4ed8" if i == r.most_likely else "#6b7280"
        segs.append(f"<div class='pg-slice' title='{html.escape(_piece(i), quote=True)} [{lo:.4f}, {hi:.4f})' "
                    f"style='left:{lo * 100:.4f}%;width:{max((hi - lo) * 100, 0.15):.4f}%;background:{color}'></div>")
    bar = (f"<div class='pg-receipt-bar'>{''.join(segs)}<div class='pg-u' style='left:{r.u * 100:.4f}%' "
           f"title='u = {r.u:.6f}'></div></div><div class='pg-axis'><span>0</span><span>u = {r.u:.4f}</span>"
           f"<span>1</span></div>")
    rows = "".join(
        f"<tr{' class=pg-chosen' if i == r.token_id else ''}><td>{html.escape(_piece(i))}</td><td>{i}</td>"
        f"<td>{format_prob(p)}</td><td>[{lo:.6f}, {hi:.6f})</td><td>{'← u is here' if i == r.token_id else ''}</td></tr>"
        for i, p, lo, hi in r.slices)
    table = (f"<table class='pg-receipt-table'><tr><th>token</th><th>id</th><th>p after filters</th>"
             f"<th>slice of [0, 1)</th><th></th></tr>{rows}</table>")
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
