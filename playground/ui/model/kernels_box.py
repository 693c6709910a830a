"""The Model tab's kernels box: which decode path runs, and every kernel decision this process made.

Each decision comes with the figures it was made on, in the page's language, read from ``server.speed_status``
(never measured here).
"""

from __future__ import annotations

from playground.i18n import EN
from playground.server import speed_status
from playground.ui.common import tr

KERNEL_TEXT = {  # templates of the kernels box: keys of translations.py
    "head": "kn_head",
    "none": "kn_none",
    "note": "kn_note",
}


def _decision(choice, lang: str) -> str:
    """A kernel decision in the page's language, from its kind and fields (``kn_`` + kind)."""
    if lang == "en" or not choice.kind:
        return choice.decision
    return tr(lang, "kn_" + choice.kind, **choice.fields)


def _candidate(name: str, lang: str) -> str:
    """A candidate's name in the page's language (names that are proper nouns, numpy or oneDNN, stay)."""
    return tr(lang, "kn_cand_" + name) if "kn_cand_" + name in EN else name


def decode_path_text(lang: str = "en") -> str:
    """Which decode path runs (the native step where it was chosen, else the model's forward), and what
    became of the compiled one-row kernel (and its int8 dot product) and of the compiled step, and why."""
    status = speed_status.one_row_kernel()
    compiler = status.compiler.rsplit("/", 1)[-1]
    native = tr(lang, "kn_native_" + status.reason, compiler=compiler, bits=status.vector_bits, detail=status.detail)
    if status.available:
        int8 = "ready" if status.int8_dot_bits else "mismatch" if status.int8_dot_error else "none"
        native += " " + tr(lang, "kn_native_int8_" + int8, bits=status.int8_dot_bits, detail=status.int8_dot_error)
    step = speed_status.compiled_step()
    path = tr(lang, "kn_path_native" if step.available else "kn_path")
    if "kn_step_" + step.reason in EN and not (step.reason == "off" and status.reason == "off"):
        native += "\n\n" + tr(lang, "kn_step_" + step.reason, detail=step.detail)
    # A cached library set aside and built again: said once, by its reason (never its path).
    for note in dict.fromkeys(n for n in (status.cache_note, step.cache_note) if "kn_cache_" + n in EN):
        native += "\n\n" + tr(lang, "kn_cache_" + note)
    return path + "\n\n" + native


def kernels_table(lang: str = "en") -> str:
    """The decode path, then every kernel/layout decision this process made, with the figures it was made on."""
    choices = speed_status.kernel_decisions()
    if not choices:
        return tr(lang, KERNEL_TEXT["none"])
    rows = [decode_path_text(lang), "", tr(lang, KERNEL_TEXT["head"])]
    for c in choices:
        figures_ms = ", ".join(f"{_candidate(k, lang)} {v * 1e3:.2f} ms" for k, v in c.seconds.items()) or "—"
        rows.append(f"| {_decision(c, lang)} | **{_candidate(c.winner, lang)}** | {figures_ms} |")
    return "\n".join(rows) + "\n\n" + tr(lang, KERNEL_TEXT["note"])
