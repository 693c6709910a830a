"""A built model described in the page's language: summary, module tree, parameter table, tying.

The numbers are the server's (``server.model_facts``); this module writes them: the summary line, the
module tree's rows, the parameter breakdown (formula against measured) and the weight-tying puzzle.
"""

from __future__ import annotations

import re

from playground.formats import format_bytes
from playground.i18n import tr, tr_formula, tr_words
from playground.server import model_facts
from playground.server.recipes import recipe_words
from playground.server.side_by_side_views import MARKS, side_by_side_data

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>&])")


def describe_recipe(recipe: dict, lang: str = "en") -> str:
    """A model's recipe named in the page's language ("random init (seed 3)", "随机初始化（种子 3）")."""
    return tr_words(lang, recipe_words(recipe))


def markdown_literal(text: str) -> str:
    """``text`` shown as itself in Markdown: every character Markdown (or HTML) would act on is
    backslash-escaped, and line breaks become spaces (an uploaded file's name is the user's)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def summary_line(model, recipe: dict, lang: str = "en") -> str:
    """The Model tab's Markdown summary; the model's name (an upload's file name) as literal text."""
    s = model_facts.summary(model)
    dtype = s.dtype
    if s.int8 == "dynamic":
        dtype = tr(lang, "dtype_int8_dynamic", dtype=s.dtype)
    elif s.int8 == "static":
        dtype = tr(lang, "dtype_int8", dtype=s.dtype)
    return tr(
        lang,
        "summary",
        # The two figures lesson questions ask for carry a class: the page masks them while such a
        # question waits for its guess (the lessons' CSS).
        n=f"<span class='pg-fig-n'><span>{s.n_params:,}</span></span>",
        size=format_bytes(s.size_bytes),
        dtype=dtype,
        tied=tr(lang, "tied_yes" if s.tied else "tied_no"),
        layers=s.layers,
        heads=s.heads,
        d=f"<span class='pg-fig-d'><span>{s.d}</span></span>",
        context=s.context,
        model=markdown_literal(describe_recipe(recipe, lang)),
        device=s.device,
    )


def kv_line(cfg, lang: str = "en") -> str:
    """The KV cache a token costs, from the config's own numbers: what GQA and sliding windows save."""
    kv = model_facts.kv_facts(cfg)
    text = tr(
        lang,
        "summary_kv",
        kv=f"{kv['per_token']:,.0f}",
        L=kv["layers"],
        K=kv["kv_heads"],
        hd=kv["head_dim"],
        full=f"{kv['full']:,}",
    )
    if kv["kv_heads"] != kv["heads"]:
        text += tr(lang, "summary_kv_gqa", H=kv["heads"], K=kv["kv_heads"], group=kv["heads"] // kv["kv_heads"])
    if kv["per_token"] < kv["full"]:
        text += tr(lang, "summary_kv_window", window=kv["window"], full=f"{kv['full']:,}")
    return text


def since_gpt2_line(cfg, lang: str = "en") -> str:
    """The switches set away from GPT-2's layout, by name (nothing for a GPT-2-layout model)."""
    changed = model_facts.kv_facts(cfg)["since_gpt2"]
    return tr(lang, "summary_since", switches=", ".join(f"`{name}`" for name in changed)) if changed else ""


def tree_table(model, max_depth: int = 10, lang: str = "en") -> list[list]:
    rows = []
    for r in model_facts.module_tree(model):
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
    b = model_facts.parameter_breakdown(model_or_cfg)
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


def tying_explanation(cfg, lang: str = "en") -> str:
    """The 163M-vs-124M puzzle, with this config's own numbers."""
    t = model_facts.tying_facts(cfg)
    state = tr(lang, "tying_state_tied" if t["is_tied"] else "tying_state_untied")
    tying = tr(
        lang,
        "tying",
        state=state,
        d=t["d"],
        V=f"{t['vocab']:,}",
        head=f"{t['head']:,}",
        tied=f"{t['tied']:,}",
        untied=f"{t['untied']:,}",
    )
    return tying + "\n\n" + kv_line(cfg, lang) + since_gpt2_line(cfg, lang)


tree_items = model_facts.tree_items


def _later_block(name: str) -> bool:
    """Blocks 1, 2, … repeat block 0: the table shows block 0's inside only."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[0] == "trf_blocks" and parts[1] != "0"


def side_by_side_tables(a: str, b: str, max_depth: int = 3, lang: str = "en") -> tuple[list[list], list[list], str]:
    """(tree rows, breakdown rows, a Markdown summary) for presets ``a`` and ``b``. Tree rows: mark, module,
    a's type and parameters, b's; breakdown rows: component, a's formula and count, b's, mark."""
    got = side_by_side_data(a, b)
    tree = [
        [
            MARKS[r["mark"]],
            "\u2003" * r["depth"] + (r["name"].split(".")[-1] if r["name"] else "GPTModel"),
            r["a"]["type"] if r["a"] else "",
            f"{r['a']['params']:,}" if r["a"] else "",
            r["b"]["type"] if r["b"] else "",
            f"{r['b']['params']:,}" if r["b"] else "",
        ]
        for r in got["tree"]
        if r["depth"] <= max_depth and not _later_block(r["name"])
    ]
    breakdown = [
        [
            tr(lang, r["component"]),
            tr_formula(lang, r["a_formula"]),
            f"{r['a']:,}",
            tr_formula(lang, r["b_formula"]),
            f"{r['b']:,}",
            "≠" if r["differs"] else "",
        ]
        for r in got["breakdown"]
    ]
    (ta, tb), (ka, kb) = got["total"], got["kv_bytes_per_token"]
    changed = ", ".join(f"`{name}` {va!r} → {vb!r}" for name, va, vb in got["switches"]) or "—"
    summary = tr(
        lang, "sbs_summary", a=a, b=b, ta=f"{ta:,}", tb=f"{tb:,}", ka=f"{ka:,.0f}", kb=f"{kb:,.0f}", changed=changed
    )
    return tree, breakdown, summary
