"""The bench's "time outside the matrix products": which products a step makes, the difference it reports,
and the lines it prints (no timing asserted: the figures are synthetic or only checked for their form)."""

from __future__ import annotations

import pytest
import torch.nn as nn

from bench import decode, report
from playground.accel.decode_paths import set_stacked_qkv
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel

TINY = dict(context_length=48, emb_dim=64, n_heads=4, n_layers=3)


@pytest.mark.parametrize("stacked", [False, True])
def test_step_products_runs_each_of_a_steps_products_once(stacked):
    model = GPTModel(GPTConfig(**TINY)).eval()
    for block in model.trf_blocks:
        set_stacked_qkv(block.att, stacked)
    shapes = []
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.register_forward_hook(lambda mod, args, out: shapes.append((tuple(args[0].shape), tuple(out.shape))))
    run = decode.step_products(model)
    run()
    per_layer = 3 if stacked else 6  # the stacked Q/K/V product is one F.linear, not a module call
    assert len(shapes) == TINY["n_layers"] * per_layer + 1
    assert all(inp[:-1] == (1, 1) for inp, _ in shapes)  # one row each
    assert shapes[-1][1] == (1, 1, model.cfg.vocab_size)  # the head last
    assert decode.products_seconds(run, reps=2) > 0


def test_outside_is_the_median_step_minus_the_median_products():
    result = decode.DecodeResult(
        steps={"ours float32": [0.030, 0.032, 0.034], "transformers float32": [0.05]},
        products={"ours float32": [0.020, 0.025, 0.021]},
    )
    out = result.outside_products()
    assert list(out) == ["ours float32"]  # peers have no products of ours to subtract
    assert out["ours float32"] == pytest.approx({"step_ms": 32.0, "products_ms": 21.0, "outside_ms": 11.0})


def test_report_prints_outside_time_and_the_compiled_kernel():
    r = {
        "decode_tok_s": {"ours float32": 40.0, "ours float32, plain kernels": 32.0},
        "decode_outside_products_ms": {"ours float32": {"step_ms": 25.0, "products_ms": 20.0, "outside_ms": 5.0}},
        "native_gemv": {"available": True, "compiler": "/usr/bin/g++", "vector_bits": 512, "reason": "ready"},
    }
    text = "\n".join(report.outside_lines(r))
    assert "ours float32 25.0 ms = 20.0 products + 5.0 outside" in text
    assert "512-bit" in text and "1.25×" in text
    r["native_gemv"] = {"available": False, "reason": "no_compiler", "detail": ""}
    assert "not used (no_compiler" in "\n".join(report.outside_lines(r))
    r["decode_paths"] = {"ours float32": "native step", "ours int8": "torch forward"}
    assert "ours float32: native step; ours int8: torch forward" in "\n".join(report.outside_lines(r))


def test_a_model_on_the_native_step_times_its_products_in_the_step_s_region():
    from playground.accel import native_decode
    from playground.runtime import native_step

    model = GPTModel(GPTConfig(**TINY)).eval()
    assert decode.decode_path(model) == "torch forward"
    if not native_decode.set_native_step(model, 0):
        pytest.skip(f"no compiled step here: {native_step.status().reason}")
    assert decode.decode_path(model) == "native step"
    run = decode.step_products(model)
    assert run is not None and decode.products_seconds(run, reps=2) > 0


def test_report_names_the_int8_dot_product_kernel_or_why_there_is_none():
    native = {"available": True, "compiler": "/usr/bin/g++", "vector_bits": 512, "reason": "ready"}
    r = {"decode_tok_s": {}, "native_gemv": {**native, "int8_dot_bits": 512, "int8_dot_error": ""}}
    assert "int8 products (512-bit: VNNI, or AVX2's 16-bit pairs)" in "\n".join(report.outside_lines(r))
    r["native_gemv"] = {**native, "int8_dot_bits": 0, "int8_dot_error": "int8 (7, 33): sums off by up to 3"}
    assert "No int8 dot-product kernel (int8 (7, 33): sums off by up to 3)" in "\n".join(report.outside_lines(r))
    r["native_gemv"] = native  # a results file written before the int8 kernel existed: said as it was
    assert "int8" not in "\n".join(report.outside_lines(r))
