"""The Train tab's handlers: corpus choices, live curve, stop keeps what was learned, use the result."""

import html
import re

import pytest

from playground.server.jobs import JOBS
from playground.server.model_cache import CACHE
from playground.ui import common
from playground.ui.train import settings as train_settings
from playground.ui.train import tab as train_tab

pytestmark = pytest.mark.usefixtures("training_on_every_core")

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60


def test_train_on_pasted_text_lowers_loss_and_becomes_the_model():
    outs = list(train_tab.train_model({"job": None, "recipe": None}, "nano", "paste", None, TEXT, 25, 3e-3))
    train_state, fig, progress, message, samples = outs[-1][:5]
    assert "Finished after 25 steps" in message
    assert "step 25 / 25" in progress
    # what the model writes from the same prompt and seed, before and after (tests/unit/test_train_samples.py
    # checks they are generate() on the initial and the trained weights)
    assert "Before training (step 0)" in samples and "After 25 steps" in samples
    texts = re.findall(r"data-step='(\d+)' data-text='([^']*)'", samples)
    assert texts[0][0] == "0" and texts[1][0] == "25" and texts[0][1] != texts[1][1]
    names = [t.name for t in fig.data]
    train_trace = fig.data[0]
    assert train_trace.y[-1] < 0.7 * train_trace.y[0], (train_trace.y[0], train_trace.y[-1])
    assert any("unigram" in (n or "") for n in names) or fig.layout.shapes
    state = common.new_state()
    out = train_tab.use_trained(state, train_state)
    assert "Now using" in out[1]
    model = CACHE.get(out[0]["recipe"])
    assert model.cfg.n_layers == 2
    assert "25 steps" in out[0]["recipe"]["label"]


@pytest.fixture
def no_time_limit(monkeypatch):
    """Long runs that a test stops itself: the time limit (and the refusal by estimate) out of the way."""
    monkeypatch.setenv("PLAYGROUND_TRAIN_MINUTES", "10000")


def test_stop_keeps_what_was_learned(no_time_limit):
    gen = train_tab.train_model({"job": None, "recipe": None}, "nano", "paste", None, TEXT, 5000, 3e-3)
    first = next(gen)
    train_state = first[0]
    assert train_state["job"] in JOBS
    while not JOBS[train_state["job"]].train_points:
        next(gen)
    assert "Stopping" in train_tab.stop_training(train_state)
    outs = list(gen)
    final_state, _, _, message, _ = outs[-1][:5]
    assert "Stopped after" in message
    steps = int(message.split("after ")[1].split(" steps")[0])
    assert 1 <= steps < 5000
    assert final_state["recipe"] is not None
    assert train_state["job"] not in JOBS
    assert "No training is running" in train_tab.stop_training(final_state)


def test_closing_the_tab_stops_the_thread(no_time_limit):
    gen = train_tab.train_model({"job": None, "recipe": None}, "nano", "paste", None, TEXT, 5000, 3e-3)
    job = JOBS[next(gen)[0]["job"]]
    gen.close()  # what Gradio does when the client disconnects
    assert job.done.wait(60)
    assert job.trainer.step_count < 5000


def test_a_run_waiting_for_a_slot_is_told_its_place_and_may_leave(no_time_limit, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_TRAININGS", "1")
    first = train_tab.train_model({"job": None, "recipe": None}, "nano", "paste", None, TEXT, 5000, 3e-3)
    running = JOBS[next(first)[0]["job"]]
    while not running.train_points:
        next(first)
    second = train_tab.train_model({"job": None, "recipe": None}, "nano", "paste", None, TEXT, 5000, 3e-3)
    state, _, _, message, _ = next(second)[:5]
    assert "you are number 1 in the queue (1 of 1 runs that train at once are running" in message, message
    assert "each may take up to 166 h 40 min" in message and "Yours starts within 166 h" in message
    assert "Stopping" in train_tab.stop_training(state)  # Stop while waiting: it leaves the queue
    assert "Left the queue before the run started: nothing was trained" in list(second)[-1][3]
    first.close()
    assert running.done.wait(60)


@pytest.mark.parametrize(
    "preset, source, pasted, steps, lr, message",
    [
        ("nano", "paste", "too short", 10, 1e-3, "too short"),
        ("nano", "paste", "   ", 10, 1e-3, "empty"),
        ("nano", "upload", "", 10, 1e-3, "No file was uploaded"),
        ("nano", "paste", TEXT, 0, 1e-3, "Steps must be between 1 and 5,000"),
        ("nano", "paste", TEXT, 10, -1, "learning rate must be in (0, 1]"),
        ("nano", "paste", TEXT, "many", 1e-3, "Steps must be a number"),
    ],
)
def test_bad_training_requests_get_messages(preset, source, pasted, steps, lr, message):
    outs = list(train_tab.train_model({"job": None, "recipe": None}, preset, source, None, pasted, steps, lr))
    assert len(outs) == 1
    assert message.lower() in outs[0][3].lower(), outs[0][3]
    # An earlier run's curve and progress do not stay up as if they were this run's.
    _, fig, progress, _, _ = outs[0][:5]
    assert progress == "" and not fig.data
    assert "Training did not start" in fig.layout.annotations[0].text


def test_training_a_model_over_the_memory_budget_is_refused(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "0.5")
    outs = list(train_tab.train_model({"job": None, "recipe": None}, "gpt2-small", "paste", None, TEXT, 10, 1e-3))
    assert "memory budget" in outs[0][3]


def test_use_trained_before_training():
    state = common.new_state()
    out = train_tab.use_trained(state, {"job": None, "recipe": None})
    assert out[0] is state and "Train a model first" in out[1]


@pytest.mark.slow
def test_the_default_lesson_learns_something_visible():
    """The tab's defaults on its default corpus: the validation loss ends below where it started and
    below the corpus's unigram baseline, and the finishing message says both."""
    outs = list(
        train_tab.train_model(
            {"job": None, "recipe": None},
            train_settings.DEFAULT_PRESET,
            train_settings.CORPUS_CHOICES[0],
            None,
            None,
            train_settings.DEFAULT_STEPS,
            train_settings.DEFAULT_LR,
            train_settings.DEFAULT_BATCH,
        )
    )
    state, fig, progress, message, samples = outs[-1][:5]
    val = [y for trace in fig.data if trace.name and "valid" in trace.name.lower() for y in trace.y]
    start, end, unigram = (
        float(x)
        for x in re.search(
            r"Validation loss ([\d.]+) → ([\d.]+) nats/token \(unigram baseline ([\d.]+)\)", message
        ).groups()
    )
    assert end < start - 3 and end < unigram, message
    assert "Overfitting" not in message
    assert val and abs(val[-1] - end) < 0.01
    # ...and what it writes after the run reads as English words, not newlines and quotes (the corpus's
    # e-text line breaks are joined: training.corpus.HARD_WRAPPED); README says what it wrote in our run.
    after = re.findall(r"data-kind='after' data-step='(\d+)' data-text='([^']*)'", samples)
    assert after and after[0][0] == str(train_settings.DEFAULT_STEPS)
    text = html.unescape(after[0][1])
    words = re.findall(r"[A-Za-z]{2,}", text)
    common = {"the", "and", "to", "of", "her", "he", "she", "was", "be", "not", "his", "had", "have", "it", "that"}
    assert len(words) >= 15 and text.count("\n") <= 8 and sum(w.lower() in common for w in words) >= 5, text


def test_the_llama_style_preset_trains_and_becomes_the_model():
    """The Train tab offers the Model tab's presets, the tiny Llama-3.2-style one included (RoPE, RMSNorm,
    SwiGLU, GQA): its loss falls and the trained model keeps its switches."""
    from playground.engine.presets import MODERN_PRESETS

    outs = list(train_tab.train_model({"job": None, "recipe": None}, "llama-3.2-style", "paste", None, TEXT, 20, 3e-3))
    train_state, fig, _, message = outs[-1][:4]
    assert "Finished after 20 steps" in message, message
    loss = fig.data[0].y
    assert loss[-1] < 0.8 * loss[0], (loss[0], loss[-1])
    out = train_tab.use_trained(common.new_state(), train_state)
    assert CACHE.get(out[0]["recipe"]).cfg == MODERN_PRESETS["llama-3.2-style"]
