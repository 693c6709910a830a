"""The batched native decode step (native_decode.decode_rows on decode_step.cpp's pg_step_rows): every row's
logits, the keys and values it writes and its attention are bit for bit those it gets alone, whatever rows are
beside it and whatever the team size; and generations stepped together through the decoder seam make exactly
the steps each makes alone."""

import dataclasses

import pytest
import torch

from playground.accel import accelerate, native_choice, native_decode
from playground.engine.decoding import Row, decoder_of, plain_row
from playground.engine.kv_cache import KVCache
from playground.engine.quantize import quantize_int8
from playground.engine.sampling import generate
from playground.runtime import native_gemv, native_step
from tests.native.test_native_step import needs_step, relative
from tests.tiny_models import random_model

pytestmark = pytest.mark.usefixtures("forget_compiled")

DTYPES = [torch.float32, torch.bfloat16]
# Shapes whose products have tails: d = 36 and ff = 144 are no multiple of the kernels' 32 or 64 columns, a
# vocabulary of 50,257 no multiple of their 4 rows, a head of 12 rows; and one with whole blocks everywhere.
SHAPES = {
    "tails": dict(emb_dim=36, n_heads=3, context_length=40),
    "blocks": dict(emb_dim=64, n_heads=4, context_length=40),
}


def model_for(dtype, shape="tails", seed=0):
    return random_model(seed, **SHAPES[shape]).to(dtype)


def full_copy(cache: KVCache, model) -> KVCache:
    out = model.new_kv_cache()
    out.k.copy_(cache.k)
    out.v.copy_(cache.v)
    out.length = cache.length
    return out


@torch.no_grad()
def prompted_rows(model, n: int, seed: int) -> list[Row]:
    """``n`` rows after prompts of different lengths (1 to 25 tokens), every third capturing attention."""
    gen = torch.Generator().manual_seed(seed)
    vocab, out = model.cfg.vocab_size, []
    for i in range(n):
        length = int(torch.randint(1, 26, (1,), generator=gen))
        prompt = torch.randint(0, vocab, (1, length), generator=gen)
        cache = model.new_kv_cache()
        model(prompt, kv_cache=cache)
        out.append(Row(int(torch.randint(0, vocab, (1,), generator=gen)), cache, i % 3 == 0))
    return out


def clone_rows(rows: list[Row], model) -> list[Row]:
    return [Row(r.token, full_copy(r.cache, model), r.capture) for r in rows]


def assert_same(got, want, got_cache: KVCache, want_cache: KVCache):
    assert got is not None and want is not None
    assert torch.equal(got[0], want[0])
    assert got_cache.length == want_cache.length
    assert torch.equal(got_cache.k, want_cache.k) and torch.equal(got_cache.v, want_cache.v)
    assert (got[1] is None) == (want[1] is None)
    for a, b in zip(got[1] or [], want[1] or []):
        assert torch.equal(a, b)


@torch.no_grad()
def batch_against_alone(model, n_rows: int, seed: int, steps: int = 3):
    """Step ``n_rows`` rows together ``steps`` times and each alone from the same caches: bit-identical."""
    rows = prompted_rows(model, n_rows, seed)
    alone = clone_rows(rows, model)
    for _ in range(steps):
        together = native_decode.decode_rows(model, rows)
        for i, row in enumerate(rows):
            by_itself = native_decode.decode_rows(model, [alone[i]])[0]
            assert_same(together[i], by_itself, row.cache, alone[i].cache)
            token = int(together[i][0].argmax())
            rows[i] = Row(token, row.cache, row.capture)
            alone[i] = Row(token, alone[i].cache, row.capture)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("n_rows", [2, 5, 8, 17])
def test_a_row_in_a_batch_is_bit_identical_to_the_row_alone(dtype, shape, n_rows):
    needs_step()
    model = model_for(dtype, shape)
    assert native_decode.set_native_step(model, 0)
    batch_against_alone(model, n_rows, seed=n_rows)


@pytest.mark.parametrize("precision", ["int8", "int8-bfloat16", "int8-dynamic"])
def test_int8_rows_in_a_batch_are_bit_identical_too(precision):
    needs_step()
    if precision == "int8-dynamic" and not native_gemv.int8_dot_ready():
        pytest.skip("no int8 dot-product instruction in this build: int8-dynamic keeps the torch path")
    model = model_for(torch.float32, "blocks", seed=2)
    quantize_int8(model, "bfloat16" if precision == "int8-bfloat16" else "float32", dynamic=precision == "int8-dynamic")
    assert native_decode.set_native_step(model, 0)
    batch_against_alone(model, 5, seed=7, steps=2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_thread_two_and_three_give_the_same_bits(dtype):
    """Three threads on a two-core machine: one is often set aside by the OS, and the others take its
    share of the output head (decode_step.cpp)."""
    needs_step()
    model = model_for(dtype, "tails", seed=4)
    rows = prompted_rows(model, 6, seed=3)
    results = {}
    for threads in (1, 2, 3):
        assert native_decode.set_native_step(model, threads)
        mine = clone_rows(rows, model)
        with torch.no_grad():
            results[threads] = (native_decode.decode_rows(model, mine), mine)
    one, one_rows = results[1]
    for threads in (2, 3):
        many, many_rows = results[threads]
        for a, b, ra, rb in zip(one, many, one_rows, many_rows):
            assert_same(a, b, ra.cache, rb.cache)


def test_a_call_of_many_rows_starts_on_the_whole_team_where_one_row_runs_on_one_thread(monkeypatch):
    # A one-row step is often fastest on one thread (the team's barriers cost more than they save); a room's
    # rows are many rows' work between two barriers, so their calls start on every thread, and the team
    # choice (runtime.team_under_load) moves them to one only when that is measured faster.
    from playground.runtime.team_under_load import TeamChoice

    needs_step()
    model = model_for(torch.float32, "tails", seed=5)
    assert native_decode.set_native_step(model, 1)
    native_decode._TEAMS[model] = TeamChoice(1)  # what prepare keeps where one thread won
    teams = []
    real = native_step.run_rows
    monkeypatch.setattr(native_step, "run_rows", lambda *a: teams.append(a[-1]) or real(*a))
    with torch.no_grad():
        native_decode.decode_rows(model, clone_rows(prompted_rows(model, 2, seed=1), model))
        native_decode.decode_rows(model, clone_rows(prompted_rows(model, native_decode.WHOLE_TEAM_ROWS, seed=2), model))
    assert teams == [1, torch.get_num_threads()]


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_rows_match_the_torch_forward(dtype):
    needs_step()
    model = model_for(dtype, "blocks", seed=5)
    assert native_decode.set_native_step(model, 0)
    rows = prompted_rows(model, 9, seed=11)
    plain = clone_rows(rows, model)
    with torch.no_grad():
        got = native_decode.decode_rows(model, rows)
        for result, row, ref in zip(got, rows, plain):
            want = plain_row(model, ref)
            assert result is not None
            assert relative(result[0], want[0]) <= native_choice.TOLERANCE[dtype]
            n = row.cache.length
            assert n == ref.cache.length
            for a, b in ((row.cache.k, ref.cache.k), (row.cache.v, ref.cache.v)):
                assert relative(a[..., :n, :], b[..., :n, :]) <= (1e-5 if dtype == torch.float32 else 2e-2)
            for pa, pb in zip(result[1] or [], want[1] or []):
                assert torch.allclose(pa, pb, atol=1e-5 if dtype == torch.float32 else 2e-2)


def test_rows_the_step_cannot_take_are_none_and_the_rest_still_run():
    needs_step()
    model = model_for(torch.float32, "tails")
    assert native_decode.set_native_step(model, 0)
    rows = prompted_rows(model, 4, seed=1)
    rows[1] = Row(model.cfg.vocab_size, rows[1].cache)  # outside the vocabulary
    full = rows[2].cache
    full.length = full.capacity  # no room left
    rows.append(Row(3, rows[0].cache))  # the same cache twice in one call: only its first row
    with torch.no_grad():
        got = native_decode.decode_rows(model, rows)
    assert [g is not None for g in got] == [True, False, False, True, False]
    native_decode.set_native_step(model, None)
    with torch.no_grad():
        assert native_decode.decode_rows(model, rows[:1]) == [None]


SETTINGS = [
    dict(temperature=0),
    dict(temperature=0.8, top_k=20, seed=1),
    dict(temperature=1.3, top_p=0.9, seed=2),
    dict(temperature=1.0, seed=3),
    dict(temperature=0.6, top_k=5, top_p=0.8, seed=4),
]


def generations(model):
    """Five generations of different settings, prompt lengths and lengths; the last slides past the window."""
    prompts = [[1, 2, 3], [50, 60], list(range(10, 30)), [7], list(range(5, 38))]
    lengths = [12, 9, 14, 6, 10]
    return [
        generate(model, p, max_new_tokens=n, capture_attention=True, **s) for p, n, s in zip(prompts, lengths, SETTINGS)
    ]


def same_step(a, b) -> bool:
    fields = [f.name for f in dataclasses.fields(a) if f.name != "attention"]
    if any(getattr(a, f) != getattr(b, f) for f in fields):
        return False
    return len(a.attention) == len(b.attention) and all(torch.equal(x, y) for x, y in zip(a.attention, b.attention))


@pytest.mark.parametrize("dtype", DTYPES)
def test_generations_stepped_together_make_the_steps_each_makes_alone(dtype, monkeypatch):
    needs_step()
    model = accelerate(model_for(dtype, "blocks", seed=6))
    assert native_decode.set_native_step(model, 0)
    alone = [list(g) for g in generations(model)]
    together = generations(model)
    decoder = decoder_of(model)
    calls = []  # the rows of each batched compiled call
    run_rows = native_step.run_rows
    monkeypatch.setattr(native_step, "run_rows", lambda *a: calls.append(len(a[4])) or run_rows(*a))
    batched = 0
    while not all(g.done for g in together):
        waiting = [(g, g.next_row()) for g in together if not g.done]
        for g, row in waiting:
            if row is None:
                g.step_alone()
        shared = [(g, row) for g, row in waiting if row is not None]
        batched = max(batched, len(shared))
        with torch.no_grad():  # as a server steps them: an inference step (with gradients on, every row is plain)
            results = decoder.rows(model, [row for _, row in shared])
        for (g, _), result in zip(shared, results):
            g.advance(result)
    assert batched == 5 and 5 in calls  # every generation's row in one compiled call at some step
    assert calls[0] == sum(len(g.prompt_ids) for g in together)  # the first call fed every prompt, as rows
    for steps, g in zip(alone, together):
        assert len(steps) == len(g.steps)
        assert all(same_step(a, b) for a, b in zip(steps, g.steps))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_rows_own_capture_flag_changes_none_of_its_numbers(dtype):
    needs_step()
    model = model_for(dtype, "tails", seed=9)
    assert native_decode.set_native_step(model, 0)
    rows = prompted_rows(model, 5, seed=5)
    flipped = [Row(r.token, r.cache, not r.capture) for r in clone_rows(rows, model)]
    with torch.no_grad():
        a, b = native_decode.decode_rows(model, rows), native_decode.decode_rows(model, flipped)
    for x, y, rx, ry in zip(a, b, rows, flipped):
        assert torch.equal(x[0], y[0])
        assert torch.equal(rx.cache.k, ry.cache.k) and torch.equal(rx.cache.v, ry.cache.v)
