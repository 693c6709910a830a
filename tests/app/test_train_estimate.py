"""The Train tab for a lesson (issue 12): a time estimate computed from real steps timed on this
machine (the arithmetic checked with a scripted clock), and a default corpus that works offline."""

import hashlib

import pytest

from playground import PRESETS
from playground.server.jobs import training_config
from playground.training import corpus
from playground.training.estimate import (
    StepTiming,
    estimate_seconds,
    evaluations,
    format_duration,
    measure_step_time,
    steps_for_seconds,
)
from playground.ui.train import settings as ts
from playground.ui.train import tab as tt

NANO = PRESETS["nano"]


class ScriptedClock:
    """A timer that returns the given times in order and counts its calls."""

    def __init__(self, *times):
        self.times, self.calls = iter(times), 0

    def __call__(self):
        self.calls += 1
        return next(self.times)


def test_evaluations_match_what_the_training_loop_does():
    from playground.training.trainer import Trainer

    for steps, interval in [(80, 5), (7, 5), (5, 5), (1, 5), (200, 10)]:
        expected = 1 + len([s for s in range(1, steps + 1) if s % interval == 0 or s == steps])
        assert evaluations(steps, interval) == expected
    # and against a real (tiny) run: count the evaluate() calls
    tcfg = training_config(NANO, 7, 1e-3, batch_size=1, block_size=8)
    import torch

    ids = torch.randint(NANO.vocab_size, (200,), generator=torch.Generator().manual_seed(0))
    from playground.training.trainer import build_model

    trainer = Trainer(build_model(NANO, seed=0), ids[:150], ids[150:], tcfg)
    trainer.run()
    assert len(trainer.val_history) == evaluations(7, tcfg.eval_interval)


def test_estimate_arithmetic():
    timing = StepTiming(first_step_s=3.0, step_s=0.5, eval_s=0.25, n_steps=2)
    # the first step, 79 more at 0.5 s, and 1 + 16 evaluations at 0.25 s
    assert estimate_seconds(timing, 80, 5) == pytest.approx(3.0 + 79 * 0.5 + 17 * 0.25)
    assert estimate_seconds(timing, 1, 5) == pytest.approx(3.0 + 2 * 0.25)
    with pytest.raises(ValueError):
        estimate_seconds(timing, 0, 5)
    n = steps_for_seconds(timing, 60)
    assert estimate_seconds(timing, n, max(5, n // 20)) <= 60 < estimate_seconds(timing, n + 1, max(5, (n + 1) // 20))
    assert format_duration(42.4) == "42 s" and format_duration(200) == "3 min 20 s"
    assert (
        format_duration(3.25) == "3.2 s"
        and format_duration(0.123) == "0.12 s"
        and format_duration(3900) == "1 h 05 min"
    )


def test_measurement_times_real_steps_with_the_given_clock():
    tcfg = training_config(NANO, 100, 1e-3, batch_size=1, block_size=16)
    clock = ScriptedClock(10.0, 14.0, 17.0, 18.5)  # first step 4 s, two more 3 s, evaluation 1.5 s
    timing = measure_step_time(NANO, tcfg, timer=clock, n_steps=2)
    assert clock.calls == 4
    assert timing == StepTiming(first_step_s=4.0, step_s=1.5, eval_s=1.5, n_steps=2)
    # with the real clock every part is a positive time
    real = measure_step_time(NANO, tcfg, n_steps=1)
    assert real.first_step_s > 0 and real.step_s > 0 and real.eval_s > 0


def test_tab_estimate_is_the_measured_timing_times_the_run():
    clock = ScriptedClock(0.0, 2.0, 3.0, 3.5)  # 2 s first step, 0.5 s a step, 0.5 s an evaluation
    e = ts.estimate(ts.DEFAULT_PRESET, 80, 1, timer=clock)
    tcfg = training_config(NANO, 80, ts.DEFAULT_LR, batch_size=1)
    assert e["steps"] == 80 and e["batch_size"] == 1 and e["block_size"] == 128
    assert e["evaluations"] == evaluations(80, tcfg.eval_interval) == 17
    assert e["seconds"] == pytest.approx(2.0 + 79 * 0.5 + 17 * 0.5)
    assert ts.estimate_api("gpt-5", 80)["error"] == "Unknown model 'gpt-5'."
    assert "Steps must be between 1 and 5,000" in ts.estimate_api(ts.DEFAULT_PRESET, 0)["error"]
    assert "Batch size must be between 1 and 64" in ts.estimate_api(ts.DEFAULT_PRESET, 10, 0)["error"]
    assert "⚠️" in ts.estimate_html(ts.DEFAULT_PRESET, "many")


def test_estimate_html_says_the_numbers(monkeypatch):
    from playground.training import estimate as train_estimate

    timing = StepTiming(first_step_s=1.0, step_s=0.5, eval_s=0.25, n_steps=2)
    monkeypatch.setattr(train_estimate, "cached_step_time", lambda cfg, tcfg: timing)
    html = ts.estimate_html(ts.DEFAULT_PRESET, 80, 4)
    seconds = 1.0 + 79 * 0.5 + 17 * 0.25
    assert f"data-seconds='{seconds:.1f}'" in html
    assert "About 45 s" in html and "80 steps × 0.50 s + 17 evaluations × 0.25 s" in html and "4 × 128" in html


# ----------------------------------------------------------------------------------------------
# The offline default corpus


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*a, **k):
        raise OSError("network is off in this test")

    monkeypatch.setattr(corpus, "_fetch_url", refuse)
    monkeypatch.setattr("urllib.request.urlopen", refuse)
    monkeypatch.setattr("socket.create_connection", refuse)


def test_default_corpus_is_bundled_public_domain_text(no_network):
    assert ts.CORPUS_CHOICES[0] == "austen"
    text, name = ts.corpus_text(ts.CORPUS_CHOICES[0], None, None)
    assert text.startswith("PRIDE AND PREJUDICE") and "It is a truth universally acknowledged" in text
    assert name == "Pride and Prejudice"
    data = corpus.BUNDLED_CORPORA["austen"].read_bytes()
    assert hashlib.sha256(data).hexdigest() == "dfc684d4f857fa938268f9ab9c5567b64bd0691251eca959644adeabe6287a4d"
    assert hashlib.sha256(data).hexdigest() != corpus.TINY_SHAKESPEARE_SHA256
    # the e-text's line breaks inside paragraphs are spaces: the model learns words, not typesetting
    assert "that a single man in possession of a good fortune, must be in want of a wife.\n\n" in text
    prepared = corpus.prepare_corpus(text, 128)
    assert prepared.n_tokens == 155_887  # big enough that the default lesson's run never repeats it much
    assert ts.DEFAULT_STEPS * ts.DEFAULT_BATCH * 128 < 1.5 * len(prepared.train_ids)


def test_the_small_bundled_corpus_is_public_domain_text(no_network):
    text, name = ts.corpus_text("aesop", None, None)
    assert "THE FOX AND THE GRAPES" in text and "Twinkle, twinkle, little star" in text and "床前明月光" in text
    assert name == "Aesop's fables & nursery rhymes"
    data = corpus.BUNDLED_CORPORA["aesop"].read_bytes()
    assert len(data) < 64 * 1024  # small enough to ship
    assert hashlib.sha256(data).hexdigest() != corpus.TINY_SHAKESPEARE_SHA256
    assert "First Citizen" not in text and "ROMEO" not in text  # not Tiny Shakespeare
    prepared = corpus.prepare_corpus(text, 128)  # long enough for the tab's 128-token windows
    held_out = prepared.val_ids.tolist()
    from playground.engine.tokenizer import load_tokenizer

    assert load_tokenizer().decode(held_out).isascii()  # the held-out tenth is English, like most of it
    assert (corpus.BUNDLED_CORPORA["aesop"].parent / "README.md").read_text().count("public domain") >= 2


def test_training_on_the_default_corpus_works_offline(no_network):
    outs = list(
        tt.train_model(
            {"job": None, "recipe": None}, ts.DEFAULT_PRESET, ts.CORPUS_CHOICES[0], None, None, 3, ts.DEFAULT_LR, 1
        )
    )
    state, fig, progress, message, _ = outs[-1][:5]
    assert "Finished after 3 steps" in message and state["recipe"] is not None
    assert "Pride and Prejudice" in state["recipe"]["label"]
    assert "Validation loss" in message and "unigram baseline" in message


def test_missing_bundled_corpus_and_unknown_source_get_messages(monkeypatch, tmp_path):
    monkeypatch.setitem(corpus.BUNDLED_CORPORA, "austen", tmp_path / "gone.txt")
    with pytest.raises(corpus.CorpusError, match="bundled training text is missing"):
        ts.corpus_text(ts.CORPUS_CHOICES[0], None, None)
    with pytest.raises(ValueError, match="Corpus must be one of"):
        ts.corpus_text("the internet", None, None)


def test_tab_defaults_are_the_lesson_run():
    assert (ts.DEFAULT_PRESET, ts.DEFAULT_STEPS, ts.DEFAULT_BATCH) == ("nano", 200, 8)
    assert ts.CORPUS_CHOICES == ["austen", "aesop", "upload", "paste", "shakespeare"]  # the ids API callers send


def test_a_page_loads_language_change_never_times_training_steps(monkeypatch):
    """Every page load sends a language change; the Train tab's redraw measures no estimate the
    page does not show yet (that would take the CPU from the page's first Generate), and one it
    shows is written again in the new language."""
    import gradio as gr

    from playground.training import estimate as train_estimate
    from playground.ui.train import tab as train_tab

    timed = []
    real = train_estimate.measure_step_time
    monkeypatch.setattr(train_estimate, "measure_step_time", lambda *a, **k: timed.append(1) or real(*a, **k))
    monkeypatch.setattr(train_estimate, "_CACHE", {})
    zh = {"lang": "zh-CN"}
    for nothing_shown in (None, ""):
        out = train_tab.relabel(zh, {"job": None}, "nano", 7, 1, nothing_shown)
        assert out.estimate == gr.skip() and timed == []
    shown = ts.estimate_html("nano", 7, 1)
    assert "data-seconds" in shown and len(timed) == 1
    again = train_tab.relabel(zh, {"job": None}, "nano", 7, 1, shown)
    assert "data-seconds" in again.estimate and "步" in again.estimate and len(timed) == 1  # (cached)
