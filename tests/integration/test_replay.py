"""Replay: the weights hash, records written and read back (also from full run exports), bit-identical
replays on this machine, and the reasons given when a replay cannot be identical."""

import json

import pytest
import torch

from playground.engine.presets import PRESETS
from playground.server import exports, files
from playground.server.model_cache import CACHE
from playground.server.recipes import bundled_recipe, random_recipe
from playground.server.replay import (
    ReplayError,
    model_for,
    read_record,
    replay,
    replay_record,
    weights_sha256,
    write_record,
)
from playground.server.runs import start_run


@pytest.fixture(scope="module")
def bundled():
    return CACHE.get(bundled_recipe())


def make_run(model, recipe, **settings):
    settings = dict(max_new_tokens=12, temperature=1.2, top_k=50, top_p=0.9, seed=5) | settings
    run, gen = start_run(model, recipe, "ROMEO:\nWhat light", replaces=None, **settings)
    for step in gen:
        run.steps.append(step)
    return run


@pytest.fixture(scope="module")
def record(bundled):
    return replay_record(make_run(bundled, bundled_recipe()), bundled)


def test_weights_hash_is_stable_and_sees_any_change():
    cfg = PRESETS["nano"]
    a = CACHE.get(random_recipe(cfg, seed=1))
    b = CACHE.get(random_recipe(cfg, seed=2))
    h = weights_sha256(a)
    assert h == weights_sha256(a) and len(h) == 64 and h != weights_sha256(b)
    copy = type(a)(a.cfg, generator=torch.Generator().manual_seed(1))
    assert weights_sha256(copy) == h  # the same numbers hash the same, whatever object holds them
    with torch.no_grad():
        copy.trf_blocks[0].att.W_query.weight[0, 0] += 1e-3
    assert weights_sha256(copy) != h
    assert len(weights_sha256(copy.to(torch.bfloat16))) == 64  # bfloat16 tensors hash too


def test_replay_on_the_same_machine_is_bit_identical(bundled, record, tmp_path):
    path = write_record(record, tmp_path)
    back = read_record(path)
    assert back == json.loads(json.dumps(record))
    report = replay(back, bundled)
    assert report.identical and report.steps == 12 and report.first_difference is None and not report.reasons
    assert report.replayed_ids == record["token_ids"] and report.replayed_probs == record["probs"]  # exact floats
    assert report.message().startswith("Identical")


def test_greedy_runs_replay_too(bundled):
    rec = replay_record(make_run(bundled, bundled_recipe(), temperature=0, greedy=True, max_new_tokens=5), bundled)
    assert rec["settings"]["temperature"] == 0 and rec["u"] == [None] * 5
    assert replay(rec, bundled).identical


def test_other_weights_are_named_and_the_first_difference_found(record):
    cfg = PRESETS["nano"]
    other = CACHE.get(random_recipe(cfg, seed=1))
    report = replay(record, other)
    assert not report.identical and report.first_difference["step"] == 0
    assert any(r.startswith("other weights") for r in report.reasons)
    assert "Differs from step 0" in report.message() and "other weights" in report.message()


def test_other_torch_is_given_as_the_reason(bundled, record):
    report = replay({**record, "torch": "1.0.0"}, bundled)
    assert report.identical and any("other torch" in r and "1.0.0" in r for r in report.reasons)
    forged = {**record, "probs": [record["probs"][0] + 1e-9] + record["probs"][1:], "torch": "1.0.0"}
    report = replay(forged, bundled)
    assert not report.identical and report.first_difference["step"] == 0
    assert "probability (same token)" in report.message() and "other torch" in report.message()


def test_run_exports_carry_the_record(bundled):
    run = make_run(bundled, bundled_recipe(), max_new_tokens=4)
    for fmt in ("json", "npz"):
        path = exports.export_run(run, bundled, fmt, layers=[0])
        rec = read_record(path)
        assert rec["token_ids"] == [s.token_id for s in run.steps]
        assert replay(rec, bundled).identical


def test_model_for_prefers_the_sessions_model_with_the_same_weights(bundled, record):
    assert model_for(record, (bundled, bundled_recipe()))[0] is bundled
    assert model_for(record)[0] is bundled  # the recorded recipe, through the cache


def test_a_checkpoint_that_is_not_here_is_named(record, tmp_path):
    gone = {
        **record,
        "model": "checkpoint: trained 2L d64",
        "recipe": {
            "kind": "file",
            "path": str(files.work_dir() / "gone.safetensors"),
            "label": "trained 2L d64",
            "dtype": "float32",
        },
    }
    with pytest.raises(ReplayError, match="trained 2L d64.*weights sha256 .*not on this server.*upload"):
        model_for(gone)
    outside = {**gone, "recipe": {**gone["recipe"], "path": "/etc/passwd"}}  # never read from a file's say-so
    with pytest.raises(ReplayError, match="not on this server"):
        model_for(outside)


@pytest.mark.parametrize(
    "content, words",
    [
        (b"\xff\xfe", "not JSON"),
        (b'{"a": 1}', "not a replay file"),
        (b'{"format": "gpt-playground-replay", "version": 9}', "version 9"),
    ],
)
def test_files_that_are_not_records_are_refused(tmp_path, content, words):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(ReplayError, match=words):
        read_record(path)
