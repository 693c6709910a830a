"""The lesson on heads forming (server.lesson_training): the recorded run it reads is the current
default induction run's, its timeline is whole, and its questions' answers and quoted numbers are read
from that timeline (tests/integration/test_heads_timeline.py trains the run again and checks the file)."""

import numpy as np
import pytest

from playground.server import lesson_training as LT
from playground.server import lessons
from playground.training import head_watch, induction_run
from tests.lesson_figures import library_answer
from tests.tiny_models import random_model

PROMPT = "The cat sat on the mat."


def test_the_recorded_run_is_the_default_induction_run():
    rec = induction_run.recorded()
    run, tcfg = rec["run"], induction_run.train_config()
    assert (run["steps"], run["seed"], run["batch_size"], run["block_size"], run["lr"]) == (
        tcfg.steps,
        tcfg.seed,
        tcfg.batch_size,
        tcfg.block_size,
        tcfg.lr,
    )
    assert (run["every"], run["repeat_share"]) == (induction_run.WATCH_EVERY, induction_run.MIX.share)
    assert (run["model"], run["corpus"]) == ("nano", induction_run.CORPUS)


def test_the_recorded_timeline_is_whole_and_its_phase_change_is_its_own():
    tl = induction_run.recorded()["timeline"]
    cfg = induction_run.MODEL
    steps = tl["steps"]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == induction_run.STEPS
    for key in ("previous_token", "induction", "first_token"):
        a = np.asarray(tl[key])
        assert a.shape == (len(steps), cfg.n_layers, cfg.n_heads) and ((a >= 0) & (a <= 1)).all()
    gap = np.asarray(tl["late_loss"]) - np.asarray(tl["early_loss"])
    np.testing.assert_allclose(tl["in_context_gap"], gap, atol=2e-4)
    assert tl["phase_change"] == head_watch.phase_change(steps, [np.asarray(x) for x in tl["induction"]])
    loss = induction_run.recorded()["train_loss"]
    assert loss["steps"] == steps[1:] and len(loss["loss"]) == len(steps) - 1


def test_the_questions_answer_from_the_recorded_run_whatever_the_model():
    lesson = lessons.find("heads-forming")[0]
    tl = induction_run.recorded()["timeline"]
    for model in (random_model(seed=3), random_model(seed=4, n_layers=3, emb_dim=48)):
        for step in lesson.steps:
            q, _ = lessons.ask(step, model, PROMPT)
            assert q.answer == library_answer(step, model, PROMPT, q)
            assert q.view["kind"] == "head_curves" and q.target["tab"] == "train"
            assert q.target["heads_step"] in tl["steps"]
    phase = lessons.ask(lesson.steps[1], random_model(seed=3), PROMPT)[0]
    assert phase.fields["step"] == f"{tl['phase_change']['step']:,}"
    at = tl["steps"].index(tl["phase_change"]["step"])
    layer, head = tl["phase_change"]["layer"], tl["phase_change"]["head"]
    assert float(phase.fields["to"]) - float(phase.fields["from"]) == pytest.approx(
        tl["phase_change"]["rise"], abs=0.011
    )
    assert phase.fields["to"] == f"{tl['induction'][at][layer][head]:.2f}"


def test_step_choices_spread_over_the_run_and_keep_away_from_the_answer():
    steps = list(range(0, 701, 10))
    for answer in (40, 300, 550, 700):
        got = LT.step_choices(answer, steps)
        assert answer in got and len(got) == 4 and got == sorted(got)
        assert all(abs(s - answer) >= 700 / 8 for s in got if s != answer)
        assert set(got) <= set(steps)
