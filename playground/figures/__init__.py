"""Plotly figure builders: plain data in, ``go.Figure`` out.

Plotly figure builders: plain data in, ``go.Figure`` out. A leaf: nothing here imports torch,
gradio or the rest of the project, so every figure is unit-tested on hand-made arrays.

``from playground import figures`` gives every builder: ``figures.attention_heatmap(...)``.
"""

from playground.figures.attention import attention_grid, attention_heatmap, attention_overview, query_attention_bars
from playground.figures.model_charts import (
    ROOT_ID,
    loss_curve,
    memory_bars,
    parameter_components_bar,
    parameter_treemap,
)
from playground.figures.sampling import STAGE_NAMES, sampling_stages_figure, token_probability_bars
from playground.figures.style import (
    HIGHLIGHT,
    LABEL_EVERY_TOKEN_MAX,
    MAX_TICK_CHARS,
    TICK_FONT_SIZE,
    empty_figure,
    format_prob,
    token_id_label,
    token_tick_font,
)

__all__ = [
    "HIGHLIGHT",
    "LABEL_EVERY_TOKEN_MAX",
    "MAX_TICK_CHARS",
    "ROOT_ID",
    "STAGE_NAMES",
    "TICK_FONT_SIZE",
    "attention_grid",
    "attention_heatmap",
    "attention_overview",
    "empty_figure",
    "format_prob",
    "token_id_label",
    "loss_curve",
    "memory_bars",
    "parameter_components_bar",
    "parameter_treemap",
    "query_attention_bars",
    "sampling_stages_figure",
    "token_probability_bars",
    "token_tick_font",
]
