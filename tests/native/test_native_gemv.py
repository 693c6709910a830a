"""The compiled one-row kernel (runtime.native_gemv): F.linear's numbers on random shapes, the plain path
whenever it cannot be built or checked, and a model routed through it decodes as the plain one does.
Which kernel is faster is the machine's business: nothing here asserts a time."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.accel import accelerate
from playground.accel.decode_paths import compiled_kernel_threads, use_compiled_kernel
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.runtime import decode_decisions, kernels, native_gemv

TINY = dict(context_length=48, emb_dim=64, n_heads=4, n_layers=2)


pytestmark = pytest.mark.usefixtures("forget_compiled")


def needs_kernel():
    if not native_gemv.available():
        pytest.skip(f"no compiled kernel here: {native_gemv.status().reason} {native_gemv.status().detail}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", range(6))
def test_matches_f_linear_on_random_shapes(dtype, seed):
    needs_kernel()
    gen = torch.Generator().manual_seed(seed)
    n, k = (int(v) for v in torch.randint(1, 700, (2,), generator=gen))
    w = torch.randn(n, k, generator=gen).to(dtype)
    b = torch.randn(n, generator=gen).to(dtype) if seed % 2 else None
    x = torch.randn(1, 1, k, generator=gen).to(dtype)
    for threads in (0, 1, 2, 3):  # all of torch's, one, and more than rows per thread
        assert native_gemv.supports(x, w, b)
        got = native_gemv.linear(x, w, b, threads)
        assert got.shape == (1, 1, n) and got.dtype == dtype
        want = F.linear(x.float(), w.float(), None if b is None else b.float())
        if dtype == torch.float32:
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        else:  # the float32 sum rounded once to bfloat16
            torch.testing.assert_close(got.float(), want.to(torch.bfloat16).float(), atol=1e-2, rtol=1e-2)


def test_declines_what_it_does_not_compute():
    needs_kernel()
    w = torch.randn(8, 16)
    assert not native_gemv.supports(torch.randn(2, 16), w, None)  # two rows: the plain product's job
    assert not native_gemv.supports(torch.randn(1, 16), w.t().contiguous().t(), None)  # (in, out) storage
    assert not native_gemv.supports(torch.randn(1, 16, dtype=torch.float64), w.double(), None)
    assert not native_gemv.supports(torch.randn(1, 16).bfloat16(), w, None)  # mixed dtypes
    with torch.enable_grad():
        assert not native_gemv.supports(torch.randn(1, 16), w.requires_grad_(), None)  # training


@pytest.mark.parametrize(
    "break_it, reason",
    [
        (lambda mp, tmp: mp.setattr(native_gemv, "compiler", lambda: None), "no_compiler"),
        (lambda mp, tmp: mp.setenv("CXX", "false"), "build_failed"),
        (lambda mp, tmp: mp.setattr(native_gemv, "parity_error", lambda: "float32 (7, 33): off"), "mismatch"),
        (lambda mp, tmp: mp.setenv("PLAYGROUND_ACCEL", "off"), "off"),
    ],
)
def test_without_a_working_kernel_the_plain_path_runs(monkeypatch, tmp_path, break_it, reason):
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))  # nothing cached: a build is attempted
    break_it(monkeypatch, tmp_path)
    assert not native_gemv.available()
    assert native_gemv.status().reason == reason and not native_gemv.status().available
    assert decode_decisions.one_row_kernel((64, 64), torch.float32, 4) is None  # no decision, no measurement
    model = accelerate(_model())
    assert all(compiled_kernel_threads(m) is None for m in model.modules() if isinstance(m, nn.Linear))
    assert "forward" not in model.out_head.__dict__
    assert not any("one-row kernel" in c.decision for c in kernels.measured())


def test_a_build_is_cached_and_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))
    needs_kernel()
    first = native_gemv.status()
    assert first.build_seconds > 0 and first.library.startswith(str(tmp_path)) and first.vector_bits in (0, 256, 512)
    native_gemv.forget()
    assert native_gemv.available() and native_gemv.status().build_seconds == 0.0
    assert native_gemv.status().library == first.library


def _model(dtype=torch.float32):
    torch.manual_seed(0)
    model = GPTModel(GPTConfig(**TINY))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.2 * torch.randn(p.shape) if name.endswith("scale") else 0.1 * torch.randn(p.shape))
    return model.to(dtype).eval()


def _force_compiled(monkeypatch, winner):
    monkeypatch.setattr(
        decode_decisions, "one_row_kernel", lambda shape, dtype, count: kernels.Choice("forced", winner, measured=False)
    )
    monkeypatch.setattr(decode_decisions, "stacked_qkv", lambda *a: kernels.Choice("forced", "stacked", measured=False))


def _decode(model, ids, n_new=10):
    with torch.no_grad():
        cache = model.new_kv_cache()
        out = [model(ids, kv_cache=cache)]
        for _ in range(n_new):
            out.append(model(out[-1][:, -1:].argmax(-1), kv_cache=cache))
    return torch.cat(out, dim=1).float()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("winner", ["compiled", "compiled_1_thread"])
def test_a_model_on_the_compiled_kernel_decodes_as_the_plain_one(monkeypatch, dtype, winner):
    needs_kernel()
    ids = torch.randint(0, 50257, (1, 9), generator=torch.Generator().manual_seed(1))
    _force_compiled(monkeypatch, "aten")
    plain = accelerate(_model(dtype))
    assert all(compiled_kernel_threads(m) is None for m in plain.modules() if isinstance(m, nn.Linear))
    want = _decode(plain, ids)
    _force_compiled(monkeypatch, winner)
    fast = accelerate(_model(dtype))
    threads = {compiled_kernel_threads(m) for m in fast.modules() if isinstance(m, nn.Linear)}
    assert threads == {0 if winner == "compiled" else 1}
    assert all(m.weight.is_contiguous() for m in fast.modules() if isinstance(m, nn.Linear))  # the order it reads
    assert type(fast.out_head) is nn.Linear and fast.state_dict().keys() == plain.state_dict().keys()
    calls = []
    real = native_gemv.linear
    monkeypatch.setattr(native_gemv, "linear", lambda *a: calls.append(a[1].shape) or real(*a))
    got = _decode(fast, ids)
    assert len(calls) == 10 * (2 * 4 + 1)  # Q/K/V stacked, out_proj, 2 MLP a layer, the head: none for the prompt
    spread = want.std().item()
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, atol=1e-4 * spread, rtol=1e-4)
    else:
        assert (got - want).abs().mean() < 0.02 * spread
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_routing_back_to_the_plain_forward(monkeypatch):
    needs_kernel()
    lin = nn.Linear(16, 8)
    use_compiled_kernel(lin, 1)
    assert compiled_kernel_threads(lin) == 1
    twin = copy.deepcopy(lin)  # a trainer's snapshot: the copy routes its own weights
    assert compiled_kernel_threads(twin) == 1 and twin.forward.__self__ is twin
    use_compiled_kernel(lin, None)
    assert compiled_kernel_threads(lin) is None and "forward" not in lin.__dict__
    x = torch.randn(1, 16)
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))
