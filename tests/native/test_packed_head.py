"""The native step's packed output head (accel.packed_head, decode_step.cpp's head_tiles.cpp): its layout,
that it is made where the model is built, that it follows the head when the weights change in place, and that the
memory budget counts it."""

import pytest
import torch

from playground.accel import held_bytes, native_choice, native_decode, packed_head
from playground.accel.copies import head_bytes
from playground.engine.decoding import Row, plain_row
from tests.native.test_native_step import needs_step, relative
from tests.native.test_native_step_rows import clone_rows, model_for, prompted_rows

pytestmark = pytest.mark.usefixtures("forget_compiled")


def test_the_packed_head_holds_each_tile_of_16_rows_column_by_column():
    weight = torch.randn(50257, 36, generator=torch.Generator().manual_seed(0))
    packed = packed_head.packed_head(weight)
    assert packed.shape == (3142, 36, 16) and packed.is_contiguous()
    for t, c, lane in [(0, 0, 0), (0, 35, 15), (17, 3, 9), (3140, 20, 4)]:
        assert packed[t, c, lane] == weight[16 * t + lane, c]
    assert torch.equal(packed[3141, :, 0], weight[50256])  # the last row, alone in its tile
    assert not packed[3141, :, 1:].any()  # the tile's other 15 rows: zeros
    assert packed_head.packed_head_bytes(model_for(torch.float32).cfg) == packed.nbytes


def test_a_float32_step_packs_its_head_where_the_model_is_built_and_a_bfloat16_one_does_not():
    needs_step()
    for dtype, packs in ((torch.float32, True), (torch.bfloat16, False)):
        model = model_for(dtype)
        assert native_decode.set_native_step(model, 0)
        plan = native_decode._PLANS[model]  # made now, not at the first token
        assert (plan.head_version is not None) is packs
        assert plan.dims[12] == int(packs)
        assert head_bytes(model) == (packed_head.packed_head_bytes(model.cfg) if packs else 0)


def test_held_bytes_count_the_packed_head_beside_the_stacked_attention():
    needs_step()
    model = model_for(torch.float32)
    plain = held_bytes(model)
    assert native_decode.set_native_step(model, 0)
    assert held_bytes(model) == plain + packed_head.packed_head_bytes(model.cfg)


@torch.no_grad()
def test_a_head_changed_in_place_is_packed_again_before_the_next_step():
    needs_step()
    model = model_for(torch.float32, "blocks", seed=3)
    assert native_decode.set_native_step(model, 0)
    rows = prompted_rows(model, 3, seed=5)
    before = native_decode.decode_rows(model, clone_rows(rows, model))
    # an optimizer's step or a user's edit: the head (tied to the token embedding here) scaled in place
    model.out_head.weight.mul_(0.5)
    got = native_decode.decode_rows(model, clone_rows(rows, model))
    for result, old, row in zip(got, before, rows):
        want = plain_row(model, Row(row.token, clone_rows([row], model)[0].cache, row.capture))
        assert result is not None and old is not None
        assert relative(result[0], want[0]) <= native_choice.TOLERANCE[torch.float32]
        assert relative(old[0], want[0]) > 0.1  # the stale packed head would have given the old logits
