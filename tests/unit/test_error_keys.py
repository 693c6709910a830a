"""Refusals carry a message key and fields; 中文 comes from the key, never from the English text."""

import ast
import re
from pathlib import Path

import pytest

from playground.errors import UserError
from playground.i18n import ERRORS_ZH, template_fields, tr_error

PACKAGE = Path(__file__).resolve().parents[2] / "playground"
KEY = re.compile(r"^[a-z_0-9]+(\.[a-z_0-9]+)+$")
# English grammar, an English advice line the Chinese sentence says in its own words, or a parser's
# English reason (a JSON error's position) left out of the Chinese sentence.
ENGLISH_ONLY_FIELDS = {"plural", "verb", "advice", "reason"}


def _raised_keys() -> dict[str, set[str]]:
    """key -> the English templates its raise sites give (calls of a ...Error class or UserError)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if not (name.endswith("Error") or name == "ExportTooLarge"):
                continue
            key, template = node.args[0], node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and KEY.match(key.value):
                assert isinstance(template, ast.Constant), f"{path.name}:{node.lineno}: the template must be a literal"
                found.setdefault(key.value, set()).add(template.value)
    return found


RAISED = _raised_keys()


def test_the_scan_finds_the_library_refusals():
    assert len(RAISED) > 150
    assert {"config.heads_divide", "budget.in_use", "input.between", "replay.needs_model"} <= RAISED.keys()


def test_every_key_raised_has_one_english_template_and_a_chinese_one_with_the_same_fields():
    for key, templates in RAISED.items():
        assert len(templates) == 1, f"{key}: one key, one sentence ({templates})"
        assert key in ERRORS_ZH, f"{key} has no 中文 entry"
        english, chinese = template_fields(next(iter(templates))), template_fields(ERRORS_ZH[key])
        assert chinese <= english, f"{key}: 中文 fills {chinese - english}, which the raise site does not give"
        assert english - chinese <= ENGLISH_ONLY_FIELDS, f"{key}: 中文 leaves out {english - chinese}"


def test_every_chinese_entry_belongs_to_a_key_that_is_raised():
    assert set(ERRORS_ZH) <= set(RAISED), set(ERRORS_ZH) - set(RAISED)


def test_a_config_refusal_is_said_in_chinese_from_its_key():
    from playground.engine.config import ConfigError, GPTConfig

    with pytest.raises(ConfigError) as caught:
        GPTConfig(emb_dim=100, n_heads=12)
    e = caught.value
    assert e.key == "config.heads_divide" and e.fields["emb_dim"] == 100 and e.fields["n_heads"] == 12
    assert str(e).startswith("emb_dim (100) must be divisible by n_heads (12)")
    assert tr_error("zh-CN", e) == (
        f"emb_dim（100）必须能被 n_heads（12）整除：每个头分到 emb_dim / n_heads 维。可以试试 n_heads = {e.fields['options']}。"
    )
    assert tr_error("en", e) == str(e)


def test_the_english_wording_does_not_matter_to_the_translation():
    reworded = UserError("generate.no_run", "No run yet: press Generate.")
    assert str(reworded) == "No run yet: press Generate."
    assert tr_error("zh-CN", reworded) == "请先生成：现在还没有运行。"
    assert (
        tr_error("zh-CN", ValueError("Generate first: there is no run yet.")) == "Generate first: there is no run yet."
    )


def test_a_refusal_inside_a_refusal_is_said_in_chinese_as_well():
    from playground.server.replay import ReplayError, cannot_load

    record = {"model": "random init (seed 3)", "weights_sha256": "ab" * 32}
    e = cannot_load(record, ReplayError("replay.unknown_model", "the file names no model this app knows"))
    assert "(the file names no model this app knows)" in str(e)
    zh = tr_error("zh-CN", e)
    assert zh.startswith("这次运行用的是 random init (seed 3)（权重 sha256 abababababababab…）")
    assert "（文件里写的模型本程序不认识）" in zh


def test_a_budget_refusal_is_a_memory_error_and_a_user_error():
    from playground.runtime.holdings import MemoryBudgetError
    from playground.runtime.memory import MemoryBudget

    budget = MemoryBudget(total_bytes=1000)
    with pytest.raises(MemoryError) as caught:
        budget.check(10_000, "this model")
    e = caught.value
    assert isinstance(e, MemoryBudgetError) and isinstance(e, UserError) and e.key == "budget.over_total"
    assert tr_error("zh-CN", e).startswith("This model 约需")


def test_every_kind_of_holding_is_said_in_chinese():
    from playground.i18n import HOLDING_KINDS_ZH
    from playground.runtime.holdings import KIND_LABELS

    assert set(KIND_LABELS) <= set(HOLDING_KINDS_ZH)
    assert all(HOLDING_KINDS_ZH[kind].strip() for kind in KIND_LABELS)
