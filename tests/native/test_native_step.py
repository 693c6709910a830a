"""The native decode step (accel.native_decode on runtime.native_step, chosen by accel.native_choice): the torch
forward's logits, keys, values and attention, step after step; the plain path wherever the step is off, invalid or
unavailable.
Which path is faster is the machine's business: nothing here asserts a time."""

import pytest
import torch

from playground.accel import accelerate, native_choice, native_decode
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sampling import generate
from playground.engine.weights import load_checkpoint
from playground.runtime import kernels, native_step
from tests.helpers import ROOT

TINY = dict(context_length=64, emb_dim=64, n_heads=4, n_layers=2)
# largest difference over the largest logit: float32 differs in summation order only, bfloat16 in roundings
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 6e-2}


pytestmark = pytest.mark.usefixtures("forget_compiled")


def needs_step():
    if not native_step.available():
        pytest.skip(f"no compiled step here: {native_step.status().reason} {native_step.status().detail}")


def tiny(dtype=torch.float32, seed=0, **over) -> GPTModel:
    cfg = GPTConfig(**{**TINY, **over})
    return GPTModel(cfg, generator=torch.Generator().manual_seed(seed)).eval().to(dtype)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / (b.float().abs().max() + 1e-6))


@torch.no_grad()
def walk(model, steps: int, native_at, prompt=(5, 17, 99, 3, 250, 7)):
    """Greedy decode ``steps`` tokens twice from ``prompt``: on the plain forward (reference) and with the
    steps for which ``native_at(i)`` holds on the native step. Yields (step, native logits or None,
    reference logits, cache, reference cache)."""
    cache, ref = model.new_kv_cache(), model.new_kv_cache()
    idx = torch.tensor([list(prompt)])
    model(idx, kv_cache=cache)
    logits = model(idx, kv_cache=ref, last_token_only=True)[0, -1].float()
    for i in range(steps):
        token = int(logits.argmax())
        out = native_decode.decode_step(model, [token], cache) if native_at(i) else None
        if out is None:
            model(torch.tensor([[token]]), kv_cache=cache)
        logits = model(torch.tensor([[token]]), kv_cache=ref, last_token_only=True)[0, -1].float()
        yield i, None if out is None else out[0], logits, cache, ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("pos_encoding", ["learned", "sinusoidal"])
def test_logits_and_cache_match_the_plain_forward_over_40_steps(dtype, pos_encoding):
    needs_step()
    model = tiny(dtype, pos_encoding=pos_encoding)
    assert native_decode.set_native_step(model, 0)
    seen = 0
    for _, got, want, cache, ref in walk(model, 40, lambda i: True):
        assert got is not None
        assert got.shape == want.shape and got.dtype == torch.float32
        assert relative(got, want) <= TOLERANCE[dtype]
        seen += 1
        assert cache.length == ref.length
    assert seen == 40
    n = cache.length
    for a, b in ((cache.k, ref.k), (cache.v, ref.v)):
        assert relative(a[..., :n, :], b[..., :n, :]) <= (1e-5 if dtype == torch.float32 else 2e-2)
        assert not a[..., n:, :].any()  # nothing written past the sequence


def test_switching_native_plain_native_mid_generation():
    needs_step()
    model = tiny(seed=3)
    assert native_decode.set_native_step(model, 1)
    paths = lambda i: i < 10 or i >= 20  # native, then plain for 10 steps, then native again
    took = []
    for _, got, want, _, _ in walk(model, 30, paths):
        took.append(got is not None)
        if got is not None:
            assert relative(got, want) <= 1e-4
    assert took == [paths(i) for i in range(30)]


def test_greedy_tokens_identical_on_the_bundled_model():
    needs_step()
    model = load_checkpoint(ROOT / "playground" / "assets" / "bundled" / "model.safetensors", dtype="float32")
    prompt = list(range(300, 316))
    plain = [s.token_id for s in generate(model, prompt, max_new_tokens=40, temperature=0)]
    assert native_decode.set_native_step(model, 0)
    native = [s.token_id for s in generate(model, prompt, max_new_tokens=40, temperature=0)]
    assert native == plain


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_generation_with_attention_gets_the_plain_attention_rows(dtype):
    needs_step()
    model = tiny(dtype, seed=1)
    prompt = [11, 12, 13]
    plain = list(generate(model, prompt, max_new_tokens=12, temperature=0, capture_attention=True))
    assert native_decode.set_native_step(model, 0)
    native = list(generate(model, prompt, max_new_tokens=12, temperature=0, capture_attention=True))
    assert [s.token_id for s in native] == [s.token_id for s in plain]
    for a, b in zip(native[1:], plain[1:]):  # the first step is the prompt's: the torch forward runs it
        assert len(a.attention) == len(b.attention) == model.cfg.n_layers
        for pa, pb in zip(a.attention, b.attention):
            assert pa.shape == pb.shape == (model.cfg.n_heads, b.position)
            assert torch.allclose(pa, pb, atol=1e-5 if dtype == torch.float32 else 2e-2)
            assert torch.allclose(pa.sum(-1), torch.ones(model.cfg.n_heads), atol=1e-5)


def test_prepare_checks_and_measures_and_the_generation_then_takes_it():
    needs_step()
    model = tiny()  # weights as nn.Linear holds them: (out, in), the order the step reads
    choice = native_choice.prepare(model)
    assert choice is not None and choice.kind == "step"
    assert set(choice.seconds) >= {"plain", "native_step"} and all(v > 0 for v in choice.seconds.values())
    assert native_decode.uses_native_step(model) == (choice.winner != "plain")
    assert [c for c in kernels.measured() if c.kind == "step"] == [choice]
    cache = model.new_kv_cache()
    with torch.no_grad():
        model(torch.tensor([[1, 2]]), kv_cache=cache)
        took = native_decode.decode_step(model, [3], cache) is not None
    assert took == (choice.winner != "plain")
    # a chosen step follows the load between its team sizes; a fixed one (set_native_step) does not
    assert (native_decode.team_choice(model) is not None) == (choice.winner != "plain" and torch.get_num_threads() > 1)
    assert native_decode.set_native_step(model, 0) and native_decode.team_choice(model) is None


def test_weights_stored_in_out_are_read_from_row_copies_and_stored_so_when_it_wins():
    needs_step()
    model = tiny()
    w = model.trf_blocks[0].ff.layers[0].weight
    before = w.detach().clone()
    w.data = w.data.t().contiguous().t()  # stored [in, out], as optimize_for_decode may choose for the plain product
    assert native_decode.unsupported(model) == "a tensor in another dtype or memory order"
    assert native_decode.unsupported(model, any_layout=True) is None
    choice = native_choice.prepare(model)
    assert choice is not None
    assert w.is_contiguous() == native_decode.uses_native_step(model) == (choice.winner != "plain")
    assert torch.equal(w, before)  # the same values whichever order they are stored in
    assert native_decode.set_native_step(model, 0) and w.is_contiguous()


def test_switched_off_keeps_the_plain_path(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    native_step.forget()
    model = tiny()
    accelerate(model)
    assert not native_step.available() and native_step.status().reason == "off"
    assert not native_decode.uses_native_step(model)
    assert not native_decode.set_native_step(model, 0)
    assert native_decode.decode_step(model, [1], model.new_kv_cache()) is None
    assert len(list(generate(model, [1, 2], max_new_tokens=3, temperature=0))) == 3


def test_hooks_training_and_gradients_take_the_plain_path():
    needs_step()
    model = tiny()
    assert native_decode.set_native_step(model, 0)
    cache = model.new_kv_cache()
    with torch.no_grad():
        model(torch.tensor([[1, 2]]), kv_cache=cache)
        handle = model.trf_blocks[1].att.register_forward_hook(lambda *a: None)
        assert native_decode.decode_step(model, [3], cache) is None
        assert native_decode.unsupported(model) == "torch hooks"
        handle.remove()
        model.train()
        assert native_decode.decode_step(model, [3], cache) is None
        model.eval()
        assert native_decode.decode_step(model, [3, 4], cache) is None  # more than one new token
        assert cache.length == 2
        assert native_decode.decode_step(model, [3], cache) is not None
        assert cache.length == 3
    assert native_decode.decode_step(model, [4], cache) is None  # gradients on: not an inference step
    with torch.no_grad():
        other = tiny(n_layers=3).new_kv_cache()  # another model's cache: never read past its ends
        other.length = 2
        assert native_decode.decode_step(model, [4], other) is None
        assert native_decode.decode_step(model, [50257], cache) is None  # outside the vocabulary


@pytest.mark.parametrize(
    "over", [dict(norm_placement="post"), dict(attention_impl="per_head"), dict(activation="gelu")]
)
def test_other_architectures_never_take_it(over):
    model = tiny(**over)
    assert native_decode.unsupported(model) == "architecture"
    assert not native_decode.set_native_step(model, 0)


def test_int8_dynamic_with_bfloat16_activations_keeps_the_plain_path():
    from playground.engine.quantize import quantize_int8

    model = quantize_int8(tiny(), "bfloat16", dynamic=True)
    assert native_decode.unsupported(model) == "int8-dynamic with bfloat16 activations"
    assert not native_decode.set_native_step(model, 0)
