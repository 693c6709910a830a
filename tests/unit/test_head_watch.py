"""Watching heads form (playground.training.head_watch, repeats, sampled_softmax): the probe, every
score against the maps it is read from, the phase change, the batch mix and the sampled softmax."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from playground.engine.head_patterns import head_stats, induction_scores
from playground.training import head_watch as W
from playground.training.repeats import END_OF_TEXT, RepeatBatches, RepeatMix, frequent_tokens
from playground.training.sampled_softmax import IGNORE, SampledSoftmax
from playground.training.trainer import Trainer
from tests.tiny_models import random_model


def test_probe_is_a_run_said_twice():
    ids = torch.arange(1000, 1200).repeat(3)
    probe = W.probe_batch(ids, rows=3, period=5)
    assert probe.shape == (3, 11)
    assert (probe[:, 0] == END_OF_TEXT).all()
    assert torch.equal(probe[:, 1:6], probe[:, 6:])
    assert all(len(set(row[1:6].tolist())) == 5 for row in probe)
    assert torch.equal(probe, W.probe_batch(ids, rows=3, period=5))  # fixed for the run


def test_probe_of_a_text_of_few_words_still_has_a_run():
    probe = W.probe_batch(torch.tensor([5, 6, 5, 6, 7]), rows=2, period=16)
    assert probe.shape == (2, 33) and len(set(probe[0, 1:17].tolist())) == 16


def test_measure_reads_the_maps_and_the_losses():
    model = random_model(context_length=64)
    probe = W.probe_batch(torch.arange(300, 400), rows=4, period=8)
    record = W.measure(model, probe, step=7)
    with torch.no_grad():
        logits, trace = model(probe, return_attention=True)
    maps = [a.numpy() for a in trace.all_layers()]
    prev = np.mean([head_stats([m[r] for m in maps])["previous-token"] for r in range(4)], axis=0)
    ind = np.mean([induction_scores([m[r] for m in maps], probe[r].numpy()) for r in range(4)], axis=0)
    np.testing.assert_allclose(record.previous_token, prev, atol=1e-6)
    np.testing.assert_allclose(record.induction, ind, atol=1e-6)
    # the second run's tokens 2..8 (targets at positions 10..16) against the first run's (2..8)
    nll = F.cross_entropy(logits[:, :-1].flatten(0, 1), probe[:, 1:].flatten(), reduction="none").view(4, -1)
    assert record.early_loss == pytest.approx(float(nll[:, 1:8].mean()), abs=1e-5)
    assert record.late_loss == pytest.approx(float(nll[:, 9:16].mean()), abs=1e-5)
    assert record.gap == pytest.approx(record.late_loss - record.early_loss)
    assert record.maps.shape == (2, 4, 17, 17) and record.step == 7
    np.testing.assert_allclose(record.maps[1, 2], maps[1][0, 2], atol=1e-3)  # float16


def test_measure_leaves_a_training_model_training():
    model = random_model().train()
    W.measure(model, W.probe_batch(torch.arange(300, 400), rows=1, period=4), step=0)
    assert model.training


def _record(step, ind):
    z = np.zeros((2, 2))
    return W.HeadScores(step, z, np.array(ind), z, 6.0, 6.0 - step / 100, np.zeros((2, 2, 3, 3), np.float16))


def test_phase_change_is_the_largest_rise_of_the_final_best_head():
    records = [
        _record(0, [[0.0, 0.0], [0.05, 0.0]]),
        _record(10, [[0.3, 0.0], [0.06, 0.0]]),  # another head's rise does not count
        _record(20, [[0.2, 0.0], [0.5, 0.0]]),  # layer 1 head 0 jumps here
        _record(30, [[0.1, 0.0], [0.6, 0.0]]),
    ]
    tl = W.timeline(records, torch.zeros(2, 7, dtype=torch.long))
    assert tl["phase_change"] == {"step": 20, "layer": 1, "head": 0, "rise": 0.44}
    assert tl["steps"] == [0, 10, 20, 30] and tl["layers"] == 2 and tl["heads"] == 2
    assert tl["in_context_gap"] == [0.0, -0.1, -0.2, -0.3]
    json.dumps(tl)  # plain JSON


def test_no_phase_change_without_a_jump():
    records = [_record(0, [[0.0, 0.0], [0.05, 0.0]]), _record(10, [[0.0, 0.0], [0.1, 0.0]])]
    assert W.timeline(records, torch.zeros(1, 3, dtype=torch.long))["phase_change"] is None


def test_watch_logs_step_zero_every_n_and_the_end():
    model = random_model(context_length=64)
    watch = W.HeadWatch(model, W.probe_batch(torch.arange(300, 400), rows=1, period=4), every=5)
    logged = [s for s in range(13) if watch.observe(s) is not None]
    assert logged == [0, 5, 10]
    assert watch.observe(12, final=True).step == 12
    assert watch.observe(12, final=True) is None  # once
    assert watch.seconds > 0


def test_repeat_rows_score_only_what_can_be_copied():
    ids = torch.arange(2000, 2600)
    batches = RepeatBatches(ids, 40, RepeatMix(share=1.0, pool=100, periods=(5, 9)))
    x, y = batches(16, seed=3)
    assert x.shape == y.shape == (16, 40)
    for row_x, row_y in zip(x, y):
        assert row_x[0] == END_OF_TEXT
        period = int((row_y == IGNORE).sum())
        assert 5 <= period <= 9
        run = row_x[1 : 1 + period]
        assert len(set(run.tolist())) == period
        assert torch.equal(row_x[1 + period : 1 + 2 * period], run)  # said again
        assert torch.equal(row_y[period:], torch.cat([row_x[1:], row_y[-1:]])[period:])
    x2, y2 = batches(16, seed=3)
    assert torch.equal(x, x2) and torch.equal(y, y2)


def test_text_rows_are_windows_of_the_text():
    ids = torch.arange(5000, 5400)
    x, y = RepeatBatches(ids, 32, RepeatMix(share=0.0, pool=50, periods=(4, 8)))(4, seed=0)
    for row_x, row_y in zip(x, y):
        start = int(row_x[0]) - 5000
        assert torch.equal(row_x, ids[start : start + 32]) and torch.equal(row_y, ids[start + 1 : start + 33])


def test_frequent_tokens_in_order():
    assert frequent_tokens(torch.tensor([3, 3, 3, 9, 9, 1]), 2).tolist() == [3, 9]


def test_sampled_softmax_with_every_token_known_is_the_full_softmax():
    logits = torch.randn(2, 3, 10)
    targets = torch.tensor([[1, 2, IGNORE], [9, 0, 4]])
    softmax = SampledSoftmax(torch.arange(10), 10, n_others=4)
    rows = softmax.rows(torch.Generator().manual_seed(0))
    assert rows.tolist() == list(range(10))  # nothing outside to draw
    full = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
    assert softmax.loss(logits[..., rows], targets) == pytest.approx(float(full), abs=1e-6)


def test_sampled_softmax_weights_the_drawn_others():
    softmax = SampledSoftmax(torch.tensor([4, 2]), 10, n_others=2)  # 8 outside, 2 drawn: weight log 4
    rows = softmax.rows(torch.Generator().manual_seed(1))
    assert rows[:2].tolist() == [2, 4] and len(set(rows[2:].tolist()) & {2, 4}) == 0
    logits = torch.zeros(1, 4)
    loss = softmax.loss(logits, torch.tensor([4]))
    assert float(loss) == pytest.approx(np.log(1 + 1 + 2 * 4))  # e^0 + e^0 + 2 · e^(log 4)
    with pytest.raises(ValueError):
        softmax.loss(logits, torch.tensor([7]))


def test_model_output_rows_are_those_rows_of_the_full_logits():
    model = random_model()
    idx = torch.tensor([[1, 2, 3, 4]])
    rows = torch.tensor([7, 3, 50256])
    with torch.no_grad():
        torch.testing.assert_close(model(idx, output_rows=rows), model(idx)[..., rows])


def test_trainer_takes_the_mix_and_the_sampled_softmax():
    model = random_model(context_length=32).train()
    ids = torch.arange(100, 400)
    batches = RepeatBatches(ids, 16, RepeatMix(share=0.5, pool=60, periods=(4, 6)))
    from playground.training.train_config import TrainConfig

    tcfg = TrainConfig(steps=3, batch_size=4, block_size=16, eval_interval=3, eval_batches=1, warmup_steps=1)
    softmax = SampledSoftmax(torch.cat([ids, torch.tensor([END_OF_TEXT])]), model.cfg.vocab_size, 8)
    trainer = Trainer(model, ids[:250], ids[250:], tcfg, batches=batches, softmax=softmax)
    x, y = trainer.get_batch(0)
    x0, y0 = batches(4, seed=__import__("playground.training.trainer", fromlist=["_step_seed"])._step_seed(1337, 0))
    assert torch.equal(x, x0) and torch.equal(y, y0)
    watch = W.HeadWatch(model, W.probe_batch(ids, rows=2, period=4), every=1)
    trainer.run(watch)
    assert [r.step for r in watch.records] == [0, 1, 2, 3]
    assert all(np.isfinite(h["loss"]) for h in trainer.history)
