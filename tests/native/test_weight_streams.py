"""How many weight rows the compiled one-row products read at once (runtime.weight_streams): four side by side or
one after another give every product, step and batch the very same bits, so the machine's choice is a matter of
speed only; the choice is made once, names one of the two, and reaches the decode step's library too."""

import pytest
import torch

from playground.accel import native_decode
from playground.engine.quantize import quantize_int8
from playground.runtime import kernels, native_gemv, native_step
from playground.runtime.weight_streams import NAMES, weight_streams
from tests.native.test_native_gemv import needs_kernel
from tests.native.test_native_step import needs_step
from tests.native.test_native_step_rows import assert_same, clone_rows, model_for, prompted_rows

pytestmark = pytest.mark.usefixtures("forget_compiled")

# Rows of odd lengths (no multiple of the 32 or 64 columns a vector pass takes) and counts (no multiple of 4).
SHAPES = [(7, 36), (50, 100), (1031, 768), (4, 3072)]


def each_way(product):
    """``product()`` with four rows read side by side, then with one after another."""
    out = {}
    for rows in native_gemv.ROWS_AT_ONCE:
        native_gemv.set_rows_at_once(rows)
        out[rows] = product()
    native_gemv.set_rows_at_once(4)
    return out[4], out[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_float_products_are_the_same_bits_either_way(dtype, shape):
    needs_kernel()
    gen = torch.Generator().manual_seed(shape[0])
    w = torch.randn(*shape, generator=gen).to(dtype)
    b = torch.randn(shape[0], generator=gen).to(dtype)
    x = torch.randn(1, shape[1], generator=gen).to(dtype)
    for threads in (1, 2):
        four, one = each_way(lambda t=threads: native_gemv.linear(x, w, b, t))
        assert torch.equal(four, one)
        torch.testing.assert_close(one.float(), torch.nn.functional.linear(x, w, b).float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("shape", SHAPES)
def test_int8_products_are_the_same_bits_either_way(shape):
    needs_kernel()
    gen = torch.Generator().manual_seed(shape[1])
    q = torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8)
    scale = torch.rand(shape[0], generator=gen) / 100
    bias = torch.randn(shape[0], generator=gen)
    x = torch.randn(1, shape[1], generator=gen)
    four, one = each_way(lambda: native_gemv.linear_int8_weights(x, q, scale, bias, 2))
    assert torch.equal(four, one)
    if native_gemv.int8_dot_ready():
        sums = q.sum(1, dtype=torch.int32)
        four, one = each_way(lambda: native_gemv.linear_int8_dynamic(x, q, sums, scale, bias, 2))
        assert torch.equal(four, one)


@pytest.mark.parametrize("precision", ["float32", "bfloat16", "int8", "int8-dynamic"])
def test_a_batch_read_four_ways_equals_each_row_read_one_way(precision):
    """The batched step reads blocks of four weight rows whatever the setting; each row alone follows it."""
    needs_step()
    if precision == "int8-dynamic" and not native_gemv.int8_dot_ready():
        pytest.skip("no int8 dot-product instruction in this build: int8-dynamic keeps the torch path")
    model = model_for(torch.bfloat16 if precision == "bfloat16" else torch.float32, "tails", seed=5)
    if precision.startswith("int8"):
        quantize_int8(model, "float32", dynamic=precision == "int8-dynamic")
    assert native_decode.set_native_step(model, 0)
    rows = prompted_rows(model, 6, seed=11)
    alone = clone_rows(rows, model)
    with torch.no_grad():
        native_gemv.set_rows_at_once(4)
        together = native_decode.decode_rows(model, rows)
        native_gemv.set_rows_at_once(1)
        for i, row in enumerate(rows):
            assert_same(together[i], native_decode.decode_rows(model, [alone[i]])[0], row.cache, alone[i].cache)
    native_gemv.set_rows_at_once(4)


def test_the_choice_is_made_once_and_reaches_the_steps_library():
    needs_kernel()
    needs_step()
    choice = weight_streams()
    assert choice is not None and choice.winner in NAMES.values() and choice.measured
    assert set(choice.seconds) == set(NAMES.values())
    rows = 1 if choice.winner == NAMES[1] else 4
    assert native_gemv.rows_at_once() == rows
    assert native_step._LIBRARY.loaded.pg_rows_at_once() == rows  # the step's own copy of the setting follows
    native_gemv.set_rows_at_once(5 - rows)
    assert native_step._LIBRARY.loaded.pg_rows_at_once() == 5 - rows
    assert weight_streams() is choice  # decided: not measured again, and set once more
    assert native_gemv.rows_at_once() == rows and kernels.decided(("weight streams",)) is choice


def test_only_one_or_four_rows():
    needs_kernel()
    with pytest.raises(ValueError, match="one of"):
        native_gemv.set_rows_at_once(3)
