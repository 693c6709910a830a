"""NaN/inf weights are refused at load (naming the tensors), NaN/inf logits stop generation (naming
the step), and sampling never touches torch's global random generator."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from playground.engine.checkpoint_files import check_finite
from playground.engine.config import GPTConfig
from playground.engine.hf_hub import load_pretrained
from playground.engine.model import GPTModel
from playground.engine.sampling import NonFiniteError, check_logits, generate
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import load_checkpoint, save_checkpoint

PROMPT = [15496, 11, 314, 716]  # "Hello, I am"
CFG = GPTConfig(context_length=32, emb_dim=32, n_heads=4, n_layers=2)


def small_model(seed=0) -> GPTModel:
    torch.manual_seed(seed)
    return GPTModel(CFG).eval()


def poisoned_checkpoint(tmp_path, name="poisoned.safetensors"):
    path = save_checkpoint(small_model(), tmp_path / "clean.safetensors")
    tensors = load_file(str(path))
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    tensors["trf_blocks.0.att.W_query.weight"][0, :12] = float("nan")
    tensors["trf_blocks.1.ff.layers.2.bias"][3] = float("inf")
    tensors["final_norm.scale"][:2] = float("-inf")
    out = tmp_path / name
    save_file(tensors, str(out), metadata=metadata)
    return out


def test_nan_and_inf_checkpoint_is_refused_naming_each_tensor(tmp_path):
    path = poisoned_checkpoint(tmp_path)
    with pytest.raises(WeightLoadError) as info:
        load_checkpoint(path, device="cpu")
    msg = str(info.value)
    assert msg.startswith("poisoned.safetensors: 3 tensors contain NaN or infinity: ")
    assert "trf_blocks.0.att.W_query.weight (12 values)" in msg
    assert "trf_blocks.1.ff.layers.2.bias (1 value)" in msg
    assert "final_norm.scale (2 values)" in msg
    # the name shown is the one the caller gives (an upload's original name), not the server's
    with pytest.raises(WeightLoadError, match=r"^my weights\.safetensors: 3 tensors contain NaN"):
        load_checkpoint(path, device="cpu", name="my weights.safetensors")


def test_float16_overflow_on_load_is_refused(tmp_path):
    model = small_model()
    with torch.no_grad():
        model.trf_blocks[0].norm1.shift[0] = 1e6  # finite in float32, +inf in float16
    path = save_checkpoint(model, tmp_path / "big.safetensors")
    assert load_checkpoint(path, device="cpu").trf_blocks[0].norm1.shift[0].item() == 1e6
    with pytest.raises(
        WeightLoadError, match=r"1 tensor contains NaN or infinity: trf_blocks\.0\.norm1\.shift \(1 value\)"
    ):
        load_checkpoint(path, device="cpu", dtype="float16")


def _hf_folder(tmp_path, poison=None):
    """A GPT-2 folder in the Hugging Face layout (Conv1D weights stored [in, out]), built by hand."""
    d, n_layer, vocab, ctx = 32, 2, 50257, 32
    g = torch.Generator().manual_seed(0)
    t = {
        "wte.weight": torch.randn(vocab, d, generator=g) * 0.02,
        "wpe.weight": torch.randn(ctx, d, generator=g) * 0.02,
        "ln_f.weight": torch.ones(d),
        "ln_f.bias": torch.zeros(d),
    }
    for i in range(n_layer):
        t |= {
            f"h.{i}.ln_1.weight": torch.ones(d),
            f"h.{i}.ln_1.bias": torch.zeros(d),
            f"h.{i}.ln_2.weight": torch.ones(d),
            f"h.{i}.ln_2.bias": torch.zeros(d),
            f"h.{i}.attn.c_attn.weight": torch.randn(d, 3 * d, generator=g) * 0.02,
            f"h.{i}.attn.c_attn.bias": torch.zeros(3 * d),
            f"h.{i}.attn.c_proj.weight": torch.randn(d, d, generator=g) * 0.02,
            f"h.{i}.attn.c_proj.bias": torch.zeros(d),
            f"h.{i}.mlp.c_fc.weight": torch.randn(d, 4 * d, generator=g) * 0.02,
            f"h.{i}.mlp.c_fc.bias": torch.zeros(4 * d),
            f"h.{i}.mlp.c_proj.weight": torch.randn(4 * d, d, generator=g) * 0.02,
            f"h.{i}.mlp.c_proj.bias": torch.zeros(d),
            f"h.{i}.attn.bias": torch.ones(1, 1, ctx, ctx),
        }
    if poison:
        poison(t)
    tmp_path.mkdir(parents=True, exist_ok=True)
    save_file(t, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(
        json.dumps({"vocab_size": vocab, "n_positions": ctx, "n_embd": d, "n_head": 4, "n_layer": n_layer})
    )
    return tmp_path


def test_load_pretrained_refuses_nan_weights(tmp_path):
    clean = load_pretrained(_hf_folder(tmp_path / "clean"), device="cpu")
    assert clean.load_report.skipped == ["h.0.attn.bias", "h.1.attn.bias"]

    def poison(t):
        t["h.1.attn.c_attn.weight"][:, 0] = float("nan")  # column 0 of [in, out] = W_query row 0

    with pytest.raises(
        WeightLoadError, match=r"1 tensor contains NaN or infinity: trf_blocks\.1\.att\.W_query\.weight \(32 values\)"
    ):
        load_pretrained(_hf_folder(tmp_path / "bad", poison), device="cpu")


def test_check_finite_passes_a_healthy_model_even_when_a_sum_overflows():
    model = small_model()
    with torch.no_grad():
        model.trf_blocks[0].norm1.shift[:2] = 3e38  # finite, but their sum is +inf in float32
    check_finite(model)


def test_weights_poked_to_inf_stop_generation_naming_the_step():
    model = small_model()
    gen = generate(model, PROMPT, max_new_tokens=6, temperature=1.0, seed=0)
    first_two = [next(gen), next(gen)]
    assert [s.index for s in first_two] == [0, 1]
    with torch.no_grad():
        model.trf_blocks[1].ff.layers[2].bias.fill_(float("inf"))
    with pytest.raises(NonFiniteError) as info:
        next(gen)
    assert info.value.step == 3 and isinstance(info.value, ValueError)
    msg = str(info.value)
    assert msg.startswith("Step 3: the model produced NaN/infinite logits (")
    assert "generation stopped" in msg


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_non_finite_logits_stop_greedy_and_sampling_at_step_1(temperature):
    model = small_model()
    with torch.no_grad():
        model.tok_emb.weight[PROMPT[-1], 0] = float("nan")
    with pytest.raises(
        NonFiniteError, match=r"^Step 1: the model produced NaN/infinite logits \(50,257 NaN of 50,257\)"
    ):
        list(generate(model, PROMPT, max_new_tokens=3, temperature=temperature))


def test_check_logits_counts_each_kind():
    logits = torch.tensor([0.0, float("nan"), float("inf"), float("inf"), float("-inf")])
    with pytest.raises(NonFiniteError, match=r"Step 7: .*\(1 NaN, 2 \+inf, 1 -inf of 5\)"):
        check_logits(logits, 7)
    check_logits(torch.zeros(5), 1)


# ---------------------------------------------------------------------------------------------
# Randomness: a private generator per generation


def _tokens(model, seed, n=8):
    return [s.token_id for s in generate(model, PROMPT, max_new_tokens=n, temperature=1.5, seed=seed)]


def test_unseeded_generation_leaves_the_global_rng_alone_and_varies():
    model = small_model()
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    a, b = _tokens(model, None), _tokens(model, None)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a != b  # 8 draws at temperature 1.5 over 50,257 tokens: equal by chance ~never


def test_seeded_generation_repeats_and_the_seed_used_reproduces_an_unseeded_run():
    model = small_model()
    assert _tokens(model, 5) == _tokens(model, 5)
    assert _tokens(model, 5) != _tokens(model, 6)
    gen = generate(model, PROMPT, max_new_tokens=8, temperature=1.5)
    tokens = [s.token_id for s in gen]
    assert 0 <= gen.seed_used < 2**32
    assert _tokens(model, gen.seed_used) == tokens
    assert generate(model, PROMPT, max_new_tokens=1, seed=42).seed_used == 42


def test_other_users_drawing_from_the_global_rng_do_not_change_a_seeded_run():
    model = small_model()
    expected = _tokens(model, 9)
    gen = generate(model, PROMPT, max_new_tokens=8, temperature=1.5, seed=9)
    got = []
    for step in gen:
        torch.rand(100)  # another session drawing in between
        got.append(step.token_id)
    assert got == expected


def test_seed_out_of_range_is_a_value_error_at_the_call():
    with pytest.raises(ValueError, match="The seed must be a whole number between"):
        generate(small_model(), PROMPT, max_new_tokens=1, seed=2**64)


def test_logits_whose_sum_overflows_are_still_finite():
    """A sum that overflows to inf is only a hint: every entry here is finite, so no error."""
    logits = torch.full((50257,), 3e38)
    assert not math.isfinite(float(logits.sum()))
    check_logits(logits, 1)  # does not raise
    logits[7] = float("nan")
    with pytest.raises(NonFiniteError, match="1 NaN"):
        check_logits(logits, 1)


def test_the_samplers_argmax_and_counts_match_torch_ties_included():
    from playground.engine.sampling import count_above, first_argmax

    gen = torch.Generator().manual_seed(0)
    for x in (torch.randn(50257, generator=gen), torch.zeros(100), torch.tensor([1.0, 3.0, 3.0, 2.0])):
        assert first_argmax(x) == int(torch.argmax(x))
        for threshold in (0.0, float(x[1]), float(x.max())):
            assert count_above(x, threshold) == int((x > threshold).sum())
    p = torch.softmax(torch.randn(1000, generator=gen) * 40, dim=-1)  # some entries underflow to 0
    assert count_above(p, 0.0) == int((p > 0).sum()) < 1000
