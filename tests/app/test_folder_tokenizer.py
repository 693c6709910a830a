"""A Llama- or Qwen3-family checkpoint folder in the app, with its own tokenizer (issue 38): the Model tab loads
it, and Generate, the chips, the step view and the heatmaps read the folder's tokenizer.json, not GPT-2's BPE.
The folders are tiny random models built offline with transformers' ``save_pretrained``."""

import html
import json

import pytest
import torch

from playground.engine.hf_tokenizer import FolderTokenizer
from playground.engine.tokenizer import load_tokenizer
from playground.server.model_cache import CACHE
from playground.server.runs import get_run
from playground.ui import attention_view, common, model_switch
from playground.ui.chips import all_chips
from playground.ui.generate import tab as generate_tab
from playground.ui.inside import data as inside_data
from playground.ui.model import tab as model_tab
from tests.helpers import plain_text
from tests.tiny_models import write_llama_folder

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

PROMPT = "the cat sat on the mat"


def _chips(html_text):
    import re
    from html import unescape

    return [
        (unescape(text), unescape(label))
        for text, label in re.findall(r"<span class='pg-chip [^>]*>(.*?)<small>(.*?)</small>", html_text, re.S)
    ]


@pytest.fixture(params=["llama", "qwen3"])
def loaded(request, tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MODEL_DIRS", str(tmp_path / "models"))
    folder = tmp_path / "models" / f"tiny-{request.param}"
    write_llama_folder(folder, request.param)
    fields = [getattr(model_switch.FORM_PRESETS["nano"], f) for f in model_switch.FIELDS]
    out = model_switch.Switch(
        *model_tab.build_model(common.new_state(), "hub", 0, str(folder), None, "float32", *fields)
    )
    assert "Ready" in out.message, plain_text(out.message)
    return folder, out


def test_the_model_tab_loads_the_folder_with_its_own_tokenizer(loaded):
    folder, out = loaded
    model = CACHE.get(out.state["recipe"])
    assert isinstance(model.tokenizer, FolderTokenizer)
    assert model.cfg.tokenizer == "own" and model.cfg.kv_heads == 2 and model.cfg.n_heads == 4
    assert "4 query heads share 2 key/value heads" in plain_text(out.tying_md)
    assert all(row[4] == "✓" for row in out.breakdown_df)  # formula = measured on the loaded checkpoint


def test_generate_chips_and_steps_read_the_folders_tokenizer(loaded):
    folder, out = loaded
    model = CACHE.get(out.state["recipe"])
    tok = FolderTokenizer(folder / "tokenizer.json")
    final = list(generate_tab.generate_tokens(out.state, PROMPT, 0.0, 0, 1.0, 8, 1, True))[-1]
    run = get_run(final[0]["run_id"])
    assert run.prompt_ids == tok.encode(PROMPT) != load_tokenizer().encode(PROMPT)
    # The same greedy continuation as transformers' own model from the same folder
    # (argmax step by step: the config's eos id, a letter of this vocabulary, would stop transformers' generate)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    want = list(run.prompt_ids)
    with torch.no_grad():
        for _ in range(8):
            want.append(int(hf(torch.tensor([want])).logits[0, -1].argmax()))
    assert run.token_ids == want
    chips = _chips(all_chips(run))
    assert [text for text, _ in chips] == [tok.piece(i).display for i in run.token_ids]
    assert [label.split(" ")[0].lstrip("#") for _, label in chips] == [str(i) for i in run.token_ids]
    step = generate_tab.inspect_step(final[0], 0)
    assert tok.piece(run.steps[0].token_id).display in step[2]
    assert f"{tok.n_vocab:,}" in step[2]  # the step's vocabulary is the folder's, not GPT-2's 50,257
    data = generate_tab.run_data(final[0])
    assert data["text"] == tok.decode(run.token_ids[len(run.prompt_ids) :])
    assert model.tokenizer.n_vocab == tok.n_vocab


def test_the_heatmaps_label_the_folders_tokens_per_query_head(loaded):
    folder, out = loaded
    tok = FolderTokenizer(folder / "tokenizer.json")
    final = list(generate_tab.generate_tokens(out.state, PROMPT, 0.0, 0, 1.0, 4, 1, True))[-1]
    run = get_run(final[0]["run_id"])
    fig, _, _, msg = attention_view.attention_views(final[0], attention_view.VIEWS[0], 1, 3, False, None)
    labels = [p.display for p in tok.pieces(run.token_ids)]
    assert list(fig.layout.xaxis.ticktext) == labels
    model = CACHE.get(out.state["recipe"])
    group = model.cfg.n_heads // model.cfg.kv_heads  # 4 query heads on 2 KV heads: 2 to each
    first = 3 // group * group
    title = fig.layout.title.text.replace("<br>", " ")  # (titles wrap to the figure's width)
    assert f"reads KV head {3 // group}, shared by query heads {first}–{first + group - 1}" in title
    grid, *_ = attention_view.attention_views(final[0], "all", 0, 0, False, None)
    assert len([t for t in grid.data if t.type == "heatmap"]) == model.cfg.n_heads  # every query head drawn
    titles = grid.layout.annotations[: model.cfg.n_heads]
    assert [t.text for t in titles] == [f"head {h} · KV {h // group}" for h in range(model.cfg.n_heads)]
    colours = [t.font.color for t in titles]
    assert all((colours[h] == colours[j]) == (h // group == j // group) for h in range(4) for j in range(4))
    zh = attention_view.attention_views({**final[0], "lang": "zh-CN"}, "all", 0, 0, False, None)[0]
    assert zh.layout.annotations[
        3
    ].text == f"头 3 · KV {3 // group}" and "个查询头共用" in zh.layout.title.text.replace("<br>", "")


def test_the_inside_tab_lens_and_attribution_read_the_folders_tokens(loaded):
    folder, out = loaded
    tok = FolderTokenizer(folder / "tokenizer.json")
    final = list(generate_tab.generate_tokens(out.state, PROMPT, 0.0, 0, 1.0, 4, 1, True))[-1]
    lens = inside_data.lens_data(final[0])
    assert "error" not in lens, lens
    run = get_run(final[0]["run_id"])
    assert lens["tokens"] == [p.display for p in tok.pieces(run.token_ids)]
    # attribution through the final RMSNorm: the parts sum to the model's own logit, the target in its own words
    d = inside_data.attribution_data(final[0], None)
    assert "error" not in d, d
    assert d["total"] == pytest.approx(d["model_logit"], abs=1e-4)
    assert d["target"] == tok.piece(d["target_id"]).display
    from playground.ui.inside import tab as inside_tab

    for lang, words in (("en", "final RMSNorm's rms"), ("zh-CN", "最终 RMSNorm 的 rms")):
        view = inside_tab.attribution_view({**final[0], "lang": lang}, None, None)
        assert words in view.dla_md, view.dla_md
        assert "final_norm shift" not in str(view.dla_fall.data[0].x)  # an RMSNorm has no shift


def test_the_views_on_gpt2s_tokenizer_say_why_in_both_languages(loaded):
    from playground.server import lessons
    from playground.ui.compare import tab as compare_tab

    folder, out = loaded
    model = CACHE.get(out.state["recipe"])
    final = list(generate_tab.generate_tokens(out.state, PROMPT, 0.0, 0, 1.0, 4, 1, True))[-1]
    for lang, text in (("en", "still reads text with GPT-2's tokenizer"), ("zh-CN", "仍用 GPT-2 的分词器读文本")):
        state = {**final[0], "lang": lang}
        scored = compare_tab.score_a(state, None, "run", "", None, False, 0, progress=lambda *a, **k: None)
        assert text in html.unescape(plain_text(scored[0])), scored[0]
    with pytest.raises(ValueError, match="written for GPT-2's tokenizer") as caught:
        lessons.ask(lessons.lessons()[0].steps[0], model, PROMPT)
    assert caught.value.fields["n"] == model.tokenizer.n_vocab


def test_the_tokenizer_tab_says_it_shows_gpt2s_bpe_not_the_models(loaded):
    from playground.ui.tokenizer import tab as tokenizer_tab

    folder, out = loaded
    shown = tokenizer_tab.show_tokens("hello", out.state)
    assert f"The model in use ({folder.name}) reads its own tokenizer.json" in html.unescape(shown.summary)
    zh = tokenizer_tab.show_tokens("hello", {**out.state, "lang": "zh-CN"})
    assert f"当前模型（{folder.name}）使用它自己的 tokenizer.json" in html.unescape(zh.summary)
    gpt2 = tokenizer_tab.show_tokens("hello", common.new_state())
    assert "tokenizer.json" not in gpt2.summary


def test_the_folders_model_is_named_by_its_family_not_as_openais(loaded):
    from playground.ui.model_words import describe_recipe

    folder, out = loaded
    family = json.loads((folder / "config.json").read_text())["model_type"]
    assert describe_recipe(out.state["recipe"]) == f"{family} weights from the folder {folder} (its own tokenizer.json)"
    assert "OpenAI" not in plain_text(out.summary)
    assert f"{family} 权重" in describe_recipe(out.state["recipe"], "zh-CN")
