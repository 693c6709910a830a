"""The Generate tab on a ZeroGPU Space's shape (tests/fake_spaces.py: a forked worker, everything pickled
across): a run takes a GPU slot and streams the chips and run data the CPU loop gives it; with the real
``spaces`` package outside a Space the same handler runs in the loop, as on any machine."""

import os
import sys

import pytest

from playground import PRESETS
from playground.runtime import devices
from playground.server import gpu, gpu_runs
from playground.server.decode_loop import LOOP
from playground.server.recipes import random_recipe
from playground.ui.generate import tab as generate_tab
from tests import fake_spaces

SETTINGS = ("ROMEO:\nWhat light", 0.8, 40, 1.0, 12, 5, False)  # temperature, top-k, top-p, new tokens, seed, greedy


def _generate(recipe):
    state = {"recipe": recipe, "run_id": None}
    outs = list(generate_tab.generate_tokens(state, *SETTINGS))
    return outs, generate_tab.run_data(outs[-1].state)


@pytest.fixture
def zero_gpu(monkeypatch):
    monkeypatch.setenv(devices.ZERO_GPU_VAR, "true")
    monkeypatch.setenv(gpu.MIN_PARAMS_VAR, "0")
    monkeypatch.setitem(sys.modules, "spaces", fake_spaces)
    gpu.spaces_package.cache_clear()
    raw = gpu_runs.gpu_generation
    monkeypatch.setattr(gpu_runs, "gpu_generation", fake_spaces.GPU(raw, duration=gpu_runs.run_seconds))
    fake_spaces.worker_pid.value = 0
    yield
    gpu.spaces_package.cache_clear()


def test_a_run_in_a_gpu_slot_streams_what_the_loop_gives(zero_gpu, monkeypatch):
    # A model built here, under ZeroGPU's switches (no acceleration): nothing built on its weights to move.
    recipe = random_recipe(PRESETS["nano"], seed=39)
    rounds = LOOP.rounds
    outs, in_slot = _generate(recipe)
    assert "data-state='done' data-tokens='12'" in outs[-1].status
    assert fake_spaces.worker_pid.value not in (0, os.getpid()) and LOOP.rounds == rounds
    assert len(in_slot["steps"]) == 12 and "error" not in in_slot
    monkeypatch.delenv(devices.ZERO_GPU_VAR)
    fake_spaces.worker_pid.value = 0
    _, in_loop = _generate(recipe)
    assert fake_spaces.worker_pid.value == 0 and LOOP.rounds > rounds
    assert in_slot["token_ids"] == in_loop["token_ids"]
    # The forked worker runs torch on one thread (torch's own rule after a fork), the loop on the process's:
    # on some CPUs (a Zen 4 here) torch's products then round differently in the last bit.
    slot_probs, loop_probs = [s["prob"] for s in in_slot["steps"]], [s["prob"] for s in in_loop["steps"]]
    assert slot_probs == pytest.approx(loop_probs, rel=1e-5) and slot_probs != [0.0] * len(slot_probs)
    assert LOOP.active() == 0


def test_the_real_spaces_outside_a_space_leaves_the_handler_as_it_is(monkeypatch):
    monkeypatch.delenv(devices.ZERO_GPU_VAR, raising=False)
    gpu.spaces_package.cache_clear()
    import spaces

    assert gpu.spaces_package() is spaces
    rounds = LOOP.rounds
    _, data = _generate(random_recipe(PRESETS["nano"], seed=40))
    assert len(data["steps"]) == 12 and LOOP.rounds > rounds
