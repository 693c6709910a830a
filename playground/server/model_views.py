"""A built model described for the Model tab: summary, module tree, parameter table, tying.

A built model described for the Model tab: the summary line, the module tree, the parameter
breakdown (formula against measured) and the weight-tying explanation, in the user's language.
"""

from __future__ import annotations

import re

from playground.engine.config import GPTConfig, kv_bytes_per_token
from playground.engine.model import GPTModel
from playground.engine.quantize import is_dynamic_int8, is_int8
from playground.i18n import tr, tr_formula
from playground.inside.inspection import count_parameters, module_tree, parameter_breakdown
from playground.runtime.devices import describe_device
from playground.runtime.memory import format_bytes
from playground.server.model_cache import model_bytes
from playground.server.recipes import describe_recipe

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>&])")


def markdown_literal(text: str) -> str:
    """``text`` shown as itself in Markdown: every character Markdown (or HTML) would act on is
    backslash-escaped, and line breaks become spaces (an uploaded file's name is the user's)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def summary_line(model: GPTModel, recipe: dict, lang: str = "en") -> str:
    """The Model tab's Markdown summary; the model's name (an upload's file name) as literal text."""
    cfg = model.cfg
    dtype = str(model.dtype).replace("torch.", "")
    if is_dynamic_int8(model):
        dtype = tr(lang, "dtype_int8_dynamic", dtype=dtype)
    elif is_int8(model):
        dtype = tr(lang, "dtype_int8", dtype=dtype)
    return tr(
        lang,
        "summary",
        # The two figures lesson questions ask for carry a class: the page masks them while such a
        # question waits for its guess (ui.lessons_layout's CSS).
        n=f"<span class='pg-fig-n'><span>{count_parameters(model):,}</span></span>",
        size=format_bytes(model_bytes(model)),
        dtype=dtype,
        tied=tr(lang, "tied_yes" if cfg.tie_weights else "tied_no"),
        layers=cfg.n_layers,
        heads=cfg.n_heads,
        d=f"<span class='pg-fig-d'><span>{cfg.emb_dim}</span></span>",
        context=cfg.context_length,
        model=markdown_literal(describe_recipe(recipe, lang)),
        device=describe_device(model.device),
    )


def kv_line(cfg: GPTConfig, lang: str = "en") -> str:
    """The KV cache a token costs, from the config's own numbers: what GQA and sliding windows save."""
    per_token = kv_bytes_per_token(cfg, "float32")
    full = 2 * cfg.n_layers * cfg.kv_heads * cfg.head_dim * 4  # every layer holding every position
    text = tr(
        lang,
        "summary_kv",
        kv=f"{per_token:,.0f}",
        L=cfg.n_layers,
        K=cfg.kv_heads,
        hd=cfg.head_dim,
        full=f"{full:,}",
    )
    if cfg.kv_heads != cfg.n_heads:
        text += tr(lang, "summary_kv_gqa", H=cfg.n_heads, K=cfg.kv_heads, group=cfg.n_heads // cfg.kv_heads)
    if per_token < full:
        text += tr(lang, "summary_kv_window", window=cfg.sliding_window, full=f"{full:,}")
    return text


def since_gpt2_line(cfg: GPTConfig, lang: str = "en") -> str:
    """The switches set away from GPT-2's layout, by name (nothing for a GPT-2-layout model)."""
    changed = cfg.since_gpt2()
    return tr(lang, "summary_since", switches=", ".join(f"`{name}`" for name in changed)) if changed else ""


def tree_table(model: GPTModel, max_depth: int = 10, lang: str = "en") -> list[list]:
    rows = []
    for r in module_tree(model):
        if r.depth > max_depth:
            continue
        name = r.name or "GPTModel"
        indent = "\u2003" * r.depth  # em spaces survive HTML whitespace collapsing
        tied = tr(lang, "tied_to", name=r.tied_to) if r.tied_to else ""
        rows.append(
            [
                indent + name.split(".")[-1] if r.name else name,
                r.type,
                r.shape,
                f"{r.own_params:,}",
                f"{r.total_params:,}",
                tied,
                r.name,
            ]
        )
    return rows


def breakdown_table(model_or_cfg, lang: str = "en") -> tuple[list[list], object]:
    b = parameter_breakdown(model_or_cfg)
    rows = [
        [
            tr(lang, r.component),
            tr_formula(lang, r.formula),
            f"{r.formula_value:,}",
            f"{r.measured:,}",
            "✓" if r.agrees else "✗",
        ]
        for r in b.rows
    ]
    rows.append(
        [
            tr(lang, "total"),
            "",
            f"{b.total_formula:,}",
            f"{b.total_measured:,}",
            "✓" if b.total_formula == b.total_measured else "✗",
        ]
    )
    return rows, b


def tying_explanation(cfg: GPTConfig, lang: str = "en") -> str:
    """The 163M-vs-124M puzzle, with this config's own numbers."""
    tied = parameter_breakdown(cfg.replace(tie_weights=True)).total_measured
    untied = parameter_breakdown(cfg.replace(tie_weights=False)).total_measured
    head = cfg.vocab_size * cfg.emb_dim
    state = tr(lang, "tying_state_tied" if cfg.tie_weights else "tying_state_untied")
    return _tying(cfg, lang, state, head, tied, untied) + "\n\n" + kv_line(cfg, lang) + since_gpt2_line(cfg, lang)


def _tying(cfg: GPTConfig, lang: str, state: str, head: int, tied: int, untied: int) -> str:
    return tr(
        lang,
        "tying",
        state=state,
        d=cfg.emb_dim,
        V=f"{cfg.vocab_size:,}",
        head=f"{head:,}",
        tied=f"{tied:,}",
        untied=f"{untied:,}",
    )


def tree_items(model: GPTModel) -> list[tuple[str, int]]:
    """Leaf modules with their own (untied) parameter counts, for the treemap."""
    return [(r.name, r.own_params) for r in module_tree(model) if r.name and (r.own_params or r.tied_to)]
