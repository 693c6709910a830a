"""A training run's samples come from the live model: the same prompt and seed before training, at
each logged step and at the end, so that "before" is exactly what generate() writes with the initial
weights and "after" what it writes with the trained ones; writing them leaves the training as it was
(playground.server.train_samples, playground.server.jobs)."""

import pytest

from playground import PRESETS
from playground.engine.sampling import generate
from playground.server import jobs
from playground.server.train_samples import SAMPLE_SEED, SAMPLE_SETTINGS, SAMPLE_TOKENS, sample_prompt_ids
from playground.training.corpus import prepare_corpus
from playground.training.trainer import Trainer, build_model

NANO = PRESETS["nano"]
TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60


@pytest.fixture
def queue(monkeypatch):
    monkeypatch.setattr(jobs, "QUEUE", jobs.TrainingQueue())


def _written(model, prompt):
    model.eval()
    steps = generate(model, prompt, max_new_tokens=SAMPLE_TOKENS, seed=SAMPLE_SEED, **SAMPLE_SETTINGS)
    return [step.token_id for step in steps]


def _job(steps):
    job = jobs.TrainingJob(NANO, TEXT, "pasted", steps=steps, lr=3e-3, batch_size=2, block_size=32)
    job.start()
    assert job.done.wait(120)
    assert job.error is None, job.error
    return job


def test_before_and_after_are_generate_on_the_initial_and_trained_weights(queue):
    job = _job(steps=10)
    prompt = job.sample_prompt
    assert prompt == [int(i) for i in job.corpus.val_ids[:4]]  # a pasted text: its held-out part's first tokens
    steps = [step for step, _ in job.samples]
    assert steps == [0] + [step for step, _ in job.val_points[1:]] == [0, 5, 10]
    initial = build_model(NANO, seed=1337)  # the job's seed: the weights it started from
    assert job.samples[0][1] == _written(initial, prompt)
    assert job.samples[-1][1] == _written(job.trainer.snapshot_model(), prompt)
    assert job.samples[0][1] != job.samples[-1][1]  # ten steps changed what it writes
    assert all(len(ids) == SAMPLE_TOKENS for _, ids in job.samples)


def test_writing_samples_leaves_the_training_as_it_was(queue):
    job = _job(steps=10)
    tcfg = jobs.training_config(NANO, 10, 3e-3, batch_size=2, block_size=32)
    corpus = prepare_corpus(TEXT, tcfg.block_size, name="pasted")
    plain = Trainer(build_model(NANO, seed=1337), corpus.train_ids, corpus.val_ids, tcfg)
    plain.run()
    assert [loss for _, loss in job.train_points] == [h["loss"] for h in plain.history]
    assert job.val_points == plain.val_history


def test_a_stopped_run_ends_with_a_sample_where_it_stopped(queue):
    job = jobs.TrainingJob(NANO, TEXT, "pasted", steps=2000, lr=3e-3, batch_size=2, block_size=32)
    job.start()
    while job.trainer.step_count < 3:
        assert not job.done.wait(0.05)
    job.stop()
    assert job.done.wait(120)
    assert job.samples[0][0] == 0 and job.samples[-1][0] == job.trainer.step_count
    assert job.samples[-1][1] == _written(job.trainer.snapshot_model(), job.sample_prompt)


def test_bundled_corpora_are_prompted_in_their_own_words():
    corpus = prepare_corpus(TEXT, 32, name="Pride and Prejudice")
    assert sample_prompt_ids(corpus) == [43568]  # "Elizabeth", one token
