"""Speed behind one seam (issue 33): the teaching model is plain, ``accelerate`` is the one way in, and a
server's kernel decisions are made once per machine, read from disk, never timed in a request."""

import json
import subprocess
import sys
from contextlib import contextmanager

import pytest
import torch

from playground.accel import accelerate, is_accelerated, undecided
from playground.engine import decoding
from playground.engine.sampling import generate
from playground.runtime import decision_store, decode_decisions, kernels, machine_load
from tests.helpers import ROOT
from tests.tiny_models import random_model

PLAIN_GENERATE = """
import sys, torch
import torch.nn.modules.module as mm
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sampling import generate
cfg = GPTConfig(context_length=32, emb_dim=32, n_heads=2, n_layers=2)
model = GPTModel(cfg, generator=torch.Generator().manual_seed(0))
steps = list(generate(model, [1, 2, 3], max_new_tokens=4, temperature=0))
steps += list(generate(model, [1, 2, 3], max_new_tokens=4, temperature=0.8, top_k=20, seed=1))
print(len(steps))
print(sorted(m for m in sys.modules if m.startswith("playground")))
print(len(mm._global_module_registration_hooks) + len(mm._global_parameter_registration_hooks)
      + len(mm._global_buffer_registration_hooks) + len(mm._global_forward_hooks))
print(torch.backends.mkldnn.enabled)
"""


def test_a_plain_generate_in_a_fresh_process_compiles_times_and_installs_nothing(tmp_path):
    cache = tmp_path / "kernels"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "PLAYGROUND_KERNEL_CACHE": str(cache),
        "HOME": str(tmp_path),
    }
    out = subprocess.run([sys.executable, "-c", PLAIN_GENERATE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    n, modules, hooks, mkldnn = out.stdout.strip().splitlines()
    assert n == "8"
    loaded = eval(modules)  # a printed list of names
    assert not [m for m in loaded if m.startswith(("playground.runtime", "playground.accel", "playground.server"))]
    assert hooks == "0" and mkldnn == "True"
    assert not cache.exists()  # no library built, no decision written


def test_accelerate_attaches_the_decoder_and_gives_the_plain_tokens():
    plain = random_model(seed=3)
    fast = random_model(seed=3)
    assert decoding.decoder_of(plain) is decoding.PLAIN and not is_accelerated(plain)
    accelerate(fast)
    assert is_accelerated(fast)
    for kwargs in (dict(temperature=0), dict(temperature=0.9, top_k=30, seed=4)):
        want = [s.token_id for s in generate(plain, [5, 6, 7], max_new_tokens=8, **kwargs)]
        got = [s.token_id for s in generate(fast, [5, 6, 7], max_new_tokens=8, **kwargs)]
        assert got == want


def test_the_one_switch_keeps_every_model_plain(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    model = random_model()
    kernels.forget()
    accelerate(model)
    assert not is_accelerated(model) and kernels.measured() == []
    assert not kernels.measuring_enabled()


def test_decided_only_times_nothing_and_names_what_it_skipped():
    kernels.forget()
    model = random_model(seed=5)
    accelerate(model, measure=False)
    assert is_accelerated(model)
    assert kernels.measured() == []  # nothing timed, nothing cached: a later measurement still decides
    skipped = undecided(model)
    assert any("weight layout" in d for d in skipped)
    assert all(d == " ".join(d.split()) for d in skipped)


def test_the_plain_name_of_every_decision_is_its_first_candidate():
    """``kernels.PLAIN`` is what a decision not made yet takes: each decision's plain candidate."""
    kernels.forget()
    with kernels.decided_only():
        choices = [
            decode_decisions.weight_layout((64, 32), torch.float32, 2),
            decode_decisions.stacked_qkv(32, torch.float32, False, 2),
            decode_decisions.vocabulary_threads(5000),
        ]
    with kernels.decided_only():
        measured = [
            decode_decisions.weight_layout((64, 32), torch.float32, 2),
            decode_decisions.stacked_qkv(32, torch.float32, False, 2),
        ]
    assert [c.winner for c in choices[:2]] == ["out_in", "separate"] == [c.winner for c in measured]
    assert choices[2] is None or choices[2].winner == "all"
    # the same decisions measured: their first candidate is the plain one
    measured_first = decode_decisions.weight_layout((64, 32), torch.float32, 2)
    assert list(measured_first.seconds)[0] == kernels.PLAIN["weight layout"]
    stacked = decode_decisions.stacked_qkv(32, torch.float32, False, 2)
    assert list(stacked.seconds)[0] == kernels.PLAIN["stacked qkv"]


@pytest.fixture
def quiet_machine(monkeypatch):
    """Every measurement counts as made on a quiet machine: one made under load (a test suite beside it) is
    measured again by the next measuring start (``kernels.LOADED``; tests/unit/test_machine_load.py)."""

    @contextmanager
    def others():
        measured = machine_load.Measured()
        yield measured
        measured.share = 0.0

    monkeypatch.setattr(kernels.machine_load, "others", others)


def test_decisions_are_kept_per_machine_and_read_back(tmp_path, monkeypatch, quiet_machine):
    kernels.forget()
    store = kernels.keep_decisions(tmp_path)
    try:
        first = decode_decisions.weight_layout((96, 32), torch.float32, 2)
        assert first.measured and len(store) == 1
        data = json.loads(store.path.read_text())
        assert data["identity"] == decision_store.cpu_identity()
        kernels.forget()
        kernels.keep_decisions(tmp_path)  # a new process reads the file: no timing
        calls = []
        monkeypatch.setattr(decode_decisions, "_gemv_pass", lambda *a: calls.append(a))
        again = decode_decisions.weight_layout((96, 32), torch.float32, 2)
        assert calls == [] and again.winner == first.winner and again.seconds == first.seconds
        # another CPU (other ISA flags) has a file of its own
        monkeypatch.setattr(decision_store.library_cache, "cpu_identity", lambda: "another CPU's digest")
        assert decision_store.DecisionStore(tmp_path).path != store.path
    finally:
        kernels.stop_keeping_decisions()
        kernels.forget()


@pytest.mark.parametrize("content", ["", "{not json", '{"decisions": [1, 2]}', '{"decisions": {"x": 3}}'])
def test_an_unreadable_decisions_file_is_measured_again(tmp_path, content):
    path = decision_store.DecisionStore(tmp_path).path
    path.write_text(content)
    store = decision_store.DecisionStore(tmp_path)
    assert store.get(("weight layout", (8, 8), torch.float32, 1, 1)) is None
    store.put(("k",), {"winner": "a", "seconds": {"a": 1.0}})
    assert decision_store.DecisionStore(tmp_path).get(("k",))["winner"] == "a"


def test_a_model_is_built_again_for_its_own_shapes_decisions_not_for_another_shapes(
    tmp_path, monkeypatch, quiet_machine
):
    """A model built before its shape's kernels were measured is stale (the server builds it again) once a
    measurement has made one of the decisions it skipped; another shape's measurement ending leaves it be."""
    from playground.accel import background, stale
    from playground.engine.presets import PRESETS
    from playground.server.recipes import build_from_recipe, random_recipe

    kernels.forget()
    kernels.keep_decisions(tmp_path)
    try:
        queued = []  # the measurement the build asks for, run here when the test says
        monkeypatch.setattr(background, "measure_later", lambda key, build, nbytes: queued.append(build) or True)
        model = build_from_recipe(random_recipe(PRESETS["nano"], seed=0))
        assert undecided(model) and len(queued) == 1 and not stale(model)
        done = background.completed()
        monkeypatch.setattr(background, "completed", lambda: done + 1)  # another shape's measurement ended
        assert not stale(model)
        queued[0]()  # this shape's own measurement
        assert stale(model)
    finally:
        kernels.stop_keeping_decisions()
        kernels.forget()


def test_a_servers_build_times_nothing_and_measures_the_new_shape_in_the_background(
    tmp_path, monkeypatch, quiet_machine
):
    import threading

    from playground.accel import background
    from playground.engine.presets import PRESETS
    from playground.server.recipes import build_from_recipe, random_recipe

    kernels.forget()
    kernels.keep_decisions(tmp_path)
    try:
        recipe = random_recipe(PRESETS["nano"], seed=0)
        timed_on = []
        real = decode_decisions._gemv_pass
        monkeypatch.setattr(
            decode_decisions, "_gemv_pass", lambda *a: timed_on.append(threading.current_thread().name) or real(*a)
        )
        first = build_from_recipe(recipe)
        assert "MainThread" not in timed_on  # the request timed nothing
        assert undecided(first)  # a shape never met here: plain paths while it is measured
        assert background.wait_idle(300)
        assert timed_on and set(timed_on) == {"kernel-timing"}
        kernels.forget()
        kernels.keep_decisions(tmp_path)  # a restart: read from the file
        timed_on.clear()
        again = build_from_recipe(recipe)
        assert undecided(again) == [] and is_accelerated(again) and timed_on == []
    finally:
        kernels.stop_keeping_decisions()
        kernels.forget()
