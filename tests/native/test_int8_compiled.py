"""The compiled int8 kernels (runtime.native_gemv). int8-dynamic on the CPU's int8 dot product (VNNI): torch's
integer sums exactly on random shapes, torch's int8-dynamic result bit for bit, a model on it as on ``int_mm``
(skipped where the build reports no int8 dot product). Weight-only int8 widened to float32 in registers: the
product of the dequantized weights, as ATen's int8 kernel computes it. Both: the old kernels, unchanged, where the compiled kernel is off."""

import copy

import pytest
import torch

from playground.engine.quantize import (
    COMPILED_DYNAMIC,
    COMPILED_WEIGHTS,
    Int8Linear,
    int8_kernel,
    int8_linear_kernels,
    quantize_activations,
    quantize_int8,
    quantize_rows,
    weight_row_sums,
)
from playground.runtime import native_gemv
from tests.unit.test_int8 import _model

pytestmark = pytest.mark.usefixtures("forget_compiled")


def needs_vnni():
    if not native_gemv.int8_dot_ready():
        s = native_gemv.status()
        pytest.skip(f"no int8 dot-product kernel here: {s.reason}, {s.int8_dot_bits} bits {s.int8_dot_error}")


def _random(n, k, seed, bias=True):
    gen = torch.Generator().manual_seed(seed)
    q, s = quantize_rows(torch.randn(n, k, generator=gen))
    x = torch.randn(1, k, generator=gen) * float(torch.rand(1, generator=gen) * 10)
    b = torch.randn(n, generator=gen) if bias else None
    return x, q, s, b


@pytest.mark.parametrize("seed", range(8))
def test_integer_sums_and_row_scale_are_torchs_exactly(seed):
    needs_vnni()
    gen = torch.Generator().manual_seed(100 + seed)
    n = 4 * int(torch.randint(1, 200, (1,), generator=gen)) + seed % 4  # rows past a multiple of 4 too
    k = 64 * int(torch.randint(0, 40, (1,), generator=gen)) + int(torch.randint(1, 64, (1,), generator=gen))
    x, q, _, _ = _random(n, k, seed)
    xq, xs = quantize_activations(x)
    want = (xq.int() @ q.int().t())[0]
    for threads in (0, 1, 2, 3):
        sums, r = native_gemv.int8_dynamic_sums(x, q, weight_row_sums(q), threads)
        assert torch.equal(sums, want), (n, k, threads)
        assert r == float(xs)


def test_the_parity_reference_is_quantize_activations():
    x = torch.randn(1, 300) * 4
    x[0, 7] = 0.5 * float(x.abs().max()) / 127 * 3  # an exact half step: round half to even
    for row in (x, torch.zeros(1, 300)):
        got, want = native_gemv.quantized_row_reference(row), quantize_activations(row)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("shape", [(2304, 768), (768, 3072), (33, 97), (6, 130), (1, 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_result_is_the_int_mm_kernels_bit_for_bit(shape, bias):
    needs_vnni()
    x, q, s, b = _random(*shape, seed=shape[0], bias=bias)
    kernels_here = int8_linear_kernels(dynamic=True)
    assert set(COMPILED_DYNAMIC) <= set(kernels_here) or torch.get_num_threads() == 1
    want = kernels_here["int_mm"](x, q, s, b)
    for name in COMPILED_DYNAMIC:
        if name in kernels_here:
            got = kernels_here[name](x, q, s, b)
            assert got.shape == want.shape and got.dtype == torch.float32
            assert torch.equal(got, want), (name, float((got - want).abs().max()))
    # several rows (a prompt) take torch's integer product: the same numbers
    xs = torch.randn(5, shape[1])
    torch.testing.assert_close(kernels_here["compiled_vnni"](xs, q, s, b), kernels_here["int_mm"](xs, q, s, b))


def test_row_sums_are_kept_per_weight_and_recomputed_when_it_changes():
    q = torch.randint(-127, 128, (10, 70), dtype=torch.int8)
    first = weight_row_sums(q)
    assert weight_row_sums(q) is first and torch.equal(first, q.int().sum(1))
    q[3, 5] = -q[3, 5] if q[3, 5] != 0 else 1
    again = weight_row_sums(q)
    assert again is not first and torch.equal(again, q.int().sum(1))


def _decode(model, ids, n_new=12):
    with torch.no_grad():
        cache = model.new_kv_cache()
        out = [model(ids, kv_cache=cache)]
        for _ in range(n_new):
            out.append(model(out[-1][:, -1:].argmax(-1), kv_cache=cache))
    return torch.cat(out, dim=1)


def _with_kernel(model, name):
    for m in model.modules():
        if isinstance(m, Int8Linear):
            m.kernel = name
    return model


def test_a_model_on_the_compiled_kernel_decodes_as_on_int_mm(monkeypatch):
    needs_vnni()
    dynamic = quantize_int8(_model(seed=2), "float32", dynamic=True)
    ids = torch.randint(0, 50257, (1, 7), generator=torch.Generator().manual_seed(5))
    want = _decode(_with_kernel(copy.deepcopy(dynamic), "int_mm"), ids)
    calls = []
    real = native_gemv.linear_int8_dynamic
    monkeypatch.setattr(native_gemv, "linear_int8_dynamic", lambda *a: calls.append(a[1].shape) or real(*a))
    got = _decode(_with_kernel(dynamic, "compiled_vnni"), ids)
    assert len(calls) == 12 * (2 * 6 + 1)  # Q, K, V, out_proj, 2 MLP a layer, the head: none for the prompt
    assert torch.equal(got, want)


def test_offered_only_for_float32_activations_and_chosen_by_measuring():
    needs_vnni()
    assert not set(COMPILED_DYNAMIC) & set(int8_linear_kernels(dynamic=True, activations=torch.bfloat16))
    assert not set(COMPILED_DYNAMIC) & set(int8_linear_kernels(dynamic=False))
    assert not set(COMPILED_WEIGHTS) & set(int8_linear_kernels(dynamic=True))
    choice = int8_kernel((96, 64), torch.float32, 2, dynamic=True)
    assert "compiled_vnni" in choice.seconds and choice.winner in choice.seconds


def test_off_the_old_kernels_run_and_results_are_unchanged(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    assert not native_gemv.int8_dot_ready() and native_gemv.status().reason == "off"
    assert set(int8_linear_kernels(dynamic=True)) == {"dequantize", "int_mm"}
    assert set(int8_linear_kernels(dynamic=False)) == {"dequantize", "int8pack"}
    dynamic = quantize_int8(_model(seed=3), "float32", dynamic=True)
    linears = [m for m in dynamic.modules() if isinstance(m, Int8Linear)]
    assert linears and all(m.kernel in ("dequantize", "int_mm") for m in linears)
    assert not list(tmp_path.iterdir())  # nothing was built
    ids = torch.randint(0, 50257, (1, 5), generator=torch.Generator().manual_seed(6))
    got = _decode(dynamic, ids, 4)
    for name in ("dequantize", "int_mm"):
        want = _decode(_with_kernel(copy.deepcopy(dynamic), name), ids, 4)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_with_measurements_off_nothing_is_built_and_the_plain_kernel_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    assert set(int8_linear_kernels(dynamic=True)) == {"dequantize", "int_mm"}
    assert set(int8_linear_kernels()) == {"dequantize", "int8pack"}
    dynamic = quantize_int8(_model(seed=3), "float32", dynamic=True)
    assert {m.kernel for m in dynamic.modules() if isinstance(m, Int8Linear)} == {"dequantize"}
    assert native_gemv.status().reason == "not_tried" and not list(tmp_path.iterdir())


def test_without_vnni_in_the_build_the_float_kernels_stay(monkeypatch):
    monkeypatch.setattr(native_gemv, "int8_parity_error", lambda: "int8 (7, 33): sums off by up to 3")
    if not native_gemv.available():
        pytest.skip(f"no compiled kernel here: {native_gemv.status().reason}")
    s = native_gemv.status()
    assert s.available and s.int8_dot_bits == 0 and not native_gemv.int8_dot_ready()
    assert s.int8_dot_error in ("", "int8 (7, 33): sums off by up to 3")  # "" where the build has no VNNI at all
    assert set(int8_linear_kernels(dynamic=True)) == {"dequantize", "int_mm"}


def needs_kernel():
    if not native_gemv.available():
        pytest.skip(f"no compiled kernel here: {native_gemv.status().reason} {native_gemv.status().detail}")


@pytest.mark.parametrize("act", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", range(4))
def test_weight_only_int8_is_the_product_of_the_dequantized_weights(act, seed):
    needs_kernel()
    gen = torch.Generator().manual_seed(200 + seed)
    n, k = 4 * int(torch.randint(1, 150, (1,), generator=gen)) + seed, int(torch.randint(1, 900, (1,), generator=gen))
    x, q, s, b = _random(n, k, seed, bias=seed % 2 == 0)
    x, s, b = x.to(act), s.to(act), None if b is None else b.to(act)
    here = int8_linear_kernels()
    assert set(COMPILED_WEIGHTS) <= set(here) or torch.get_num_threads() == 1
    exact = torch.nn.functional.linear(x.double(), q.double() * s.double()[:, None], None if b is None else b.double())
    for name in (n for n in COMPILED_WEIGHTS if n in here):
        got = here[name](x, q, s, b)
        assert got.dtype == act and got.shape == (1, n)
        if act == torch.float32:  # only the order of the float32 sums differs
            torch.testing.assert_close(got.double(), exact, atol=1e-4 * float(exact.abs().max()), rtol=1e-5)
        else:  # the scaled sum and the bias add each rounded to bfloat16, as ATen's kernel and add do
            torch.testing.assert_close(got.double(), exact, atol=1e-2 * float(exact.abs().max()), rtol=1e-2)
    # A prompt's rows take ATen's kernel (whose bfloat16 case reads past the row, or crashes, when in is not a
    # multiple of 32: in here is one of 64, as GPT-2's are).
    xs, q64 = torch.randn(3, 64).to(act), torch.randint(-127, 128, (n, 64), dtype=torch.int8)
    assert torch.equal(here["compiled"](xs, q64, s, b), here["int8pack"](xs, q64, s, b))


def test_a_weight_only_int8_model_on_the_compiled_kernel_decodes_as_on_int8pack():
    needs_kernel()
    model = quantize_int8(_model(seed=4), "float32")
    ids = torch.randint(0, 50257, (1, 7), generator=torch.Generator().manual_seed(7))
    want = _decode(_with_kernel(copy.deepcopy(model), "int8pack"), ids)
    got = _decode(_with_kernel(model, "compiled"), ids)
    torch.testing.assert_close(got, want, atol=1e-4 * float(want.std()), rtol=1e-4)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
