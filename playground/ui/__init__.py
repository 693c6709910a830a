"""The Gradio app, one module per tab (the only package that imports gradio):

- ``model_tab``: build or load a model, the parameter tables and figures
- ``generate_tab``: streaming generation, Stop, step inspection, exports (with ``chips``)
- ``attention_view``: the attention figures for the current run
- ``train_tab``: training in the background with a live loss curve
- ``app``: ``build_demo``, the page composed of the tabs (each tab module has ``layout()`` and ``wire(page)``)
- shared pieces: ``messages`` (warn/ok/fail), ``state`` (the session), ``parsing`` (widget values),
  ``i18n`` (languages), ``style`` (CSS); ``common`` gathers them in one import
"""

from .app import CSS, EXAMPLES, build_demo, launch_kwargs
from .attention_view import GRID_MAX_TOKENS, HEATMAP_MAX_TOKENS, SPANS, VIEWS, attention_data, attention_views
from .chips import all_chips, status_html
from .common import I18N, fail, new_state, ok, warn
from .generate_tab import (
    after_run,
    export_model_file,
    export_run_file,
    generate_tokens,
    inspect_step,
    last_step,
    pick_token,
    run_data,
    stop_generation,
)
from .model_tab import (
    FIELDS,
    WEIGHT_CHOICES,
    build_model,
    config_from_fields,
    head_examples,
    load_session,
    model_views,
    preset_fields,
    switch_model,
)
from .train_tab import CORPUS_CHOICES, corpus_text, stop_training, train_model, use_trained

__all__ = [
    "CORPUS_CHOICES",
    "CSS",
    "EXAMPLES",
    "FIELDS",
    "GRID_MAX_TOKENS",
    "HEATMAP_MAX_TOKENS",
    "I18N",
    "SPANS",
    "VIEWS",
    "WEIGHT_CHOICES",
    "after_run",
    "all_chips",
    "attention_data",
    "attention_views",
    "build_demo",
    "build_model",
    "config_from_fields",
    "corpus_text",
    "export_model_file",
    "export_run_file",
    "fail",
    "generate_tokens",
    "head_examples",
    "inspect_step",
    "last_step",
    "launch_kwargs",
    "load_session",
    "model_views",
    "new_state",
    "ok",
    "pick_token",
    "preset_fields",
    "run_data",
    "status_html",
    "stop_generation",
    "stop_training",
    "switch_model",
    "train_model",
    "use_trained",
    "warn",
]
