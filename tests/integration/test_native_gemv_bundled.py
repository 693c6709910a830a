"""The bundled model decoding on the compiled one-row kernel (runtime.native_gemv) gives the greedy tokens
of the plain path, float32 and bfloat16, and in int8 on the compiled int8 kernels those of torch's (`_int_mm`
for int8-dynamic, `_weight_int8pack_mm` for weight-only; the kernels: tests/native/test_native_gemv.py, test_int8_compiled.py)."""

import pytest
import torch.nn as nn

from playground.accel import accelerate
from playground.accel.decode_paths import compiled_kernel_threads
from playground.engine.sampling import generate
from playground.engine.tokenizer import load_tokenizer
from playground.engine.weights import load_checkpoint
from playground.runtime import decode_decisions, kernels, native_gemv
from playground.server.recipes import BUNDLED_CHECKPOINT


def _greedy(dtype, winner, monkeypatch, prompt):
    kernels.forget()
    monkeypatch.setattr(
        decode_decisions, "one_row_kernel", lambda shape, dtype, count: kernels.Choice("forced", winner, measured=False)
    )
    model = accelerate(load_checkpoint(BUNDLED_CHECKPOINT, dtype=dtype, device="cpu"))
    routed = {compiled_kernel_threads(m) for m in model.modules() if isinstance(m, nn.Linear)}
    assert routed == ({None} if winner == "aten" else {0})
    return [s.token_id for s in generate(model, prompt, max_new_tokens=40, temperature=0)]


@pytest.mark.skipif(not BUNDLED_CHECKPOINT.is_file(), reason="no bundled model")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bundled_greedy_tokens_with_and_without_the_compiled_kernel(monkeypatch, dtype):
    native_gemv.forget()
    if not native_gemv.available():
        pytest.skip(f"no compiled kernel here: {native_gemv.status().reason}")
    prompt = load_tokenizer().encode("ROMEO:\nBut soft, what light through yonder window breaks?\n")
    plain = _greedy(dtype, "aten", monkeypatch, prompt)
    compiled = _greedy(dtype, "compiled", monkeypatch, prompt)
    assert compiled == plain and len(set(plain)) > 5  # a real continuation, not one token repeated
    kernels.forget()


@pytest.mark.skipif(not BUNDLED_CHECKPOINT.is_file(), reason="no bundled model")
@pytest.mark.parametrize(
    "precision, old, new",
    [("int8-dynamic", "int_mm", "compiled_vnni"), ("int8", "int8pack", "compiled")],
)
def test_bundled_int8_greedy_tokens_on_the_compiled_kernel_and_on_torchs(precision, old, new):
    from playground.engine.quantize import Int8Linear, quantize_int8

    native_gemv.forget()
    ready = native_gemv.int8_dot_ready() if precision == "int8-dynamic" else native_gemv.available()
    if not ready:
        pytest.skip(f"no compiled {precision} kernel here: {native_gemv.status().reason}")
    prompt = load_tokenizer().encode("ROMEO:\nBut soft, what light through yonder window breaks?\n")
    tokens = {}
    for kernel in (old, new):
        dtype = "float32" if precision == "int8-dynamic" else "bfloat16"  # as the recipes build them
        model = load_checkpoint(BUNDLED_CHECKPOINT, dtype=dtype, device="cpu")
        model = quantize_int8(model, dtype, dynamic=precision == "int8-dynamic")
        for m in model.modules():
            if isinstance(m, Int8Linear):
                m.kernel = kernel
        tokens[kernel] = [s.token_id for s in generate(model, prompt, max_new_tokens=40, temperature=0)]
    assert tokens[new] == tokens[old] and len(set(tokens[old])) > 5
    kernels.forget()
