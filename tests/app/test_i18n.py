"""Issue 12 on the server side: every text a handler builds follows the session's language, the
English the API returns is unchanged, and presenter mode enlarges the figures. (The browser side —
the page's language reaching the server, Settings, reload, layout — is tests/browser/test_classroom.py.)"""

import html
import re
import string
from types import SimpleNamespace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from markdown_it import MarkdownIt

from playground import PRESETS, count_parameters, figures
from playground.i18n import EN, ZH, normalize_lang, tr, tr_error
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.ui import attention_view, common, model_switch, prefs
from playground.ui.figure_dress import PRESENT_FONT, dress
from playground.ui.generate import tab as generate_tab
from playground.ui.i18n import page_prefs
from playground.ui.model import kernels_box
from playground.ui.model import tab as model_tab
from playground.ui.train import settings as train_settings
from playground.ui.train import tab as train_tab
from tests.helpers import plain_text

ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'’\-]+[A-Za-z]{2,}){2,}")
NANO = PRESETS["nano"]


def _fields(cfg):
    return [getattr(cfg, f) for f in model_switch.FIELDS]


def _texts(value):
    """Every piece of text a handler output would show: strings, table headers and cells, figure text."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, pd.DataFrame):
        yield from map(str, value.columns)
        for row in value.values.tolist():
            yield from (str(x) for x in row)
    elif isinstance(value, go.Figure):
        layout = value.layout
        yield layout.title.text or ""
        for axis in list(value.select_xaxes()) + list(value.select_yaxes()):
            yield axis.title.text or ""
        yield from (a.text or "" for a in layout.annotations or ())
        yield from (t.name or "" for t in value.data)
    elif isinstance(value, dict):
        for key in ("value", "label", "info"):
            if key in value:
                yield from _texts(value[key])
        # A choice whose label is its value is a name (a preset), not a sentence to translate.
        yield from (label for label, name in value.get("choices") or () if label != name)
        yield from value.get("sample_labels") or ()
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


def _english(outputs):
    # Token text, ids and numbers are English-free by the rule; the one token label that can look like
    # words is the bundled prompt's, which the step text and query title quote in full.
    return sorted({m.group(0) for t in _texts(outputs) for m in ENGLISH_RUN.finditer(re.sub(r"<[^>]+>", "", t))})


def test_every_template_has_the_same_fields_in_both_languages():
    fields = lambda text: {f for _, f, _, _ in string.Formatter().parse(text) if f}
    assert EN.keys() == ZH.keys()
    mismatched = {k: (fields(EN[k]), fields(ZH[k])) for k in EN if fields(EN[k]) != fields(ZH[k])}
    assert not mismatched, mismatched
    # The Chinese strings are Chinese: no English sentence hides in them (fields left out).
    english = {k: v for k, v in ZH.items() if ENGLISH_RUN.search(re.sub(r"\{[^}]*\}", "", v))}
    assert not english, english
    assert tr("zh-CN", "st_after", n=3, max=9) != tr("en", "st_after", n=3, max=9) == "after 3 of 9 tokens"


def test_language_codes_and_page_preferences():
    assert [normalize_lang(x) for x in ("zh", "zh-CN", "zh_Hans", "ZH-tw", "en", "fr", None, "")] == ["zh-CN"] * 4 + [
        "en"
    ] * 4
    page = SimpleNamespace(query_params={"lang": "zh-CN", "present": "1"}, headers={})
    assert page_prefs(page) == ("zh-CN", True)
    browser = SimpleNamespace(query_params={}, headers={"accept-language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert page_prefs(browser) == ("zh-CN", False)
    assert page_prefs(SimpleNamespace(query_params={}, headers={})) == ("en", False)
    assert page_prefs(None) == ("en", False)  # the API


def test_common_errors_are_translated_with_their_values():
    from playground.errors import UserError

    error = UserError(
        "input.between", "{name} must be between {lo:,} and {hi:,}, got {value:,}.", name="Layer", lo=0, hi=1, value=9
    )
    assert tr_error("zh-CN", error) == "层 必须在 0 到 1 之间，收到的是 9。"
    assert tr_error("en", error) == "Layer must be between 0 and 1, got 9."
    assert tr_error("zh-CN", ValueError("something new")) == "something new"


def test_a_build_in_chinese_says_everything_in_chinese_with_the_same_numbers():
    zh = {**common.new_state("zh-CN")}
    en_out = model_tab.build_model(common.new_state(), "random", 3, "gpt2", None, "float32", *_fields(NANO))
    zh_out = model_tab.build_model(zh, "random", 3, "gpt2", None, "float32", *_fields(NANO))
    model = CACHE.get(zh_out[0]["recipe"])
    assert zh_out[0]["lang"] == "zh-CN"  # the new model's state keeps the page's language
    assert "就绪" in zh_out[1] and f"{count_parameters(model):,} 个参数" in plain_text(zh_out[2])
    en_rows, zh_table = en_out[4], zh_out[4]
    assert isinstance(en_rows, list) and list(zh_table.columns) == ["组成部分", "公式", "公式值", "实测", "一致"]
    # Same live counts in both languages, only the words differ.
    assert [r[2:] for r in en_rows] == [r[2:] for r in zh_table.values.tolist()]
    assert zh_table.values.tolist()[-1][0] == "合计" and en_rows[-1][0] == "total"
    views = zh_out[2 : zh_out._fields.index("kernels_md") + 1]
    assert not _english(views), _english(views)


def test_generation_and_attention_in_chinese(tmp_path):
    state = {**common.new_state("zh-CN"), "recipe": random_recipe(NANO, seed=0)}
    outs = list(generate_tab.generate_tokens(state, "Hello there, how are", 0.8, 40, 1.0, 5, 1, False))
    state, _, status = outs[-1]
    assert "完成" in status and "个 token" in status and "data-state='done'" in status
    step_outputs = generate_tab.last_step(state)
    assert "第 4 步" in step_outputs[3] and "种子 1" in step_outputs[3]
    for view in attention_view.VIEWS:
        fig, query_fig, _, msg = attention_view.attention_views(state, view, 1, 0, True, None)
        texts = [fig, query_fig]
        assert not _english(texts), (view, _english(texts))
        assert msg == ""
    assert (
        "层 必须在 0 到 1 之间" in attention_view.attention_views(state, attention_view.VIEWS[0], 9, 0, True, None)[3]
    )
    # English sessions (and the API) read exactly as before.
    en = {**state, "lang": "en"}
    assert attention_view.attention_views(en, attention_view.VIEWS[0], 1, 0, True, None)[
        0
    ].layout.title.text.startswith("Layer 1, head 0")


def test_switching_the_page_language_redraws_every_server_text():
    state = {**common.new_state(), "recipe": random_recipe(NANO, seed=0)}
    state = list(generate_tab.generate_tokens(state, "Hello there, how are", 0.8, 40, 1.0, 4, 1, False))[-1][0]
    run_id, train_state = state["run_id"], {"job": None, "recipe": None}

    def switch(prefs_json):
        """The header, then the redraws the tabs register (in the page, chained after it)."""
        header = prefs.apply_prefs(prefs_json, state, train_state)
        titles = tuple(prefs.tab_titles(common.lang_of(state), ["model", "generate", "train"]))
        model = model_tab.relabel(None, state, 3)
        gen = generate_tab.relabel(state, attention_view.VIEWS[0], 0, 0, True, None, attention_view.SPANS[0], 3)
        train = train_tab.relabel(state, train_state, "nano", 7, 1, train_settings.estimate_html("nano", 7, 1))
        return header + titles + model + gen + train, titles, model, gen

    out, titles, _, gen = switch('{"lang": "zh-CN", "present": true}')
    # The states change in place (an event returning them could undo a generation's run id).
    assert state["lang"] == train_state["lang"] == "zh-CN" and state["present"] is True
    assert state["run_id"] == run_id
    assert list(titles) == ["1 · 模型", "2 · 生成与注意力", "3 · 训练"]
    assert "第 3 步" in gen.step_md and "完成" in gen.status
    assert not _english(out), _english(out)
    # And back: the English headers return.
    _, _, back, _ = switch('{"lang": "en"}')
    assert list(back.breakdown_df.columns)[:2] == ["component", "formula"] and state["present"] is False


def test_presenter_mode_enlarges_figures_and_fits_them_on_a_projector():
    probs = np.tril(np.ones((60, 60)))
    probs /= probs.sum(1, keepdims=True)
    labels = [f"t{i}" for i in range(60)]
    fig = dress(figures.attention_heatmap(probs, labels, title="Layer 0, head 0"), "zh-CN", present=True)
    assert (
        fig.layout.xaxis.title.text == "键位置（被关注的）" and fig.layout.yaxis.title.text == "查询位置（发出关注的）"
    )
    assert fig.layout.xaxis.tickfont.size >= PRESENT_FONT and fig.layout.yaxis.tickfont.size >= PRESENT_FONT
    assert fig.layout.height <= 720
    ticks = list(fig.layout.xaxis.tickvals)
    # Thinned so 16-px labels do not overlap, anchored on the newest token; each label still names its position.
    assert len(ticks) * (PRESENT_FONT + 4) <= fig.layout.height and ticks[-1] == 59
    assert list(fig.layout.xaxis.ticktext) == [labels[int(t)] for t in ticks]
    plain = figures.attention_heatmap(probs, labels, title="Layer 0, head 0")
    assert dress(plain, "en").layout.xaxis.title.text == "key position (looked at)"


@pytest.mark.parametrize("n_parts, upright", [(6, False), (26, True)])  # a 2-layer model; GPT-2 small
def test_presenter_mode_writes_the_waterfalls_values_at_full_size(n_parts, upright):
    from playground.figures import inside as lf

    names, values = [f"part {i}" for i in range(n_parts)], [0.5 * (-1) ** i for i in range(n_parts)]
    fall = dress(lf.attribution_waterfall(names, values, 1.25, title="t"), "en", present=True).data[0]
    assert fall.textfont.size == PRESENT_FONT and fall.constraintext == "none"  # not shrunk to the bar's width
    assert fall.textangle == (-90 if upright else 0)  # many narrow bars: labels stand along them
    plain_fig = dress(lf.attribution_waterfall(names, values, 1.25, title="t"), "en")
    plain = plain_fig.data[0]
    assert plain.textfont.size is None and plain.constraintext is None  # outside presenter mode: as plotly draws it
    # Every level the bars reach is inside the y range, with room beyond it for the labels.
    levels = np.concatenate([[0.0], np.cumsum(values), [1.25]])
    lo, hi = plain_fig.layout.yaxis.range
    span = levels.max() - levels.min()
    assert lo <= levels.min() - 0.1 * span and hi >= levels.max() + 0.1 * span


# ---- the other tabs: Train, Tokenizer, Inside, Score & compare (handler outputs in zh-CN) ----


def _titles(outputs):
    """Tooltips (title='…' attributes), which _english's tag stripping would skip."""
    return [html.unescape(t) for text in _texts(outputs) for t in re.findall(r"title='([^']*)'", text)]


def _no_english(outputs):
    found = _english(outputs) + sorted({m.group(0) for t in _titles(outputs) for m in ENGLISH_RUN.finditer(t)})
    assert not found, found


@pytest.fixture(scope="module")
def zh_run():
    state = {**common.new_state("zh-CN"), "recipe": random_recipe(NANO, seed=0)}
    return list(generate_tab.generate_tokens(state, "Hello there, how are", 0.8, 40, 1.0, 6, 1, False))[-1][0]


def test_train_tab_in_chinese_with_the_same_numbers():

    zh, en = {**train_tab.new_train_state(), "lang": "zh-CN"}, train_tab.new_train_state()
    preset = "nano"
    est_zh, est_en = (train_settings.estimate_html(preset, 7, 1, state=s) for s in (zh, en))
    assert "在本机上约需" in est_zh and est_en.startswith("<div class='pg-msg pg-estimate'") and "About " in est_en
    # The same measured seconds in both languages (one measurement, cached).
    assert re.search(r"data-seconds='([\d.]+)'", est_zh).group(1) == re.search(
        r"data-seconds='([\d.]+)'", est_en
    ).group(1)
    _no_english(est_zh)
    assert train_settings.duration(200, "zh-CN") == "3 分 20 秒" and train_settings.duration(200) == "3 min 20 s"
    bad = [train_settings.estimate_html("nano-x", 7, 1, state=zh), train_settings.estimate_html(preset, 7, 0, state=zh)]
    assert "未知的模型" in bad[0] and "批大小 必须在 1 到 64 之间" in bad[1]
    _no_english(bad)
    outs = list(train_tab.train_model(zh, preset, train_settings.CORPUS_CHOICES[0], None, None, 3, 3e-3, 1))
    final_state, loss_fig, progress, message, samples = outs[-1][:5]
    assert final_state["lang"] == "zh-CN" and final_state["recipe"]  # the page's language survives the run
    assert "训练完成，共 3 步" in message and "第 3 / 3 步" in progress and "《傲慢与偏见》" in outs[0][3]
    assert loss_fig.layout.title.text == tr("zh-CN", "fig_loss")
    assert "训练前（第 0 步）" in samples and "训练 3 步之后" in samples and "只有权重在变" in samples
    _no_english([out[:4] for out in outs])  # (the samples quote the model's own English)
    _no_english([train_tab.stop_training(zh), train_tab.use_trained(common.new_state("zh-CN"), zh)[1]])
    used = train_tab.use_trained(common.new_state("zh-CN"), final_state)[1]
    assert "在《傲慢与偏见》上训练 3 步" in used
    _no_english(used)


def test_tokenizer_tab_in_chinese_with_the_same_tokens():
    from playground.ui.tokenizer import tab as tt

    text = tt.DEFAULT_TEXT + " \U0001f600"
    zh, en = tt.show_tokens(text, {"lang": "zh-CN"}), tt.show_tokens(text)
    _no_english(zh)
    assert list(zh[2].columns) == ["位置", "编号", "字节（十六进制）", "文本", "所属字符"]
    assert [r[:4] for r in zh[2].values.tolist()] == [r[:4] for r in en[2]]  # same tokens, ids and bytes
    assert "个 token" in zh[0] and " tokens (" in en[0]
    assert any("第 1–2 个字节（共 3 个）属于 从" in r[4] for r in zh[2].values.tolist())
    assert any("bytes 1–2 of 3 of 从" in r[4] for r in en[2])  # English (and the API) as before
    redrawn = tt.redraw({"lang": "zh-CN"}, text, "a")
    assert "没有合并" in redrawn[3] and list(redrawn[2].columns)[0] == "位置"
    _no_english(redrawn)
    _no_english([tt.show_tokens("x" * 30_000, {"lang": "zh-CN"})[0], tt.show_merges("", {"lang": "zh-CN"})])


def test_inside_tab_in_chinese(zh_run):
    from playground.ui.inside import tab as it

    noop = lambda *a, **k: None  # noqa: E731
    outs = [
        it.lens_view(zh_run, None, None, None),
        it.attribution_view(zh_run, None, ""),
        it.maths_view(zh_run, 1, 0, None),
        it.intervene_view(zh_run, "0.1", "1.0", "", 1.0, "0", "1", True, None),
        it.dose_view(zh_run, "1.1", None, ""),
        it.sweep_view(zh_run, progress=noop),
    ]
    _no_english(outs)
    assert outs[0][0].layout.title.text.startswith("Logit 透镜") and "嵌入" in outs[0][0].layout.yaxis.ticktext
    assert list(outs[2][0].columns)[0] == "键位置" and "置零 L0H1" in outs[3][3]
    errors = [
        it.lens_view(common.new_state("zh-CN"), None, None, None)[-1],
        it.dose_view(zh_run, "", None, "")[-1],
        it.intervene_view(zh_run, "x", "", "", 1, "", "", False, None)[-1],
        it.maths_view(zh_run, 9, 0, None)[-1],
    ]
    assert "请先生成" in errors[0] and "层 必须在 0 到 1 之间" in errors[3]
    _no_english(errors)
    # English sessions read as before.
    en = {**zh_run, "lang": "en"}
    assert it.lens_view(en, None, None, None)[0].layout.title.text.startswith("Logit lens: top token")


def test_score_and_compare_in_chinese(zh_run):
    from playground.ui.compare import tab as ct

    noop = lambda *a, **k: None  # noqa: E731
    text = "Once upon a time there was a fox."
    cmp, msg = ct.load_model_b(
        {"recipe": None},
        {"lang": "zh-CN"},
        "random",
        "nano",
        1,
        None,
        None,
        "float32",
        progress=noop,
    )
    zh = ct.score(zh_run, cmp, "paste", text, None, False, 0, both=True, progress=noop)
    en = ct.score({**zh_run, "lang": "en"}, cmp, "paste", text, None, False, 0, both=True, progress=noop)
    unlabelled = lambda d: (
        {k: unlabelled(v) for k, v in d.items() if k not in ("label", "model")} if isinstance(d, dict) else d
    )  # noqa: E731
    assert unlabelled(zh[-1]) == unlabelled(en[-1])  # the same numbers; only the models' names are translated
    assert "| 模型 |" in zh[1] and "| model |" in en[1]
    f, exported = ct.export_replay(zh_run)
    outs = [
        msg,
        zh[:-1],
        list(ct.generate_two_models(zh_run, cmp, "Hello", 1, 4, 1.0, 0, 1.0))[-1],
        list(ct.generate_two_settings(zh_run, "Hello", 1, 4, 0.7, 0, 1.0, 1.5, 0, 1.0))[-1],
        ct.show_receipt(zh_run, 2)[0],
        ct.show_receipt(zh_run, 99)[0],
        exported,
        ct.score(zh_run, {"recipe": None}, "paste", text, None, False, 0, both=True, progress=noop)[0],
        ct.score(zh_run, cmp, "upload", "", None, False, 0, progress=noop)[0],
    ]
    _no_english(outs)
    replayed = ct.replay_file(zh_run, f)[0]
    assert "完全相同" in replayed and "已用" in replayed
    assert "文本，每一步都相同" in replayed and "到第一处不同为止" not in replayed  # one verdict, said once


# ---- a language switch redraws every view a page drew (Inside, Score & compare), same numbers ----


def _numbers(outputs):
    """The numbers a view shows, wherever they are written (text, tables, figure titles, values)."""
    found = []
    for t in _texts(outputs):
        found += re.findall(r"\d+\.\d+", re.sub(r"<[^>]+>", " ", t))
    for fig in (x for x in outputs if isinstance(x, go.Figure)):
        for trace in fig.data:
            for axis in ("x", "y", "z"):
                values = getattr(trace, axis, None)
                if values is not None:
                    values = np.asarray(values)
                    found.append(
                        str(np.round(values.astype(float), 6).tolist()) if values.dtype.kind in "fiu" else None
                    )
    return found


def test_a_language_switch_redraws_every_inside_and_compare_view_it_drew(zh_run):
    from playground.ui import redraw
    from playground.ui.compare import tab as ct
    from playground.ui.inside import redraw as ir

    noop = lambda *a, **k: None  # noqa: E731
    page, other = SimpleNamespace(session_hash="page-1"), SimpleNamespace(session_hash="page-2")
    en = {**zh_run, "lang": "en"}
    drawn = {
        "dla": ir.remembering("dla")(page, en, None, ""),
        "maths": ir.remembering("maths")(page, en, 1, 0, None),
        "intervene": ir.remembering("intervene")(page, en, "0.1", "", "", 1.0, "", "", False, None),
    }
    drawn["maths"] = (pd.DataFrame(drawn["maths"][0]),) + tuple(drawn["maths"][1:])  # (English: bare rows)
    # A page that drew nothing gets nothing redrawn; the lens follows the run (it is always drawn).
    assert all(_skipped(x) for x in ir.redraw_views(other, zh_run, None, None)[5:-1])
    out = ir.redraw_views(page, zh_run, None, None)
    assert out[0].layout.title.text.startswith("Logit 透镜")
    dla, maths, intervene = out[5:8], out[8:11], out[11:15]
    assert all(_skipped(x) for x in out[15:18])  # dose and sweep were not drawn
    _no_english([dla, maths, intervene])
    for key, zh in (("dla", dla), ("maths", maths), ("intervene", intervene)):
        assert _numbers(zh) == _numbers(drawn[key][:-1]), key  # the same numbers, only the words differ
    assert list(maths[0].columns)[0] == "键位置" and "置零 L0H1" in intervene[3]
    # Tick labels and bar names that are words, not tokens: the layers, heads and attribution's parts.
    assert (
        list(dla[0].layout.yaxis.ticktext[:2]) == ["第 0 层", "第 1 层"] and dla[0].layout.xaxis.ticktext[0] == "头 0"
    )
    bars = list(dla[1].data[0].x)
    assert bars[:3] == ["tok_emb", "pos_emb", "L0 注意力"] and bars[-2:] == ["final_norm 偏移", "最终 logit"]
    assert list(drawn["dla"][1].data[0].x)[2] == "L0 attn"  # English as before
    # The sweep is drawn from its numbers (not measured again); its message is the one shown last.
    swept = ir.remembering("sweep")(page, en, progress=noop)
    assert redraw.order(page, ["inside_dla", "inside_sweep"])[-1] == "inside_sweep"
    again = ir.redraw_views(page, zh_run, None, None)
    assert _numbers(again[16:18]) == _numbers(swept[:2]) and "依次把每个头置零" in again[17]
    assert again[16].layout.yaxis.ticktext[0] == "第 0 层" and again[16].layout.xaxis.title.text == "头"
    # And back to English: the first drawing again.
    back = ir.redraw_views(page, en, None, None)
    assert back[7] == drawn["dla"][2] and list(back[8].columns)[0] == "key position"

    # Score & compare: model B, A and B scores, both streams, a receipt, an export and its replay.
    cmp, _ = ct.load_model_b(
        {"recipe": None},
        {"lang": "en"},
        "random",
        "nano",
        1,
        None,
        None,
        "float32",
        progress=noop,
        request=page,
    )
    text = "Once upon a time there was a fox."
    scored = ct.score_ab(en, cmp, "paste", text, None, False, 0, progress=noop, request=page)
    side = list(ct.generate_two_settings(en, "Hello", 1, 4, 0.7, 0, 1.0, 1.5, 0, 1.0, request=page))[-1]
    receipt = ct.show_receipt(en, 2, request=page)[0]
    f, exported = ct.export_replay(en, request=page)
    replayed = ct.replay_file(en, f, request=page)[0]
    zh = ct.redraw_views(page, zh_run)
    assert not any(_skipped(x) for x in zh[:-3] + zh[-2:])
    _no_english(
        [re.sub(r"<span class='pg-token-text'>.*?</span>", "", x, flags=re.S) if isinstance(x, str) else x for x in zh]
    )  # (the replayed run's own text left out)
    assert "已就绪" in zh[0] and "| 模型 |" in zh[2] and "完全相同" in zh[10] and "完成" in zh[7]
    assert _numbers(zh[1:7]) == _numbers(scored[:6]) and _numbers([zh[9]]) == _numbers([receipt])
    assert re.findall(r"data-bits='([\d.]+)'", zh[3]) == re.findall(r"data-bits='([\d.]+)'", scored[2])
    assert re.findall(r"data-step='(\d+)'", zh[8]) == re.findall(r"data-step='(\d+)'", side[1])
    en_again = ct.redraw_views(page, en)
    assert en_again[2] == scored[1] and en_again[8] == side[1] and en_again[9] == receipt and en_again[11] == exported
    assert en_again[10] == replayed
    assert all(_skipped(x) for x in ct.redraw_views(other, zh_run))
    redraw.forget(page)  # the page closed
    assert all(_skipped(x) for x in ct.redraw_views(page, zh_run))


def _skipped(x) -> bool:
    return isinstance(x, dict) and x == {"__type__": "update"}  # gr.skip(): the output keeps what it shows


def test_the_refusals_of_the_inside_and_compare_tabs_are_said_in_chinese(zh_run, tmp_path):
    """Bad input a class types (a two-token target, a head or layer the model lacks, an empty or
    one-token text, a file that is not a replay) is refused in 中文, with the values it names."""
    from playground.ui.compare import tab as ct
    from playground.ui.inside import tab as it

    noop = lambda *a, **k: None  # noqa: E731
    not_json = tmp_path / "notes.json"
    not_json.write_text("these are my notes")
    said = {
        "two tokens": it.attribution_view(zh_run, None, " hello world")[-1],
        "no such head": it.intervene_view(zh_run, "1.7", "", "", 1.0, "", "", False, None)[-1],
        "no such layer": it.intervene_view(zh_run, "", "", "", 1.0, "9", "", False, None)[-1],
        "position": it.attribution_view(zh_run, 999, "")[-1],
        "empty text": ct.score(zh_run, {"recipe": None}, "paste", "  ", None, False, 0, progress=noop)[0],
        "one token": ct.score(zh_run, {"recipe": None}, "paste", "Hi", None, False, 0, progress=noop)[0],
        "not a replay": ct.replay_file(zh_run, str(not_json))[0],
    }
    _no_english(list(said.values()))
    assert "' hello world' 是 2 个 token" in html.unescape(said["two tokens"])
    assert "第 1 层第 7 头不存在" in said["no such head"] and "第 9 层不存在" in said["no such layer"]
    assert "999" in said["position"] and "文本是空的" in said["empty text"] and "只有一个 token" in said["one token"]
    assert "不是重放文件" in said["not a replay"]


def test_the_build_message_follows_a_language_switch():
    from playground.ui import redraw
    from playground.ui.model import tab as model_tab

    page = SimpleNamespace(session_hash="page-build")
    out = model_tab.build_model(common.new_state(), "random", 3, "gpt2", None, "float32", *_fields(NANO), request=page)
    zh = model_tab.build_message(page, {"lang": "zh-CN"})
    assert "Ready" in out[1] and "就绪" in zh and "随机初始化（种子 3）" in zh
    assert re.findall(r"\d+\.\d+", zh) == re.findall(r"\d+\.\d+", out[1])  # the same measured seconds
    assert model_tab.build_message(page, {"lang": "en"}) == out[1]
    bad = model_tab.build_model(
        common.new_state(),
        "random",
        3,
        "gpt2",
        None,
        "float32",
        *_fields(NANO)[:2],
        70,
        *_fields(NANO)[3:],
        request=page,
    )[1]
    assert "emb_dim" in bad and "必须能被" in model_tab.build_message(page, {"lang": "zh-CN"})
    redraw.forget(page)
    assert model_tab.build_message(page, {"lang": "zh-CN"}) == {"__type__": "update"}


def test_the_views_kept_for_redrawing_are_bounded(monkeypatch):
    from playground.ui import redraw

    monkeypatch.setattr(redraw, "MAX_VIEWS", 3)
    monkeypatch.setattr(redraw, "MAX_BYTES", 1000)
    pages = [SimpleNamespace(session_hash=f"bound-{i}") for i in range(5)]
    for i, page in enumerate(pages):
        redraw.remember(page, "v", lambda lang, present, i=i: f"{lang} {i}", nbytes=100)
    # the oldest two pages were dropped (count), the newest three kept
    assert [redraw.redraw(p, "v", "zh-CN", False, 1)[0] for p in pages[2:]] == ["zh-CN 2", "zh-CN 3", "zh-CN 4"]
    assert all(redraw.redraw(p, "v", "en", False, 1)[0] == {"__type__": "update"} for p in pages[:2])
    redraw.remember(pages[0], "big", lambda lang, present: "big", nbytes=900)  # (bytes) leaves room for one more
    assert redraw.redraw(pages[0], "big", "en", False, 1) == ("big",)
    assert redraw.redraw(pages[4], "v", "en", False, 1) == ("en 4",)
    assert redraw.redraw(pages[3], "v", "en", False, 1)[0] == {"__type__": "update"}
    redraw.remember(pages[1], "huge", lambda lang, present: "huge", nbytes=2000)  # never kept
    assert redraw.redraw(pages[1], "huge", "en", False, 1)[0] == {"__type__": "update"}
    for p in pages:
        redraw.forget(p)


def test_the_train_tabs_last_message_follows_a_language_switch():

    page = SimpleNamespace(session_hash="page-train")
    outs = list(
        train_tab.train_model(
            train_tab.new_train_state(),
            "nano",
            train_settings.CORPUS_CHOICES[0],
            None,
            None,
            3,
            3e-3,
            1,
            request=page,
        )
    )
    assert "Trained" in outs[-1][3] or "3 steps" in outs[-1][3]
    zh = train_tab.train_message(page, {"lang": "zh-CN"})
    assert "训练完成，共 3 步" in zh
    _no_english(zh)
    assert train_tab.train_message(page, {"lang": "en"}) == outs[-1][3]
    state, used = train_tab.use_trained(common.new_state(), outs[-1][0], request=page)[:2]
    assert "在《傲慢与偏见》上训练 3 步" in train_tab.train_message(page, {"lang": "zh-CN"})
    assert train_tab.train_message(page, {"lang": "en"}) == used


def test_the_kernels_box_names_its_candidates_in_chinese():
    from playground.runtime import kernels

    CACHE.get(random_recipe(NANO, seed=0))  # a build measures this machine's kernels
    zh, en = kernels_box.kernels_table("zh-CN"), kernels_box.kernels_table("en")
    named = {c.winner for c in kernels.measured()} | {k for c in kernels.measured() for k in c.seconds}
    translated = [n for n in named if "kn_cand_" + n in EN]
    assert translated  # this process measured layouts and Q/K/V stacking
    for name in translated:
        assert ZH["kn_cand_" + name] in zh and re.search(r"[\u4e00-\u9fff]", ZH["kn_cand_" + name])
        assert f" {name} " in en or f"**{name}**" in en  # the English box keeps the code's names
    assert not _english([zh]), _english([zh])


@pytest.mark.parametrize(
    "bits, error, en_words, zh_words",
    [
        (512, "", "512-bit vectors: the int8 dot-product instruction, VNNI", "512 位向量：CPU 有 int8 点积指令 VNNI"),
        (0, "int8 (7, 33): sums off by up to 3", "sums off by up to 3", "不一致"),
        (0, "", "no vector integer multiply-adds (VNNI or AVX2)", "没有可用的向量整数乘加（VNNI 或 AVX2）"),
    ],
)
def test_the_decode_path_says_what_became_of_the_int8_dot_product(monkeypatch, bits, error, en_words, zh_words):
    from playground.runtime import native_gemv

    status = native_gemv.Status(True, "ready", "", "/usr/bin/g++", 512, 0.0, "", bits, error)
    monkeypatch.setattr(native_gemv, "status", lambda: status)
    en, zh = kernels_box.decode_path_text("en"), kernels_box.decode_path_text("zh-CN")
    assert en_words in en and zh_words in zh
    assert not _english([zh.replace(error, "")]), _english([zh])


def test_chinese_says_nats_in_chinese_and_gradios_own_screen_reader_key_has_words():
    from playground.ui.figure_dress import WORDS_ZH
    from playground.ui.i18n import I18N

    assert not [k for k, v in ZH.items() if "nats" in v]
    assert not [v for v in WORDS_ZH.values() if "nats" in v]
    assert "奈特" in tr("zh-CN", "in_cell", layer="L0", pos=1, tok="a", kl="0.1")
    # Gradio's status tracker reads "common.complete" to screen readers; its catalogues lack the key.
    assert I18N.translations["en"]["common.complete"] == "Complete"
    assert I18N.translations["zh-CN"]["common.complete"] == "完成"


def test_presenter_mode_thins_each_panel_of_the_all_heads_grid_to_what_it_has_room_for():
    probs = np.tril(np.ones((4, 40, 40)))
    probs /= probs.sum(-1, keepdims=True)
    labels = [f"t{i}" for i in range(40)]
    fig = dress(figures.attention_grid(probs, labels, title="Layer 0"), "en", present=True)
    from playground.ui.figure_dress import PRESENT_PLOT_WIDTH

    for axis in fig.select_yaxes():
        if axis.showticklabels is False:
            continue
        room = (axis.domain[1] - axis.domain[0]) * (fig.layout.height - 150)
        assert len(axis.tickvals) * (PRESENT_FONT + 4) <= room and axis.tickvals[-1] == 39
    for axis in fig.select_xaxes():
        if axis.showticklabels is False:
            continue
        room = (axis.domain[1] - axis.domain[0]) * PRESENT_PLOT_WIDTH
        assert len(axis.tickvals) * (PRESENT_FONT + 4) <= room and axis.tickvals[-1] == 39


def test_a_chinese_title_is_wrapped_by_its_width_not_its_character_count():
    """A Chinese character is as wide as two Latin letters: a title that fits as English may not fit as 中文."""
    fig = figures.empty_figure("")
    fig.update_layout(title_text="第 19 步：采样分布下最可能的下一个 token")  # 28 characters, 42 columns
    from playground.ui.figure_dress import text_columns

    lines = dress(fig, "zh-CN", present=True).layout.title.text.split("<br>")
    assert len(lines) == 2 and "".join(lines).replace(" ", "") == "第19步：采样分布下最可能的下一个token"
    assert all(text_columns(line) <= 36 for line in lines)
    # the Generate tab's step bars sit in a third of the page: wrapped there even when not presenting
    narrow = figures.empty_figure("")
    narrow.update_layout(title_text="第 19 步：采样分布下最可能的下一个 token")
    lines = dress(narrow, "zh-CN", column="third").layout.title.text.split("<br>")
    assert len(lines) == 2 and all(text_columns(line) <= 36 for line in lines)
    # the logit lens spans the page: its title (60 columns as 中文) stays on one line even when presenting
    wide = figures.empty_figure("")
    wide.update_layout(title_text=tr("zh-CN", "in_fig_lens"))
    assert 48 < text_columns(tr("zh-CN", "in_fig_lens")) <= 72
    assert "<br>" not in dress(wide, "zh-CN", present=True, column="full").layout.title.text
    short = figures.empty_figure("")
    short.update_layout(title_text="层 · 头")
    assert "<br>" not in dress(short, "zh-CN", present=True).layout.title.text


def test_a_title_line_may_fill_its_width_and_never_ends_in_a_separator():
    """A line ends at the last separator that still fits, one exactly filling the width too, and a break at
    " · " leaves neither half of it behind."""
    from playground.ui.figure_dress import _wrap_title

    def wrapped(title, width):
        fig = figures.empty_figure("")
        fig.update_layout(title_text=title)
        _wrap_title(fig, width)
        return fig.layout.title.text.split("<br>")

    assert wrapped("abcde fghij klmno", 11) == ["abcde fghij", "klmno"]
    assert wrapped("Layer 3 · Head 5 · attention from every query", 20) == [
        "Layer 3 · Head 5",
        "attention from every",
        "query",
    ]
    assert wrapped("Step 19: next tokens", 8) == ["Step 19:", "next", "tokens"]


def test_a_field_name_that_is_an_interface_word_is_translated_too():
    from playground.errors import UserError
    from playground.settings import parse_number, parse_whole

    with pytest.raises(UserError) as caught:
        parse_whole("2.5", "Temperature")
    assert tr_error("zh-CN", caught.value) == "温度 必须是整数，收到的是 '2.5'。"
    with pytest.raises(UserError) as caught:
        parse_whole(9, "Layer", 0, 1)
    assert tr_error("zh-CN", caught.value) == "层 必须在 0 到 1 之间，收到的是 9。"
    with pytest.raises(UserError) as caught:
        parse_number("inf", "Max new tokens")
    assert tr_error("zh-CN", caught.value) == "最多生成的 token 数 必须是有限的数，收到的是 'inf'。"
    with pytest.raises(UserError) as caught:
        parse_whole(float(2**60), "Sampling seed", 0, 2**63 - 1)
    assert caught.value.key == "input.not_exact" and tr_error("zh-CN", caught.value).startswith("采样随机种子 ")


def test_a_language_redraw_keeps_the_attention_view_the_page_last_drew():
    """The Generate tab's language redraw reads the view controls when its events set off; a Show me (or a
    click) that drew another head meanwhile must not be drawn over with the controls' old values."""
    from types import SimpleNamespace

    state = {**common.new_state(), "recipe": random_recipe(NANO, seed=0)}
    state = list(generate_tab.generate_tokens(state, "Hello there, how are", 0.8, 40, 1.0, 4, 1, False))[-1][0]
    page, other = SimpleNamespace(session_hash="att-page"), SimpleNamespace(session_hash="att-other")
    view, span = attention_view.VIEWS[0], attention_view.SPANS[0]
    drawn = attention_view.attention_views(state, view, 1, 1, True, None, span, request=page)
    assert drawn.heatmap.layout.title.text.startswith("Layer 1, head 1")
    stale = generate_tab.relabel(state, view, 0, 0, True, None, span, 3, request=page)
    assert stale.heatmap.layout.title.text.startswith("Layer 1, head 1")
    fresh = generate_tab.relabel(state, view, 0, 0, True, None, span, 3, request=other)
    assert fresh.heatmap.layout.title.text.startswith("Layer 0, head 0")


def test_a_language_redraw_after_a_run_draws_the_runs_own_map_not_the_sliders_old_query():
    """The page applies its preferences as it loads, a chain of queued redraws; behind a quick run the
    Generate tab's may run after the run ended, before or after its map is drawn, with the query and step
    sliders still at an earlier run's values. It must draw the map the run ended with (its newest positions)
    and its last step, not positions 0-63 up to query 0 and step 3."""
    from types import SimpleNamespace

    page = SimpleNamespace(session_hash="after-run-page")
    view, span = attention_view.VIEWS[0], attention_view.SPANS[0]
    state = {**common.new_state(), "recipe": random_recipe(NANO, seed=0)}
    state = list(generate_tab.generate_tokens(state, "Hello there, how are", 0.8, 40, 1.0, 8, 1, False))[-1][0]
    generate_tab.attention_views(state, view, 0, 0, True, 0, span, request=page)  # an earlier run, at query 0
    generate_tab.inspect_step(state, 3, request=page)  # and at step 3
    state = list(generate_tab.generate_tokens(state, "Hello there, how are", 0.8, 40, 1.0, 80, 1, False))[-1][0]
    early = generate_tab.relabel(state, view, 0, 0, True, 0, span, 3, request=page)  # before this run's map
    ended = generate_tab.after_run(state, view, 0, 0, True, span, request=page)
    last = int(ended.heatmap.data[0].x[-1])
    assert last > 63  # the run is longer than one window: its map shows the newest positions
    shown = generate_tab.last_step(state, request=page)  # the step panel on the run's last step
    late = generate_tab.relabel(state, view, 0, 0, True, 0, span, 3, request=page)  # after it
    for stale in (early, late):
        assert int(stale.heatmap.data[0].x[-1]) == last
        assert stale.heatmap.layout.title.text == ended.heatmap.layout.title.text
        assert stale.step_md == shown.step_md and "Step 79" in stale.step_md.replace("*", "")
    generate_tab.inspect_step(state, 20, request=page)  # a step of this run the page picked is kept
    assert "Step 20" in generate_tab.relabel(state, view, 0, 0, True, 0, span, 3, request=page).step_md.replace("*", "")


def test_a_language_chosen_while_a_run_streams_stays_in_the_session_after_it():
    """The page applies its preferences as it loads, in place in the session's state; a Generate run pressed
    before that streams meanwhile. The state its updates hand back must keep the new language and presenter
    mode (a copy taken as the run started put the page's figures back in English and normal type)."""
    state = {**common.new_state(), "recipe": random_recipe(NANO, seed=0)}
    updates = generate_tab.generate_tokens(state, "Hello there", 0.8, 40, 1.0, 12, 1, False)
    first = next(updates)
    prefs.apply_prefs('{"lang": "zh-CN", "present": true}', state, {})  # the page's preferences, mid-run
    *_, last = updates
    for update in (first, last):
        assert update[0]["lang"] == "zh-CN" and update[0]["present"] is True
        assert update[0]["run_id"]
    assert "完成" in last[2]  # the run's last status, in the language chosen while it ran


def test_every_bold_span_closes_in_both_languages():
    """A bold span that ends on CJK punctuation right before a character (``**解码路径：**表``) is not closed by
    CommonMark's flanking rules: the page shows the asterisks. The colon goes after the span instead."""
    md = MarkdownIt("commonmark")
    for table in (EN, ZH):
        unclosed = [k for k, v in table.items() if isinstance(v, str) and "**" in md.renderInline(v)]
        assert not unclosed, unclosed
