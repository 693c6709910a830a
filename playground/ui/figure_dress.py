"""The last touch on every figure: its words in the page's language, presenter-size type.

The last touch on every figure the page shows: its words in the page's language and, in
presenter mode, type large enough for the back of a room and a height that fits a projector.

Figure builders (``playground.figures``) take their titles from the caller and are language-free
otherwise, except for a few fixed words (axis titles, subplot titles, legend names, notes); those
are translated here, so the plotting code stays plain.
"""

from __future__ import annotations

import re
from functools import lru_cache

from playground.figures import empty_figure
from playground.figures.inside import waterfall_range
from playground.i18n import normalize_lang

# Fixed words the figure builders write, and their Chinese.
WORDS_ZH = {
    "key position (looked at)": "键位置（被关注的）",
    "query position (looking)": "查询位置（发出关注的）",
    "key position": "键位置",
    "attention": "注意力",
    "attention<br>(log)": "注意力<br>(对数)",
    "head": "头",
    "layer": "层",
    "probability": "概率",
    "parameters": "参数",
    "step": "步",
    "loss (cross-entropy, nats)": "损失（交叉熵，奈特）",
    "train": "训练",
    "validation": "验证",
    "raw softmax": "原始 softmax",
    "after temperature": "温度之后",
    "after top-k": "top-k 之后",
    "after top-p": "top-p 之后",
    "removed": "已移除",
    "previous-token": "前一个 token",
    "first-token": "首个 token",
    "entropy": "熵",
    "entropy (bits)": "熵（比特）",
    "formula": "公式",
    "measured": "实测",
    # lens_figures (Inside tab)
    "position (token)": "位置（token）",
    "final logit": "最终 logit",
    "q·k / √d_head (masked: −∞, not drawn)": "q·k / √d_head（被掩码的为 −∞，不画出）",
    "before": "干预前",
    "after": "干预后",
    "position (predicting the next token)": "位置（预测下一个 token）",
    "loss (nats)": "损失（奈特）",
    "α (the head's output × α)": "α（该头的输出 × α）",
    "position": "位置",
    "bits": "比特",
    "log p(target)": "log p(目标 token)",
}
PATTERNS_ZH = [
    (re.compile(r"^head (\d+)$"), r"头 \1"),
    (re.compile(r"^head (\d+) · KV (\d+)$"), r"头 \1 · KV \2"),
    (
        re.compile(r"^showing positions (\d+)–(\d+) of (\d+) \(earlier keys cut\)$"),
        r"显示位置 \1–\2（共 \3 个，更早的键已略去）",
    ),
    (re.compile(r"^(\d[\d,]*) parameters$"), r"\1 个参数"),
    (re.compile(r"^where “(.*)” looked$"), r"“\1”关注了哪里"),
]

# Tick labels the figure builders write (layer and head names, the attribution's bars). Only labels
# with a space inside are matched: a token's label never has one (its own space is shown as ␣), so a
# token that happens to read "layer" is never translated.
TICKS_ZH = [
    (re.compile(r"^layer (\d+)$"), r"第 \1 层"),
    (re.compile(r"^head (\d+)$"), r"头 \1"),
    (re.compile(r"^L(\d+) attn$"), r"L\1 注意力"),
    (re.compile(r"^final_norm shift$"), "final_norm 偏移"),
    (re.compile(r"^final logit$"), "最终 logit"),
]


def tick(text):
    for pattern, replacement in TICKS_ZH:
        if isinstance(text, str) and pattern.match(text):
            return pattern.sub(replacement, text)
    return text


PRESENT_FONT = 16  # px: axis labels and tick labels readable from the back of a room
PRESENT_MIN_FONT = 14  # px: no text of a figure is smaller in presenter mode (a cell's text included)
PRESENT_TITLE_FONT = 20
PRESENT_MAX_HEIGHT = 560  # a 720-pixel-high projector shows the whole figure under the controls


def words(text, lang: str) -> str:
    """One fixed text of a figure in ``lang`` (a title's parts are joined by " · ")."""
    if text is None or normalize_lang(lang) != "zh-CN":
        return text
    parts = []
    for part in str(text).split(" · "):
        translated = WORDS_ZH.get(part)
        if translated is None:
            translated = part
            for pattern, replacement in PATTERNS_ZH:
                if pattern.match(part):
                    translated = pattern.sub(replacement, part)
                    break
        parts.append(translated)
    return " · ".join(parts)


# Title columns (Latin letters; see text_columns) a figure's column holds on a 1024-px page: (normal, presenter).
TITLE_COLUMNS = {"full": (96, 72), "half": (48, 36), "third": (36, 32)}


def dress(fig, lang: str = "en", present: bool = False, column: str = "half"):
    """``fig`` with its fixed words translated and, in presenter mode, larger type (in place; returned).
    ``column``: how wide the page's column for it is ("full", "half", "third"), which its title is wrapped to."""
    if fig is None:
        return fig
    if normalize_lang(lang) == "zh-CN":
        _translate(fig, lang)
    if present:
        _enlarge(fig)
    if len(list(fig.select_xaxes())) > 2:  # side-by-side panels: a few value ticks each
        fig.update_xaxes(nticks=4)
    _wrap_title(fig, TITLE_COLUMNS[column][present])
    return fig


@lru_cache(maxsize=64)
def empty(message: str, lang: str = "en", present: bool = False):
    """``dress(empty_figure(message), lang, present)``, made once for every page that shows it: each page
    opening shows a few of them, and plotly takes longer to build one than to send it. Shared, so never
    changed: Gradio only reads the figures it is given."""
    return dress(empty_figure(message), lang, present)


def _translate(fig, lang):
    layout = fig.layout
    if layout.title and layout.title.text:
        layout.title.text = words(layout.title.text, lang)
    for axis in list(fig.select_xaxes()) + list(fig.select_yaxes()):
        if axis.title and axis.title.text:
            axis.title.text = words(axis.title.text, lang)
        if axis.ticktext:
            axis.ticktext = [tick(t) for t in axis.ticktext]
    for colour_axis in fig.select_coloraxes():
        bar = colour_axis.colorbar
        if bar and bar.title and bar.title.text:
            bar.title.text = words(bar.title.text, lang)
    for annotation in layout.annotations or ():
        if annotation.text:
            annotation.text = words(annotation.text, lang)
    for trace in fig.data:
        if trace.type == "waterfall" and trace.x is not None:  # its bars are named on the x axis
            trace.x = [tick(x) for x in trace.x]
        if getattr(trace, "name", None):
            trace.name = words(trace.name, lang)
        text = getattr(trace, "text", None)
        if text is not None and not isinstance(text, str) and len(text) and all(t == "removed" for t in text):
            trace.text = [WORDS_ZH["removed"]] * len(text)
        bar = getattr(getattr(trace, "marker", None), "colorbar", None) or getattr(trace, "colorbar", None)
        if bar is not None and bar.title and bar.title.text:
            bar.title.text = words(bar.title.text, lang)


def _enlarge(fig):
    fig.update_layout(font_size=PRESENT_FONT, title_font_size=PRESENT_TITLE_FONT)
    fig.update_xaxes(tickfont_size=PRESENT_FONT, title_font_size=PRESENT_FONT)
    fig.update_yaxes(tickfont_size=PRESENT_FONT, title_font_size=PRESENT_FONT)
    for annotation in fig.layout.annotations or ():
        annotation.font.size = PRESENT_FONT
    # Text plotly fits into a bar or a treemap tile is hidden where it would shrink below the minimum
    # (the hover still names it), instead of shrinking to a few pixels.
    fig.update_layout(uniformtext=dict(minsize=PRESENT_MIN_FONT, mode="hide"))
    for trace in fig.data:
        font = getattr(trace, "textfont", None)
        if font is not None and isinstance(font.size, (int, float)) and font.size < PRESENT_MIN_FONT:
            font.size = PRESENT_MIN_FONT
        if trace.type == "waterfall" and trace.text is not None:
            # Plotly shrinks a value label to its bar's width; many bars at presenter size leave it
            # unreadable, so the labels stand upright along the bars at full size instead.
            trace.textfont.size = PRESENT_FONT
            trace.constraintext = "none"
            trace.cliponaxis = False
            trace.textangle = -90 if len(trace.x or ()) > 8 else 0
            fig.update_yaxes(range=waterfall_range(trace, 0.35 if trace.textangle else 0.15))
    if fig.layout.height and fig.layout.height > PRESENT_MAX_HEIGHT:
        fig.layout.height = PRESENT_MAX_HEIGHT
    height = fig.layout.height or 450
    for axis in fig.select_xaxes():
        _thin_ticks(axis, PRESENT_PLOT_WIDTH, across=abs(axis.tickangle or 0) >= 45)
    for axis in fig.select_yaxes():
        _thin_ticks(axis, height - 150, across=True)


PRESENT_PLOT_WIDTH = 420  # px: the narrowest plot area a figure gets on a 1024-px page (half of it)


def _thin_ticks(axis, length: int, across: bool, font: float = PRESENT_FONT) -> None:
    """Token labels at presenter size would overlap: keep every k-th (anchored on the newest).

    ``length`` is the figure's plot length along the axis; a panel of a grid has its domain's share
    of it. Labels stacked across the axis (y, or upright x labels) need a line each; labels along it
    need their own width."""
    vals, text = axis.tickvals, axis.ticktext
    if vals is None or text is None or len(vals) < 2:
        return
    domain = axis.domain or (0, 1)
    span = max(0.05, float(domain[1]) - float(domain[0])) * length
    pitch = font + 4 if across else 0.6 * font * max(len(str(t)) for t in text) + 8
    room = max(1, int(span / pitch))
    step = -(-len(vals) // room)
    if step > 1:
        keep = list(range(len(vals) - 1, -1, -step))[::-1]
        axis.tickvals = [vals[i] for i in keep]
        axis.ticktext = [text[i] for i in keep]


# Where a title may break: (separator, how many of its characters the line before keeps).
WRAP_SEPARATORS = ((" · ", 0), (": ", 1), ("：", 1), ("，", 1), (" ", 0))


def _last(title: str, sep: str, end: int) -> int:
    """Where ``sep`` last begins and ends by ``end`` (-1: nowhere); a space is not the one inside " · "."""
    cut = title.rfind(sep, 0, end)
    while sep == " " and cut > 0 and title[cut - 1] == "·":
        cut = title.rfind(sep, 0, cut)
    return cut


def _wrap_title(fig, width: int) -> None:
    """A long title on as many lines as it needs (a narrow figure would cut it), each line ending at a separator."""
    title = fig.layout.title.text if fig.layout.title else None
    if not title or "<br>" in title:
        return
    lines = []
    while text_columns(title) > width:
        limit = next(i for i in range(len(title) + 1) if text_columns(title[: i + 1]) > width)  # chars within width
        # a line keeps a separator's colon or comma and drops its spaces: each may begin as late as still fits
        cut, sep, kept = max((_last(title, sep, limit + len(sep) - kept), sep, kept) for sep, kept in WRAP_SEPARATORS)
        if cut <= 0:
            break
        lines.append(title[: cut + kept].rstrip())
        title = title[cut + len(sep) :].lstrip()
    if not lines:
        return
    fig.layout.title.text = "<br>".join([*lines, title])
    margin = fig.layout.margin
    if margin is not None and margin.t is not None:
        line = (fig.layout.title.font.size or 16) + 6
        extra = len(lines) * line
        margin.t = margin.t + extra
        if fig.layout.height:
            fig.layout.height = fig.layout.height + extra
            if len(lines) > 1:  # hung from the top (centred in the margin, three lines reach a grid's panel titles)
                fig.layout.title.update(yref="container", yanchor="top", y=1 - line / fig.layout.height)


def fit_height(fig, most: int, min_font: float | None = None):
    """``fig`` no taller than ``most`` px (in place; returned): a view that shares the first screen
    with other things keeps its place there, its plot area taking what the title and margins leave.
    Token labels that would then overlap are set smaller, down to ``min_font`` (None: their size is
    kept, as on a projector), and past that keep every k-th (as ``_thin_ticks`` does on a projector)."""
    if fig is None:
        return fig
    if (fig.layout.height or 450) > most:
        fig.layout.height = most
    height = fig.layout.height or 450
    margin = fig.layout.margin
    plot = height - (margin.t or 0) - (margin.b or 0) if margin is not None else height - 150
    for axis in list(fig.select_xaxes()) + list(fig.select_yaxes()):
        size = axis.tickfont.size if axis.tickfont is not None and axis.tickfont.size else 12
        # a map's x labels stand upright; its plot is square, so as long as it is high
        across = axis.tickangle is None or abs(axis.tickangle) >= 45
        if min_font is not None and across and axis.tickvals is not None and len(axis.tickvals) > 1:
            domain = axis.domain or (0, 1)
            pitch = (float(domain[1]) - float(domain[0])) * plot / len(axis.tickvals)
            size = max(min_font, min(size, pitch - 4))
            axis.tickfont.size = size
        _thin_ticks(axis, plot, across=across, font=size)
    return fig


def text_columns(text: str) -> int:
    """Width of ``text`` in Latin-letter columns: a Chinese character (or full-width sign) takes two."""
    return sum(2 if "\u2e80" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef" else 1 for ch in text)
