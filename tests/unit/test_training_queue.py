"""Training runs share the machine: a run that cannot finish in the time limit is refused before it
starts, a run over it stops keeping what it learned, a few train at once and the others wait in
order, knowing their place (playground.server.jobs, playground.training.estimate)."""

import time

import pytest

from playground import PRESETS
from playground.errors import UserError
from playground.runtime.memory import BUDGET
from playground.server import jobs
from playground.training import estimate

NANO = PRESETS["nano"]
TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60


@pytest.fixture
def queue(monkeypatch):
    """A fresh queue of two slots; every job a test starts is stopped and waited for."""
    monkeypatch.setattr(jobs, "QUEUE", jobs.TrainingQueue())
    monkeypatch.setenv("PLAYGROUND_MAX_TRAININGS", "2")
    started = []
    yield started
    for job in started:
        job.stop()
    for job in started:
        assert job.done.wait(60)


def nano_job(steps=2000, **kw):
    return jobs.TrainingJob(NANO, TEXT, "pasted", steps=steps, lr=1e-3, batch_size=1, block_size=32, **kw)


def test_the_lower_bound_counts_the_runs_arithmetic():
    tcfg = jobs.training_config(PRESETS["gpt2-small"], 1, 1e-3, batch_size=64, block_size=128)
    step, evaluation = estimate.training_flops(PRESETS["gpt2-small"], tcfg)
    assert step == 6 * 124_439_808 * 64 * 128  # 6.1 TFLOP: forward and backward of 8,192 tokens
    assert evaluation == 2 * 124_439_808 * 64 * 128 * tcfg.eval_batches
    rate = 1e11
    assert estimate.least_seconds(PRESETS["gpt2-small"], tcfg, rate=rate) == pytest.approx(
        (step + 2 * evaluation) / rate
    )
    assert estimate.best_flops_per_second() > 1e8  # measured: any machine does 0.1 GFLOP/s


def test_a_run_that_cannot_finish_in_the_limit_is_refused_at_once(monkeypatch):
    """gpt2-small, one step at batch 64 × 128, did not finish in 300 s (11.8 GiB), and a second request
    waited 282 s only to be refused. Now its arithmetic alone refuses it, before any memory is taken."""
    monkeypatch.setenv("PLAYGROUND_TRAIN_MINUTES", "2")
    monkeypatch.setattr(estimate, "best_flops_per_second", lambda: 50e9)  # a 2-core CPU's best, roughly
    held = BUDGET.used()
    t0 = time.perf_counter()
    with pytest.raises(UserError) as refused:
        jobs.TrainingJob(PRESETS["gpt2-small"], TEXT, "pasted", steps=1, lr=1e-3, batch_size=64, block_size=128)
    assert time.perf_counter() - t0 < 2
    assert refused.value.key == "train.step_too_long"
    tcfg = jobs.training_config(PRESETS["gpt2-small"], 1, 1e-3, batch_size=64, block_size=128)
    minutes = (6 + 2 * 2 * tcfg.eval_batches) * 124_439_808 * 64 * 128 / 50e9 / 60  # a step and two evaluations
    assert f"at least {minutes:.1f} minutes" in str(refused.value) and "limit of 2 minutes" in str(refused.value)
    assert BUDGET.used() <= held + 2**20  # nothing was built


def test_the_refusal_says_how_many_steps_fit(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_TRAIN_MINUTES", "1")
    timing = estimate.StepTiming(first_step_s=0.5, step_s=0.1, eval_s=0.2, n_steps=2)
    monkeypatch.setattr(estimate, "known_step_time", lambda cfg, tcfg: timing)  # the estimate the tab measured
    with pytest.raises(UserError, match=r"would take about 1\.\d minutes here; .* at most 1 minutes") as refused:
        nano_job(steps=1000)
    assert refused.value.key == "train.too_long"
    assert refused.value.fields["fit"] == estimate.steps_for_seconds(timing, 60) < 1000


def test_a_run_over_the_time_limit_stops_and_keeps_what_it_learned(queue, monkeypatch):
    monkeypatch.setattr(jobs, "check_training_time", lambda cfg, tcfg: 0.0)  # an estimate that was wrong
    monkeypatch.setenv("PLAYGROUND_TRAIN_MINUTES", str(8 / 60))
    t0 = time.monotonic()
    job = nano_job(steps=5000).start()
    queue.append(job)
    assert job.done.wait(120)
    assert job.timed_out and not job.error
    assert 0 < job.trainer.step_count < 5000  # 5,000 steps take minutes; it stopped after about 8 s
    assert job.last_event.kind == "done"
    assert time.monotonic() - t0 < 8 + 60  # the limit, and one step and the start on a busy machine


def test_two_runs_train_at_once_and_the_third_knows_its_place(queue):
    """Three concurrent nano runs ran one after another with no message about waiting."""
    first, second, third = (nano_job() for _ in range(3))
    for job in (first, second, third):
        queue.append(job.start())
    deadline = time.monotonic() + 60
    while jobs.QUEUE.running() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert jobs.QUEUE.running() == 2
    assert (jobs.QUEUE.position(first), jobs.QUEUE.position(second), jobs.QUEUE.position(third)) == (0, 0, 1)
    limit = jobs.time_limit_seconds()
    assert 0 < jobs.QUEUE.wait_bound(third) <= limit  # a slot frees by the time limit at the latest
    assert not third.train_points  # it waits: nothing trained yet
    first.stop()
    assert first.done.wait(60)
    while not third.train_points and time.monotonic() < deadline:
        time.sleep(0.05)
    assert jobs.QUEUE.position(third) == 0 and third.train_points


def test_a_full_queue_is_refused_and_a_stopped_waiter_leaves_it(queue, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_TRAININGS", "1")
    monkeypatch.setattr(jobs, "MAX_WAITING", 1)
    running, waiting = nano_job().start(), nano_job().start()
    queue.extend([running, waiting])
    with pytest.raises(UserError, match="1 training runs are already waiting for the 1 that train at once"):
        nano_job().start()
    waiting.stop()  # Stop (or a closed tab) while it waits
    assert waiting.done.wait(10) and waiting.trainer.step_count == 0
    assert jobs.QUEUE.position(waiting) == 0
