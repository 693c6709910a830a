"""GPT-2 small built for real (~0.5 GB of float32): its live parameter count and its module tree (counts
from configs and on meta tensors: tests/unit/test_inspection.py)."""

import pytest

from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from playground.inside.inspection import (
    count_parameters,
    module_tree,
)


@pytest.fixture(scope="module")
def gpt2_small():
    """GPT-2 small built for real, once: ~0.5 GB of float32."""
    return GPTModel(PRESETS["gpt2-small"])


def test_gpt2_small_live_count(gpt2_small):
    assert count_parameters(gpt2_small) == 124_439_808
    # torch's own sum counts the tied embedding once too (parameters() de-duplicates)...
    assert sum(p.numel() for p in gpt2_small.parameters()) == 124_439_808
    # ...and naively counting every name would add the 38,597,376-number output head again.
    naive = sum(p.numel() for _, p in gpt2_small.named_parameters(remove_duplicate=False))
    assert naive - 124_439_808 == 50257 * 768


def test_module_tree_of_gpt2_small(gpt2_small):
    rows = module_tree(gpt2_small)
    by_name = {r.name: r for r in rows}
    root = rows[0]
    assert root.name == "" and root.type == "GPTModel" and root.depth == 0
    assert root.total_params == count_parameters(gpt2_small) == 124_439_808
    head = by_name["out_head"]
    assert head.tied_to == "tok_emb.weight"
    assert head.own_params == 0 and head.total_params == 0
    assert head.shape == "weight [50257, 768]"
    assert by_name["tok_emb"].own_params == 38_597_376 and by_name["tok_emb"].tied_to == ""
    q = by_name["trf_blocks.0.att.W_query"]
    assert q.shape == "weight [768, 768] · bias [768]" and q.own_params == 768 * 768 + 768 and q.depth == 4
    assert by_name["trf_blocks"].total_params == 12 * 7_087_872  # one GPT-2 small block
    assert by_name["trf_blocks.11"].total_params == 7_087_872
    # Each tensor is counted once: the own counts add up to the total.
    assert sum(r.own_params for r in rows) == 124_439_808
