"""Where the native step's weights live (engine.step_weights, runtime.huge_pages): moved into one mapping on
2 MB pages with their values, shapes, ties and state_dict unchanged, and the model decoding as before."""

import mmap

import pytest
import torch

from playground.accel import native_decode, step_weights
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sampling import generate
from playground.runtime import huge_pages, native_step


def test_empty_like_all_gives_each_dtype_and_shape_in_one_mapping_aligned_to_cache_lines():
    tensors = [torch.zeros(3, 5), torch.zeros(7, dtype=torch.bfloat16), torch.zeros(2, 2, dtype=torch.int8)]
    views = huge_pages.empty_like_all(tensors)
    assert views is not None
    assert [(v.dtype, v.shape) for v in views] == [(t.dtype, t.shape) for t in tensors]
    assert all(v.is_contiguous() and v.data_ptr() % huge_pages.ALIGN == 0 for v in views)
    assert views[0].data_ptr() % huge_pages.PAGE == 0  # the mapping's first tensor starts a 2 MB page
    ends = [v.data_ptr() + v.nbytes for v in views]
    assert all(end <= nxt.data_ptr() for end, nxt in zip(ends, views[1:]))  # one after another, never overlapping
    views[1].fill_(1.5)
    assert views[0].abs().sum() == 0 and float(views[1].float().sum()) == 1.5 * 7


def test_store_moves_every_weight_with_its_values_and_keeps_the_tie():
    cfg = GPTConfig(context_length=32, emb_dim=64, n_heads=4, n_layers=2, tie_weights=True)
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(0)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    idx = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad():
        want = model(idx)
    w = model.trf_blocks[1].ff.layers[0].weight
    w.data = w.data.t().contiguous().t()  # stored [in, out]
    params = [p for p in model.parameters()]
    addresses = [p.data_ptr() for p in params]
    step_weights.store(params, step_weights.row_copies(params))
    assert w.is_contiguous()
    assert all(p.data_ptr() != a for p, a in zip(params, addresses))  # every one moved
    assert model.out_head.weight is model.tok_emb.weight  # still one tensor
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    with torch.no_grad():
        assert torch.equal(model(idx), want)


def test_tensors_sharing_memory_stay_where_they_are():
    whole = torch.arange(12.0)
    view = whole[4:]
    alone = torch.ones(3)
    where = alone.data_ptr()
    step_weights.store([view, whole, alone], {})
    assert alone.data_ptr() != where  # moved: it shares its memory with nothing listed
    assert view.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()  # still one memory
    view[0] = -1.0
    assert whole[4] == -1.0
    assert torch.equal(alone, torch.ones(3))


def test_a_model_set_on_the_native_step_has_its_weights_in_one_mapping_and_decodes_the_same():
    if not native_step.available() or not hasattr(mmap, "MAP_ANONYMOUS"):
        pytest.skip(f"no compiled step or anonymous mapping here: {native_step.status().reason}")
    cfg = GPTConfig(context_length=32, emb_dim=64, n_heads=4, n_layers=2)
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(1)).eval()
    want = [s.token_id for s in generate(model, [5, 6, 7], max_new_tokens=6, temperature=0)]
    assert native_decode.set_native_step(model, 0)
    assert len({p.untyped_storage().data_ptr() for p in model.parameters()}) == 1
    assert [s.token_id for s in generate(model, [5, 6, 7], max_new_tokens=6, temperature=0)] == want
    native_decode.set_native_step(model, None)
