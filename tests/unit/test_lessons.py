"""The lessons: every file parses, and every question's answer is the library's own figure for the
model and prompt it was asked of (recomputed here by another route), changing with either."""

import json
import math
from dataclasses import replace

import pytest
import torch

from playground.engine.config import PRESETS, count_parameters_analytic
from playground.engine.sampling import sampling_distribution
from playground.engine.tokenizer import load_tokenizer
from playground.inside.attention_maths import attention_maths
from playground.inside.effects import token_losses
from playground.inside.inspection import count_parameters, parameter_breakdown
from playground.inside.interventions import Intervention, run_with_hooks
from playground.inside.lenses import lens_cell
from playground.inside.scoring import score_ids
from playground.server import lessons
from playground.server.lesson_questions import QUESTIONS, VIEW_TABS, WORD_CHOICES, LessonError
from tests.tiny_models import random_model

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"
OTHER_PROMPT = "The cat sat on the mat, and the dog sat on the log, and then"


@pytest.fixture(scope="module")
def model():
    return random_model(seed=3)


def all_steps():
    return [(lesson, i, step) for lesson in lessons.lessons() for i, step in enumerate(lesson.steps)]


def asked(model, prompt=PROMPT):
    return {(lesson.id, i): lessons.ask(step, model, prompt)[0] for lesson, i, step in all_steps()}


def test_every_lesson_file_parses_in_order_with_both_languages():
    files = sorted(lessons.LESSONS_DIR.glob("*.json"))
    found = lessons.lessons()
    assert len(found) == len(files) >= 8
    assert [x.order for x in found] == sorted(x.order for x in found)
    assert [x.id for x in found][:3] == ["tokens", "embeddings", "attention"]
    for lesson, _, step in all_steps():
        assert step.question in QUESTIONS and step.view in VIEW_TABS
        for text in (lesson.title, step.text, step.ask, step.reveal):
            assert text["en"] and text["zh"] and text["en"] != text["zh"]
    # a step that names an unknown question type is refused with the file and step named
    raw = json.loads(files[0].read_text(encoding="utf-8"))
    raw["steps"][0]["question"]["type"] = "no_such_question"
    with pytest.raises(ValueError, match="bad.json step 1: question type 'no_such_question'"):
        lessons.parse_lesson(raw, "bad.json")
    raw["steps"][0]["question"]["type"] = "token_count"
    del raw["steps"][0]["text"]["zh"]
    with pytest.raises(ValueError, match="step 1 text: needs text in both languages"):
        lessons.parse_lesson(raw, "bad.json")


def test_every_step_asks_a_question_whose_view_texts_and_choices_fit(model):
    for lesson, i, step in all_steps():
        q, labels = lessons.ask(step, model, PROMPT)
        assert q.view["kind"] == step.view, (lesson.id, i)
        ids = [c for c, _ in q.choices]
        assert q.answer in ids and len(ids) == len(set(ids)) >= 2, (lesson.id, i, q.choices)
        assert not q.words or set(ids) <= set(WORD_CHOICES)
        for lang in ("en", "zh-CN"):  # every field the texts name is one the question computed
            assert "{" not in lessons.fill(step.ask, lang, q) + lessons.fill(step.reveal, lang, q)


def test_answers_are_the_librarys_own_figures(model):
    tok = load_tokenizer()
    ids = tok.encode(PROMPT)
    T = len(ids)
    got = asked(model)
    assert got["tokens", 0].answer == str(T)
    assert got["tokens", 1].answer == str(len(tok.encode("unbelievable")))
    breakdown = {r.component: r.measured for r in parameter_breakdown(model).rows}
    assert got["embeddings", 0].answer == str(model.cfg.emb_dim)
    assert got["embeddings", 1].answer == f"{breakdown['token embedding']:,}"

    # one head: the earlier token its last query weighs most, by the attention maths of that head
    q = got["attention", 0]
    layer, head = (int(x) for x in q.fields["head"].split("."))
    row = attention_maths(model, ids, layer, head, T - 1)["softmax"]
    assert int(q.answer) == max(range(T - 1), key=lambda j: row[j])
    first = sum(attention_maths(model, ids, layer, head, t)["softmax"][0] for t in range(1, T)) / (T - 1)
    assert got["attention", 1].answer == ("yes" if first > 0.5 else "no")
    assert got["attention", 1].fields["p"] == f"{first:.0%}"

    # multi-head: the head of the most previous-token attention, and the loss without it
    prev = {
        (layer, h): sum(attention_maths(model, ids, layer, h, t)["softmax"][t - 1] for t in range(1, T))
        for layer in range(model.cfg.n_layers)
        for h in range(model.cfg.n_heads)
    }
    best = max(prev, key=prev.get)
    q = got["multihead", 0]
    assert (q.fields["layer"], int(q.answer)) == best
    plain = token_losses(run_with_hooks(model, ids, capture=False)[0], ids)
    ablated = token_losses(run_with_hooks(model, ids, Intervention(zero_heads=(best,)), capture=False)[0], ids)
    assert got["multihead", 1].answer == ("rise" if sum(ablated) > sum(plain) else "fall")

    # the block and the whole model, counted on the built modules
    attention = breakdown["attention QKV"] + breakdown["attention output"]
    assert got["block", 0].answer == f"{model.trf_blocks[0].ff.layers[0].out_features:,}"
    assert got["block", 1].answer == ("feed-forward" if breakdown["feed-forward"] > attention else "attention")
    assert got["gpt", 0].answer == f"{count_parameters(model):,}"
    small = PRESETS["gpt2-small"]
    q = got["gpt", 1]
    assert q.answer == f"{count_parameters_analytic(replace(small, tie_weights=False)):,}"
    assert q.answer_label == "163.0M" and q.fields["tied"] == f"{count_parameters_analytic(small) / 1e6:.1f}M"

    # the logit lens: the first layer whose top 3 holds the model's own next token
    target = lens_cell(model, ids, model.cfg.n_layers, T - 1, k=1)["top"][0][0]
    tops = [[t for t, _ in lens_cell(model, ids, i, T - 1, k=3)["top"]] for i in range(model.cfg.n_layers + 1)]
    assert int(got["gpt", 2].answer) == next(i for i, top in enumerate(tops) if target in top)

    # generating: the top token at temperature 0.3, and what cooling does to its probability
    logits = model(torch.tensor([ids]))[0, -1].detach()
    assert got["generating", 0].answer == str(int(torch.softmax(logits / 0.3, -1).argmax()))
    assert got["generating", 0].answer == str(int(sampling_distribution(logits, 0.3)["temperature"].argmax()))
    p1, p3 = float(torch.softmax(logits, -1).max()), float(torch.softmax(logits / 0.3, -1).max())
    assert got["generating", 1].answer == ("up" if p3 > p1 else "down")

    # training: the loss on the prompt, as scoring measures it
    mean = float(score_ids(model, ids).surprisal_bits.mean()) * math.log(2)
    assert got["training", 0].answer == ("below" if mean < math.log(model.cfg.vocab_size) else "above")
    assert got["training", 1].answer == f"{mean:.1f}"


def answers(model, prompt):
    return {key: q.answer for key, q in asked(model, prompt).items()}


def test_another_prompt_or_model_changes_the_answers(model):
    here = answers(model, PROMPT)
    other_prompt = answers(model, OTHER_PROMPT)
    other_model = answers(random_model(seed=4, n_layers=3, emb_dim=48), PROMPT)
    assert sum(here[k] != other_prompt[k] for k in here) >= 3
    assert sum(here[k] != other_model[k] for k in here) >= 3


def test_a_prompt_too_short_for_a_question_is_said_not_crashed(model):
    attention = lessons.find("attention")[0].steps[0]
    with pytest.raises(LessonError, match="at least 3 tokens") as e:
        lessons.ask(attention, model, "Hi")
    assert e.value.key == "lessons.short_prompt"
    with pytest.raises(LessonError, match="Type a prompt"):
        lessons.ask(attention, model, "")


def test_a_link_to_a_step_finds_it_and_falls_back_to_the_nearest():
    lesson, index = lessons.find("attention", "2")
    assert (lesson.id, index) == ("attention", 1)
    assert lessons.find("attention", 99)[1] == len(lesson.steps) - 1
    assert lessons.find("nope", "x") == (lessons.lessons()[0], 0)
