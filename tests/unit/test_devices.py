"""PLAYGROUND_DEVICE: the choice of device with the hardware probes faked (so every branch runs on
this CPU-only machine), the memory budget of a GPU, the summary line, and the CPU-only fast paths.
Tests that need a real GPU skip here and say so."""

from __future__ import annotations

import pytest
import torch

from playground.runtime import devices
from playground.runtime import machine_memory as memory
from playground.runtime.devices import DeviceError, default_device, describe_device, resolve_device
from tests.helpers import ROOT

BUNDLED = ROOT / "playground" / "assets" / "bundled" / "model.safetensors"
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU; this machine has none")


@pytest.fixture
def probes(monkeypatch):
    """Fake hardware: set("cuda", n) / set("mps") before resolving. The cached choices are cleared
    before and after, so nothing leaks into other tests."""

    class Probes:
        def set(self, kind=None, n=1):
            monkeypatch.setattr(torch.cuda, "is_available", lambda: kind == "cuda")
            monkeypatch.setattr(torch.cuda, "device_count", lambda: n if kind == "cuda" else 0)
            monkeypatch.setattr(torch.backends.mps, "is_available", lambda: kind == "mps")

    monkeypatch.delenv(devices.ENV_VAR, raising=False)
    default_device.cache_clear()
    memory._device_total.cache_clear()
    yield Probes()
    default_device.cache_clear()
    memory._device_total.cache_clear()


@pytest.mark.parametrize("kind, expected", [("cuda", "cuda"), ("mps", "mps"), (None, "cpu")])
def test_auto_prefers_cuda_then_mps_then_cpu(probes, kind, expected):
    probes.set(kind)
    assert resolve_device() == resolve_device("auto") == torch.device(expected)


def test_auto_takes_cuda_over_mps_when_both_answer(probes, monkeypatch):
    probes.set("cuda")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto").type == "cuda"


def test_explicit_choices_are_honoured_or_refused_with_a_reason(probes):
    probes.set("cuda", n=2)
    assert resolve_device("cpu") == torch.device("cpu")  # CPU on a GPU machine: allowed
    assert resolve_device("CUDA") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match="cuda:2 does not exist: this machine has 2 GPU"):
        resolve_device("cuda:2")
    with pytest.raises(DeviceError, match="MPS .* not available"):
        resolve_device("mps")
    probes.set(None)
    with pytest.raises(DeviceError, match="no usable GPU was found") as e:
        resolve_device("cuda")
    assert "PLAYGROUND_DEVICE=auto or cpu" in str(e.value)
    assert isinstance(e.value, ValueError)  # the library's convention: bad input is a ValueError


@pytest.mark.parametrize("bad", ["tpu", "gpu", "cpu:1", "cuda:x", "mps:0"])
def test_unknown_devices_are_refused_naming_the_choices(probes, monkeypatch, bad):
    probes.set(None)
    monkeypatch.setenv(devices.ENV_VAR, bad)
    with pytest.raises(
        DeviceError, match=f"PLAYGROUND_DEVICE='{bad}' is not a device: use one of auto, cpu, cuda, mps"
    ):
        resolve_device()


def test_the_environment_is_read_once(probes, monkeypatch):
    probes.set("cuda")
    monkeypatch.setenv(devices.ENV_VAR, "cpu")
    assert default_device() == torch.device("cpu")
    monkeypatch.setenv(devices.ENV_VAR, "cuda")
    assert default_device() == torch.device("cpu")  # resolved once per process
    default_device.cache_clear()
    assert default_device() == torch.device("cuda")
    monkeypatch.setenv(devices.ENV_VAR, "")
    default_device.cache_clear()
    assert default_device() == torch.device("cuda")  # empty means auto


def test_the_memory_budget_is_the_gpus_when_models_live_there(probes, monkeypatch):
    monkeypatch.delenv("PLAYGROUND_MEMORY_BUDGET_GB", raising=False)
    probes.set(None)
    ram_budget = max(memory.GiB // 2, int(memory.physical_ram_bytes() * memory.RAM_SHARE) - memory.BASELINE_BYTES)
    assert memory.default_budget_bytes() == ram_budget  # CPU: unchanged
    memory._device_total.cache_clear()
    default_device.cache_clear()

    probes.set("cuda")
    total = 24 * memory.GiB
    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: asked.append(device) or (total // 3, total))
    assert memory.default_budget_bytes() == int(0.85 * total)
    assert asked and torch.device(asked[0]).type == "cuda"
    assert memory.default_budget_bytes("cpu") == ram_budget  # e.g. training with --device cpu on a GPU machine
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "2")
    assert memory.default_budget_bytes() == 2 * memory.GiB  # the variable still wins

    memory._device_total.cache_clear()
    default_device.cache_clear()
    monkeypatch.delenv("PLAYGROUND_MEMORY_BUDGET_GB")
    probes.set("mps")  # Apple's GPU shares the RAM: the RAM rule holds
    assert memory.default_budget_bytes() == ram_budget


def test_device_names_for_the_summary_line(probes, monkeypatch):
    probes.set("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"Fake GPU {index}")
    assert describe_device("cuda:1") == "CUDA GPU 1 (Fake GPU 1)"
    assert describe_device("mps") == "Apple GPU (MPS)"
    assert describe_device(torch.device("cpu")) == "CPU"


def test_loaders_refuse_a_missing_gpu_before_reading_anything(probes, tmp_path):
    from playground.engine.hf_hub import load_pretrained
    from playground.engine.weights import load_checkpoint

    probes.set(None)
    with pytest.raises(DeviceError, match="no usable GPU"):
        load_checkpoint(tmp_path / "does-not-exist.safetensors", device="cuda")  # not "No checkpoint at"
    with pytest.raises(DeviceError, match="no usable GPU"):
        load_pretrained(tmp_path, device="cuda")


def test_models_go_where_they_are_asked_and_the_summary_says_so(probes):
    from playground.engine.weights import load_checkpoint
    from playground.server.recipes import build_from_recipe, bundled_recipe
    from playground.training.trainer import build_model
    from playground.ui.model_words import summary_line

    probes.set(None)
    assert load_checkpoint(BUNDLED, device="cpu").device.type == "cpu"
    model = build_from_recipe(bundled_recipe())
    assert model.device == default_device() == torch.device("cpu")
    assert summary_line(model, bundled_recipe()).endswith("bundled Tiny Shakespeare model · runs on CPU")
    a, b = (
        build_model(model.cfg.replace(n_layers=1), seed=3),
        build_model(model.cfg.replace(n_layers=1), seed=3, device="cpu"),
    )
    assert torch.equal(a.tok_emb.weight, b.tok_emb.weight)


def test_bfloat16_autocast_follows_the_device():
    from playground.runtime.devices import autocast

    with autocast("cpu", "bfloat16"):
        assert torch.is_autocast_enabled("cpu") and not torch.is_autocast_enabled("cuda")
    with autocast("cpu", "float32"):
        assert not torch.is_autocast_enabled("cpu")


# ----------------------------------------------------------------------------------------------
# On a real GPU (skipped on CPU-only machines)


@needs_cuda
def test_cuda_model_generates_the_cpu_models_greedy_tokens():
    from playground.engine.sampling import generate
    from playground.engine.weights import load_checkpoint

    cpu, gpu = load_checkpoint(BUNDLED, device="cpu"), load_checkpoint(BUNDLED, device="cuda")
    assert gpu.device.type == "cuda"
    prompt = [1, 2, 3, 4]
    a = [s.token_id for s in generate(cpu, prompt, max_new_tokens=16, temperature=0)]
    b = [s.token_id for s in generate(gpu, prompt, max_new_tokens=16, temperature=0, capture_attention=True)]
    assert a == b


@needs_cuda
def test_cuda_memory_budget_is_read_from_the_gpu(monkeypatch):
    monkeypatch.delenv("PLAYGROUND_MEMORY_BUDGET_GB", raising=False)
    monkeypatch.setenv(devices.ENV_VAR, "cuda")
    default_device.cache_clear()
    memory._device_total.cache_clear()
    try:
        assert memory.default_budget_bytes() == int(0.85 * torch.cuda.mem_get_info()[1])
    finally:
        default_device.cache_clear()
        memory._device_total.cache_clear()


@pytest.mark.skipif(not devices.mps_available(), reason="needs Apple's MPS; not available on this machine")
def test_mps_model_runs():
    from playground.engine.weights import load_checkpoint

    model = load_checkpoint(BUNDLED, device="mps")
    assert model(torch.tensor([[1, 2, 3]], device="mps")).device.type == "mps"
