"""The lessons: every file parses, and every question's answer is the library's own figure for the
model and prompt it was asked of (recomputed here by another route), changing with either."""

import json
from dataclasses import replace

import pytest

from playground.engine.presets import PRESETS
from playground.engine.sizes import count_parameters_analytic
from playground.engine.tokenizer import load_tokenizer
from playground.server import lessons
from playground.server.lesson_kit import LessonError
from playground.server.lesson_questions import QUESTIONS, VIEW_TABS, WORD_CHOICES
from tests.lesson_figures import library_answer
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
    got = asked(model)
    for lesson, i, step in all_steps():
        assert got[lesson.id, i].answer == library_answer(step, model, PROMPT, got[lesson.id, i]), (lesson.id, i)
    # the numbers the texts quote come from the same figures
    small = PRESETS["gpt2-small"]
    q = got["gpt", 1]
    assert q.answer_label == f"{count_parameters_analytic(replace(small, tie_weights=False)) / 1e6:.1f}M" == "163.0M"
    assert q.fields["tied"] == f"{count_parameters_analytic(small) / 1e6:.1f}M" == "124.4M"
    assert got["tokens", 0].fields["n"] == len(load_tokenizer().encode(PROMPT))


def answers(model, prompt):
    return {key: q.answer for key, q in asked(model, prompt).items()}


def test_another_prompt_or_model_changes_the_answers(model):
    here = answers(model, PROMPT)
    other_prompt = answers(model, OTHER_PROMPT)
    other_model = answers(random_model(seed=4, n_layers=3, emb_dim=48), PROMPT)
    assert sum(here[k] != other_prompt[k] for k in here) >= 3
    assert sum(here[k] != other_model[k] for k in here) >= 3


def test_a_prompt_too_short_or_too_long_for_a_question_is_said_not_crashed(model):
    attention = lessons.find("attention")[0].steps[0]
    with pytest.raises(LessonError, match="at least 3 tokens") as e:
        lessons.ask(attention, model, "Hi")
    assert e.value.key == "lessons.short_prompt"
    with pytest.raises(LessonError, match="Type a prompt"):
        lessons.ask(attention, model, "")
    with pytest.raises(LessonError, match="up to 32 tokens; this one has 300") as e:  # TINY's context is 32
        lessons.ask(attention, model, " word" * 300)
    assert e.value.key == "lessons.long_prompt"


def test_a_link_to_a_step_finds_it_and_falls_back_to_the_nearest():
    lesson, index = lessons.find("attention", "2")
    assert (lesson.id, index) == ("attention", 1)
    assert lessons.find("attention", 99)[1] == len(lesson.steps) - 1
    assert lessons.find("attention", "x") == (lesson, 0)
    assert lessons.find(None) == (lessons.lessons()[0], 0)  # no id: the first lesson


@pytest.mark.parametrize("lesson_id", ["nope", "ATTENTION", " attention", "<b>x</b>", 7, ["attention"]])
def test_an_unknown_lesson_id_is_refused_by_name(lesson_id):
    with pytest.raises(LessonError) as e:
        lessons.find(lesson_id)
    assert e.value.key == "lessons.unknown" and "attention" in str(e.value) and repr(lesson_id)[:10] in str(e.value)


def test_a_choice_that_is_not_the_questions_is_refused_by_name(model):
    step = lessons.find("attention")[0].steps[0]
    question, _ = lessons.ask(step, model, PROMPT)
    first = question.choices[0][0]
    assert lessons.check_choice(question, first) == first
    for bad in ("no-such-choice", "<script>x</script>", None, 3, first + " "):
        with pytest.raises(LessonError) as e:
            lessons.check_choice(question, bad)
        assert e.value.key == "lessons.unknown_choice" and first in str(e.value)


def test_a_10_mb_prompt_is_refused_before_it_is_tokenized(model):
    import time

    step = lessons.find("attention")[0].steps[0]
    prompt = "word " * 2_000_000  # 10 MB
    t0 = time.perf_counter()
    with pytest.raises(LessonError) as e:
        lessons.ask(step, model, prompt)
    took = time.perf_counter() - t0
    assert e.value.key == "lessons.long_prompt_chars" and "10,000,000 characters" in str(e.value)
    assert took < 0.2, took


def test_a_revealed_probability_reads_as_the_chart_beside_it(model):
    """The revealed text and the chart write a probability with one formatter: a cooled top token's
    99.98% is not "100%" in the sentence while its bar reads 99.98%."""
    from playground.figures import token_probability_bars
    from playground.formats import format_prob

    ids = load_tokenizer().encode(PROMPT)
    q = QUESTIONS["next_token"](model, ids, None, {"temperature": 0.015})
    p = q.view["probs"][0]
    assert 0.999 < p < 0.99995 and q.fields["p"] == format_prob(p) != "100%"
    bars = token_probability_bars(q.view["labels"], q.view["probs"])
    assert q.fields["p"] in list(bars.data[0].text)
    cooled = QUESTIONS["top_prob_temperature"](model, ids, None, {"temperature": 0.015})
    assert cooled.fields["pt"] == format_prob(max(cooled.view["stages"]["T = 0.015"])) != "100%"


def test_the_path_patching_step_reads_the_library_and_breaks_only_the_key_side(model):
    """The induction circuit's step: its pair changes one token of the first copy only (the token
    before the one to copy), and every bar of its view is path patching's own figure."""
    from playground.inside.patching import check_pair
    from playground.inside.patching_paths import path_patching

    step = next(s for lesson, _, s in all_steps() if s.question == "path_patching_key")
    q, _ = lessons.ask(step, model, PROMPT)
    tok = load_tokenizer()
    patch = q.target["patch"]
    clean, corrupted = tok.encode(patch["clean"]), tok.encode(patch["corrupted"])
    differ = [i for i, (a, b) in enumerate(zip(clean, corrupted)) if a != b]
    assert len(clean) == len(corrupted) and len(differ) == 1
    n = min(len(tok.encode(PROMPT)), 24, model.cfg.context_length // 2)
    assert differ[0] < n and clean[differ[0]] == clean[-1]  # the last token's earlier copy is what changed
    assert q.target["sub"] == "inside-patching" and patch["via"] == "k"
    sender, receiver = (tuple(int(x) for x in patch[k].split(".")) for k in ("sender", "receiver"))
    assert sender[0] < receiver[0] and q.view["mark"] == sender[1]
    answer, wrong = (tok.encode(patch[key].replace("\\n", "\n")) for key in ("answer", "wrong"))
    pair = check_pair(model, clean, corrupted, answer[0], wrong[0])
    by_input = path_patching(model, pair, sender, receiver, "k")["by_input"]
    for via in ("q", "k", "v"):
        assert q.view["values"][via][sender[1]] == pytest.approx(by_input[via], abs=1e-5)
    assert q.fields["k"] == f"{by_input['k']:.0%}".replace("-0%", "0%")
