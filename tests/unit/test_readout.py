"""``engine.readout.HeadReader`` over more rows than a chunk: the rows read out a vocabulary tile at a time
(``TILE_COLUMNS``) give the figures of a plain float64 readout, the same bits for the top logit and the
targets' logits as the chunked path, and the same figures whichever product and however many lanes."""

import pytest
import torch

from playground.engine import readout
from playground.engine.readout import HeadReader

V, D = 5 * readout.TILE_COLUMNS + 123, 64  # a last tile narrower than the rest


@pytest.fixture(scope="module")
def head():
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(V, D, generator=gen) * 0.3
    rows = torch.randn(3 * readout.CHUNK_ROWS + 5, D, generator=gen)
    targets = torch.randint(0, V, (rows.size(0),), generator=gen)
    targets[:3] = torch.tensor([0, V - 1, readout.TILE_COLUMNS])  # the first, last and a tile's first column
    return weight.t(), rows, targets


@pytest.mark.parametrize("scale", [1.0, 300.0])  # logits within ±60, and far beyond (each tile shifted by its max)
def test_rows_read_a_tile_at_a_time_match_a_float64_readout(head, scale):
    weight_t, rows, targets = head
    rows = rows * scale
    got = HeadReader.for_weight(weight_t)(rows, targets)
    logits = rows.double() @ weight_t.double()
    close = {"rtol": 1e-5, "atol": 2e-5 * scale}  # a float32 product's rounding grows with the logits
    assert torch.equal(got.top_id, logits.argmax(-1))
    torch.testing.assert_close(got.top_logit, logits.max(-1).values, **close)
    torch.testing.assert_close(got.lse, torch.logsumexp(logits, -1), **close)
    torch.testing.assert_close(got.target_logit, logits.gather(1, targets[:, None])[:, 0], **close)
    assert got.rank is None


def test_tiles_give_the_chunked_paths_logits_bit_for_bit(head):
    weight_t, rows, targets = head
    reader = HeadReader.for_weight(weight_t)
    tiled, chunked = reader(rows, targets), reader(rows, targets, rank=True)  # ranks: chunks of CHUNK_ROWS
    assert torch.equal(tiled.top_id, chunked.top_id)
    assert torch.equal(tiled.top_logit, chunked.top_logit)
    assert torch.equal(tiled.target_logit, chunked.target_logit)
    torch.testing.assert_close(tiled.lse, chunked.lse, rtol=1e-6, atol=1e-6)


def test_tiles_give_the_same_figures_in_any_number_of_lanes(head):
    weight_t, rows, targets = head
    one = HeadReader.for_weight(weight_t, product="numpy", lanes=1)(rows, targets)
    for lanes in (2, 3):
        got = HeadReader.for_weight(weight_t, product="numpy", lanes=lanes)(rows, targets)
        for name in ("top_id", "top_logit", "lse", "target_logit"):
            assert torch.equal(getattr(got, name), getattr(one, name)), (lanes, name)


@pytest.mark.parametrize("n_rows", [5, None], ids=["one chunk", "tiles"])
@pytest.mark.parametrize("rank", [False, True], ids=["no ranks", "ranks"])
@pytest.mark.parametrize("bad_id", [V, -1])
def test_a_target_outside_the_vocabulary_is_refused_on_every_path(head, n_rows, rank, bad_id):
    """Past the end or negative (which numpy's indexing would take as the last token), on the tiled path, the
    chunked one and a single chunk alike."""
    weight_t, rows, targets = head
    rows, bad = rows[:n_rows], targets[:n_rows].clone()
    bad[3] = bad_id
    with pytest.raises(IndexError, match=f"target token id {bad_id} is outside the vocabulary of {V:,}"):
        HeadReader.for_weight(weight_t)(rows, bad, rank=rank)
