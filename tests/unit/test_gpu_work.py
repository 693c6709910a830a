"""ZeroGPU's seam (playground.server.gpu, gpu_runs): the decorated work with the real ``spaces`` package outside
a Space (a no-op: it runs here, on the CPU), with ``spaces`` absent (blocked import: CPU only), and in a
ZeroGPU Space's shape (tests/fake_spaces.py: a forked worker, everything pickled across), where a run's
steps must be exactly the steps it makes in the app."""

from __future__ import annotations

import inspect
import os
import sys
import time

import pytest
import torch

from playground.accel import enabled as accel_enabled
from playground.engine.sampling import NonFiniteError, generate
from playground.errors import UserError
from playground.inside.interventions import StopRequested
from playground.runtime import devices
from playground.runtime.devices import DeviceError, resolve_device
from playground.server import gpu, gpu_runs
from playground.server import patching_views as pv
from playground.server.decode_loop import DecodeLoop
from tests import fake_spaces
from tests.tiny_models import random_model

FIELDS = ("index", "position", "token_id", "prob", "raw_prob", "rank", "entropy", "top", "candidates", "stages", "u")
PROMPT = [5, 17, 3, 99, 42]


@pytest.fixture
def fresh_spaces():
    """The ``spaces`` import looked up again before and after (tests block it or swap it)."""
    gpu.spaces_package.cache_clear()
    devices.default_device.cache_clear()
    yield
    gpu.spaces_package.cache_clear()
    devices.default_device.cache_clear()


@pytest.fixture
def zero_gpu(monkeypatch, fresh_spaces):
    """A ZeroGPU Space's shape: SPACES_ZERO_GPU=true, ``spaces`` the fork-and-pickle stand-in, every model
    big enough for a GPU slot, and the run's work decorated by it."""
    monkeypatch.setenv(devices.ZERO_GPU_VAR, "true")
    monkeypatch.setenv(gpu.MIN_PARAMS_VAR, "0")
    monkeypatch.setitem(sys.modules, "spaces", fake_spaces)
    raw = gpu_runs.gpu_generation  # the real spaces decorated it outside a Space: the function itself
    monkeypatch.setattr(gpu_runs, "gpu_generation", fake_spaces.GPU(raw, duration=gpu_runs.run_seconds))
    monkeypatch.setattr(pv, "gpu_grid_steps", fake_spaces.GPU(pv.gpu_grid_steps, duration=30))
    fake_spaces.durations.clear()


def collect(stream, timeout=60.0, stop_after=None):
    steps, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream.wait(0.5)
        new, ended = stream.take()
        steps += new
        if stop_after is not None and len(steps) >= stop_after and not stream.stop_asked:
            stream.stop()
        if ended:
            return steps
    raise AssertionError("the run did not end")


def same_steps(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert {f: getattr(a, f) for f in FIELDS} == {f: getattr(b, f) for f in FIELDS}
        if b.attention is not None:
            assert all(x.device.type == "cpu" and torch.equal(x, y) for x, y in zip(a.attention, b.attention))


def reference(model, n, **settings):
    return list(generate(model, PROMPT, max_new_tokens=n, **settings))


def test_spaces_outside_a_space_is_a_no_op(monkeypatch, fresh_spaces):
    monkeypatch.delenv(devices.ZERO_GPU_VAR, raising=False)
    import spaces

    assert gpu.spaces_package() is spaces
    f = lambda x: x + 1  # noqa: E731
    assert gpu.gpu_work(f) is f and gpu.gpu_work(duration=5)(f) is f
    assert inspect.isgeneratorfunction(gpu_runs.gpu_generation)  # decorated at import, left as it is
    model = random_model(seed=1)
    assert not gpu.uses_gpu_slots(model)
    # The decorated work runs here, on the model where it is, and makes the app's steps.
    gen = generate(model, PROMPT, max_new_tokens=12, temperature=0.9, top_k=20, seed=7, capture_attention=True)
    with gpu.moved_in(model) as device:
        assert device.type == "cpu"
    same_steps(
        list(gpu_runs.gpu_generation(model, gpu_runs.spec_of(gen))),
        reference(model, 12, temperature=0.9, top_k=20, seed=7, capture_attention=True),
    )
    # And a run joins the CPU loop's rounds.
    loop = DecodeLoop()
    steps = collect(loop.submit(generate(model, PROMPT, max_new_tokens=6, temperature=0, seed=0)))
    assert loop.rounds > 0 and len(steps) == 6


def test_spaces_absent_is_cpu_only(monkeypatch, fresh_spaces):
    monkeypatch.setitem(sys.modules, "spaces", None)  # ``import spaces`` raises ImportError
    monkeypatch.setenv(devices.ZERO_GPU_VAR, "true")
    monkeypatch.setenv(gpu.MIN_PARAMS_VAR, "0")
    assert gpu.spaces_package() is None
    f = lambda x: x  # noqa: E731
    assert gpu.gpu_work(f) is f
    model = random_model(seed=2)
    assert not gpu.uses_gpu_slots(model)  # no GPU slots without the package that asks for them
    assert resolve_device("auto").type == "cpu"
    loop = DecodeLoop()
    steps = collect(loop.submit(generate(model, PROMPT, max_new_tokens=5, temperature=0, seed=0)))
    assert loop.rounds > 0
    same_steps(steps, reference(model, 5, temperature=0, seed=0))


def test_zero_gpu_device_is_the_cpu_between_gpu_work(monkeypatch, fresh_spaces):
    monkeypatch.setenv(devices.ZERO_GPU_VAR, "true")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what ``spaces`` makes it say there
    assert resolve_device("auto").type == "cpu" and resolve_device("cpu").type == "cpu"
    with pytest.raises(DeviceError) as refused:
        resolve_device("cuda")
    assert refused.value.key == "device.zero_gpu" and "ZeroGPU" in str(refused.value)
    assert not accel_enabled()  # nothing built on a weight that a GPU worker's pickle moves
    monkeypatch.delenv(devices.ZERO_GPU_VAR)
    assert resolve_device("auto").type == "cuda"


@pytest.mark.parametrize("settings", [{"temperature": 0.8, "top_p": 0.9, "seed": 11}, {"temperature": 0, "seed": 0}])
def test_zero_gpu_run_streams_from_its_worker(zero_gpu, settings):
    model = random_model(seed=3)
    assert gpu.uses_gpu_slots(model)
    loop = DecodeLoop()
    gen = generate(model, PROMPT, max_new_tokens=15, capture_attention=True, **settings)
    stream = loop.submit(gen, key="run-1")
    assert loop.running("run-1") and loop.active() == 1
    steps = collect(stream)
    assert stream.error is None and loop.rounds == 0  # never in the CPU rounds
    assert fake_spaces.worker_pid.value not in (0, os.getpid())
    same_steps(steps, reference(model, 15, capture_attention=True, **settings))
    assert gen.token_ids == [s.token_id for s in steps] and gen.done
    assert fake_spaces.durations == [gpu_runs.run_seconds(model, gpu_runs.spec_of(gen))]
    assert not loop.running("run-1") and loop.active() == 0  # off the books before the stream ended


def test_zero_gpu_run_without_seed_draws_its_receipt_seed(zero_gpu):
    model = random_model(seed=4)
    gen = generate(model, PROMPT, max_new_tokens=8, temperature=1.0)
    steps = collect(DecodeLoop().submit(gen))
    same_steps(steps, reference(model, 8, temperature=1.0, seed=gen.seed_used))


def _slow(module, args):
    time.sleep(0.02)  # a step long enough for Stop to arrive mid-run


def test_zero_gpu_stop_reaches_the_worker(zero_gpu):
    model = random_model(seed=5, context_length=256)
    model.trf_blocks[0].register_forward_pre_hook(_slow)
    released = []
    loop = DecodeLoop()
    gen = generate(model, PROMPT, max_new_tokens=200, temperature=0.7, seed=1)
    gen.on_finish.append(lambda: released.append(True))  # the run's memory room, in the app
    stream = loop.submit(gen, key="run-2")
    steps = collect(stream, stop_after=3)
    assert 3 <= len(steps) < 200
    assert stream.wait_released(10) and released == [True]  # given back once the worker has let the run go
    assert fake_spaces.items.value < 100  # the worker stopped too, long before its 200 tokens


def test_to_cpu_reaches_into_containers():
    step = reference(random_model(seed=6), 2, temperature=0, capture_attention=True)[0]
    out = gpu.to_cpu({"a": [step, (torch.ones(2),)], "b": 3})
    assert out["b"] == 3 and torch.equal(out["a"][1][0], torch.ones(2))
    assert out["a"][0] is not step and out["a"][0].token_id == step.token_id


class NanAfter:
    """A forward hook whose output turns NaN after ``n`` calls (it travels to the worker with the model)."""

    def __init__(self, n):
        self.n, self.calls = n, 0

    def __call__(self, module, args, output):
        self.calls += 1
        return output * float("nan") if self.calls > self.n else output


def test_zero_gpu_refusal_in_the_worker_keeps_its_key(zero_gpu):
    model = random_model(seed=7)
    model.final_norm.register_forward_hook(NanAfter(3))
    stream = DecodeLoop().submit(generate(model, PROMPT, max_new_tokens=10, temperature=0.5, seed=2))
    steps = collect(stream)
    assert len(steps) == 3 and isinstance(stream.error, NonFiniteError)
    assert stream.error.key.startswith("generate.") and stream.error.step == 4
    assert str(stream.error).startswith("Step 4: the model produced NaN/infinite logits")


def test_zero_gpu_patching_grid_comes_from_its_worker(zero_gpu, monkeypatch):
    model = random_model(seed=8)
    pair = pv.SUGGESTED_PAIRS[0]
    args = (model, pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"])
    in_slot = pv.activation_patching(*args, "resid_pre")
    assert fake_spaces.worker_pid.value not in (0, os.getpid()) and fake_spaces.durations == [30]
    with pytest.raises(UserError) as refused:  # checked in the worker, said with its key and fields
        pv.activation_patching(*args, "attn_head_pos", layer=99)
    assert refused.value.key and refused.value.fields and "99" in str(refused.value)
    with pytest.raises(StopRequested):
        list(pv.patching_steps(*args, "attn_head", stop=lambda: True))
    monkeypatch.delenv(devices.ZERO_GPU_VAR)
    here = pv.activation_patching(*args, "resid_pre")
    assert here.pop("seconds") > 0 and in_slot.pop("seconds") > 0  # how long each took: the one difference
    assert here == in_slot  # the app's own grid, number for number
