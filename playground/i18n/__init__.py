"""Interface text in English and 中文 (a leaf: imports nothing else of the project).

The same keys serve two ways: ``gr.I18n`` translates component labels in the browser (its language,
or the one chosen in Gradio's Settings), and handlers build their own text with ``tr(lang, key, **values)``
(messages, tables, status lines, figure titles). Templates use ``str.format`` fields. A refusal
(``playground.errors.UserError``) is said with ``tr_error(lang, error)``: its key and fields.
"""

from __future__ import annotations

import string

from .en import EN
from .errors_zh import ERRORS_ZH, FIELD_ZH, HOLDING_KINDS_ZH
from .zh import ZH

assert EN.keys() == ZH.keys(), "every interface string needs both languages"

LANGS = ("en", "zh-CN")


def normalize_lang(value) -> str:
    """ "zh", "zh-CN", "zh_Hans", an Accept-Language header starting with Chinese… -> "zh-CN"; anything else "en"."""
    text = str(value or "").strip().lower().replace("_", "-")
    return "zh-CN" if text.startswith("zh") else "en"


def tr(lang: str | None, key: str, **values) -> str:
    """The text of ``key`` in ``lang`` (English when the key or the language has no translation)."""
    table = ZH if normalize_lang(lang) == "zh-CN" else EN
    text = table.get(key, EN.get(key, key))
    return text.format(**values) if values else text


# Words inside the parameter formulas (playground.inside.inspection), which are otherwise maths.
FORMULA_ZH = {
    "(fixed sinusoids, a buffer)": "（固定的正弦编码，是缓冲区而非参数）",
    "(tied to the token embedding)": "（与词元嵌入共享）",
    "(post-norm: no final norm)": "（后归一化：没有最终的归一化层）",
}


def tr_words(lang: str | None, words: tuple) -> str:
    """Words the server handed over as data, ``(key, fields)``, in ``lang``: a field that is itself such a
    pair (or a bare key, as a 1-tuple) is written first."""
    key, fields = words
    return tr(lang, key, **{name: tr_words(lang, v) if isinstance(v, tuple) else v for name, v in fields.items()})


def tr_formula(lang: str | None, formula: str) -> str:
    if normalize_lang(lang) != "zh-CN":
        return formula
    for en, zh in FORMULA_ZH.items():
        formula = formula.replace(" " + en, zh).replace(en, zh)
    return formula


def template_fields(template: str) -> set[str]:
    """The field names a ``str.format`` template fills."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def tr_error(lang: str | None, error: BaseException | str) -> str:
    """A refusal in ``lang``: a ``UserError`` (anything with ``key`` and ``fields``) by its key, its
    fields filled in (interface words among them translated, nested refusals said the same way);
    any other error, or a key without a translation, as its English message."""
    key, fields = getattr(error, "key", None), getattr(error, "fields", None)
    if normalize_lang(lang) != "zh-CN" or key not in ERRORS_ZH or fields is None:
        return str(error)
    values = {name: _field_zh(lang, value) for name, value in fields.items()}
    return ERRORS_ZH[key].format(**values)


def _field_zh(lang, value):
    if isinstance(value, BaseException):
        return tr_error(lang, value)
    counted = getattr(value, "parts", None)  # holdings said as (kind, count, size): runtime.holdings
    if isinstance(value, str) and counted is not None:
        if not counted:
            return HOLDING_KINDS_ZH["nothing"]
        return "，".join(f"{n} {HOLDING_KINDS_ZH.get(kind, kind)}（{size}）" for kind, n, size in counted)
    if isinstance(value, str):
        return FIELD_ZH.get(value, value)
    return value


__all__ = [
    "EN",
    "ERRORS_ZH",
    "FIELD_ZH",
    "LANGS",
    "ZH",
    "normalize_lang",
    "template_fields",
    "tr",
    "tr_error",
    "tr_formula",
]
