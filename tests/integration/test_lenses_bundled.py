"""The lenses, attributions and ablations on the bundled model, and README's worked examples recomputed
(the same functions on tiny random models: tests/unit/test_lenses.py)."""

import math

import pytest
import torch
import torch.nn.functional as F

from playground.engine.tokenizer import load_tokenizer
from playground.inside import attention_maths, attribution, effects, lenses, view_checks
from playground.inside.interventions import Intervention
from playground.server.recipes import BUNDLED_CHECKPOINT, build_from_recipe, bundled_recipe
from playground.server.runs import layer_attention
from tests.tiny_models import three_layer_model

TEXT = "ROMEO:\nWhat light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n"


@pytest.fixture(scope="module")
def bundled():
    if not BUNDLED_CHECKPOINT.is_file():
        pytest.skip("no bundled model in this copy")
    return build_from_recipe(bundled_recipe())


@pytest.fixture(scope="module")
def ids():
    return load_tokenizer().encode(TEXT)


@pytest.fixture(scope="module")
def tiny():
    return three_layer_model(seed=2, std=0.15)


# README's worked example, as measured on the shipped file (test_readme_worked_example recomputes them)
WORKED_FIRST_SECOND = (11.81, 0.63)
WORKED_TOP_HEADS = [(1, 3), (0, 0)]
WORKED_TOP_LOSSES = [4.22, 0.89]
WORKED_LAYER0_ALL = 11.21  # every layer-0 head zeroed at once


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids]))[0].float()


def test_last_lens_row_is_the_models_own_output(bundled, ids):
    lens = lenses.logit_lens(bundled, ids)
    assert len(lens["top_id"]) == bundled.cfg.n_layers + 1 == len(lens["layers"])
    probs = logits_of(bundled, ids).double().softmax(-1)  # float64: float32's softmax is off by ~1e-4
    assert lens["top_id"][-1] == probs.argmax(-1).tolist()
    torch.testing.assert_close(
        torch.tensor(lens["top_prob"][-1], dtype=torch.float64), probs.max(-1).values, rtol=1e-5, atol=1e-6
    )
    want = probs[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    torch.testing.assert_close(
        torch.tensor(lens["next_prob"][-1][:-1], dtype=torch.float64), want, rtol=1e-5, atol=1e-7
    )
    assert lens["next_prob"][-1][-1] is None  # the last token's successor is unknown
    # The trained model predicts better at the last layer than from the embeddings alone.
    mean = lambda row: sum(math.log(p) for p in row[:-1]) / (len(row) - 1)  # noqa: E731
    assert mean(lens["next_prob"][-1]) > mean(lens["next_prob"][0])


def test_a_lens_window_is_the_same_slice_of_the_whole_lens(bundled, ids):
    whole = lenses.logit_lens(bundled, ids)
    part = lenses.logit_lens(bundled, ids, first=5, stop=len(ids))
    assert part["first"] == 5
    assert part["top_id"] == [row[5:] for row in whole["top_id"]]
    # the same numbers up to float rounding (rows are read out in chunks, so a row's product may be
    # computed in a chunk of another size), and None at the last position in both
    for got, want in zip(part["next_prob"], whole["next_prob"]):
        assert [g is None for g in got] == [w is None for w in want[5:]]
        assert [g for g in got if g is not None] == pytest.approx([w for w in want[5:] if w is not None], rel=1e-5)
    mid = lenses.logit_lens(bundled, ids, first=2, stop=9)
    # a shorter forward (the model is causal: positions up to 8 only) gives the same numbers
    assert all(r == pytest.approx(w[2:9], rel=1e-5) for r, w in zip(mid["top_prob"], whole["top_prob"]))
    with pytest.raises(view_checks.LensError, match="lens window"):
        lenses.logit_lens(bundled, ids, first=4, stop=4)


def test_lens_cell_top10_and_kl(bundled, ids):
    pos, L = 9, bundled.cfg.n_layers
    final = lenses.lens_cell(bundled, ids, L, pos)
    probs = logits_of(bundled, ids)[pos].double().softmax(-1)
    top = probs.topk(10)
    assert [t for t, _ in final["top"]] == top.indices.tolist()
    torch.testing.assert_close(
        torch.tensor([p for _, p in final["top"]], dtype=torch.float64), top.values, rtol=1e-5, atol=1e-7
    )
    assert final["kl_to_final_nats"] < 1e-6  # the final layer against itself
    mid = lenses.lens_cell(bundled, ids, 2, pos)
    # KL(final || layer 2) by hand, from the captured stream read through final_norm and out_head
    from playground.inside.interventions import run_with_hooks

    _, cache = run_with_hooks(bundled, ids)
    with torch.no_grad():
        lp = bundled.out_head(bundled.final_norm(cache.resid[2][0, pos])).double().log_softmax(-1)
    P = probs.double()
    kl = float((P * (P.log() - lp)).sum())
    assert mid["kl_to_final_nats"] == pytest.approx(kl, rel=1e-3, abs=1e-5) and kl > 0.1


@pytest.mark.parametrize("which", ["bundled", "tiny"])
def test_attribution_parts_sum_to_the_final_logit(which, bundled, tiny, ids):
    model = bundled if which == "bundled" else tiny
    for pos in (0, 7, len(ids) - 2):
        d = attribution.logit_attribution(model, ids, pos)
        assert d["target_id"] == ids[pos + 1]
        assert d["model_logit"] == pytest.approx(float(logits_of(model, ids)[pos, ids[pos + 1]]), abs=1e-4)
        parts = (
            d["tok_emb"]
            + d["pos_emb"]
            + sum(map(sum, d["heads"]))
            + sum(d["attn_bias"])
            + sum(d["mlp"])
            + d["final_norm_shift"]
        )
        assert parts == pytest.approx(d["total"], abs=1e-9)
        assert d["total"] == pytest.approx(d["model_logit"], abs=2e-4 * max(1.0, abs(d["model_logit"])))
        assert len(d["heads"]) == model.cfg.n_layers and len(d["heads"][0]) == model.cfg.n_heads


def test_attribution_bad_input(tiny, bundled, ids):
    post = three_layer_model(norm_placement="post")
    with pytest.raises(view_checks.LensError, match="pre-norm"):
        attribution.logit_attribution(post, ids, 2)
    with pytest.raises(view_checks.LensError, match="no next token"):
        attribution.logit_attribution(tiny, ids, len(ids) - 1)
    with pytest.raises(view_checks.LensError, match="Position must be"):
        attribution.logit_attribution(tiny, ids, len(ids))
    with pytest.raises(view_checks.LensError, match="target token id"):
        attribution.logit_attribution(tiny, ids, 1, 50257)
    with pytest.raises(view_checks.LensError, match="Generate first"):
        lenses.logit_lens(tiny, [])


def test_attention_maths_softmax_is_the_generate_tabs_row(bundled, ids):
    layer, head, pos = 3, 2, 11
    m = attention_maths.attention_maths(bundled, ids, layer, head, pos)
    with torch.no_grad():
        _, trace = bundled(torch.tensor([ids]), return_attention=True)
    want = trace.layer(layer)[0, head, pos]
    torch.testing.assert_close(torch.tensor(m["softmax"], dtype=torch.float32), want, rtol=1e-5, atol=1e-6)
    # ... and the numbers the Generate tab's heatmap draws (runs.layer_attention)
    qk = [(q[0], k[0]) for q, k in zip(trace.queries, trace.keys)]
    row = layer_attention(qk, layer)[head, pos]
    assert max(abs(a - b) for a, b in zip(m["softmax"], row.tolist())) < 1e-6
    assert all((s is None) == (j > pos) for j, s in enumerate(m["masked"]))
    assert m["scaled"][0] == pytest.approx(m["scores"][0] / math.sqrt(bundled.cfg.head_dim))
    q, k = torch.tensor(m["q"], dtype=torch.float64), torch.tensor(m["k"], dtype=torch.float64)
    torch.testing.assert_close(k @ q, torch.tensor(m["scores"], dtype=torch.float64))
    torch.testing.assert_close(torch.tensor(m["weighted_v"]), torch.tensor(m["ctx"]), rtol=1e-4, atol=1e-5)
    assert sum(m["softmax"]) == pytest.approx(1.0)


def test_compare_before_after_and_losses(bundled, ids):
    same = effects.compare(bundled, ids, Intervention(), 4, lens=False)
    assert same["before"] == same["after"] and same["loss_before"] == same["loss_after"]
    # against float64 cross-entropy: a float32 one is itself ~7e-5 off on this text
    want = F.cross_entropy(logits_of(bundled, ids)[:-1].double(), torch.tensor(ids[1:]), reduction="none")
    torch.testing.assert_close(torch.tensor(same["loss_before"], dtype=torch.float64), want, rtol=1e-5, atol=1e-5)
    out = effects.compare(bundled, ids, Intervention(skip_mlps=(0,)), 4)
    assert out["mean_loss_after"] > out["mean_loss_before"]  # the first MLP matters to a trained model
    assert len(out["lens_after"]["top_id"]) == bundled.cfg.n_layers + 1
    direct = lenses.logit_lens(bundled, ids, Intervention(skip_mlps=(0,)))
    assert out["lens_after"]["top_id"] == direct["top_id"]


def test_dose_response_ends_match_plain_and_zeroed(bundled, ids):
    pos, layer, head = 6, 2, 1
    d = effects.dose_response(bundled, ids, layer, head, pos)
    assert d["alphas"] == pytest.approx([0.2 * i for i in range(11)]) and len(d["logprob"]) == 11
    plain = logits_of(bundled, ids)[pos].log_softmax(-1)[ids[pos + 1]]
    assert d["logprob"][5] == pytest.approx(float(plain), abs=1e-4)  # α = 1
    zeroed = effects.compare(bundled, ids, Intervention(zero_heads=((layer, head),)), pos, lens=False)
    assert d["logprob"][0] == pytest.approx(-zeroed["loss_after"][pos], abs=1e-4)  # α = 0
    # every α against its own full forward with that head scaled (not resumed mid-way)
    for i in (3, 8, 10):
        alpha = d["alphas"][i]
        full = effects.compare(bundled, ids, Intervention(scale_head=(layer, head, alpha)), pos, lens=False)
        assert d["logprob"][i] == pytest.approx(-full["loss_after"][pos], abs=1e-4)
    for first_or_last in (0, bundled.cfg.n_layers - 1):
        edge = effects.dose_response(bundled, ids, first_or_last, 3, pos, alphas=[1.6])
        full = effects.compare(bundled, ids, Intervention(scale_head=(first_or_last, 3, 1.6)), pos, lens=False)
        assert edge["logprob"][0] == pytest.approx(-full["loss_after"][pos], abs=1e-4)
    with pytest.raises(ValueError, match="α must be"):
        effects.dose_response(bundled, ids, layer, head, pos, alphas=[0, 3])


def test_head_sweep_matches_single_ablations_and_refuses_long_sweeps(bundled, ids):
    calls = []
    sweep = effects.head_sweep(bundled, ids, progress=lambda f, t: calls.append(f))
    assert calls and calls[-1] == 1.0
    for layer, head in ((0, 0), (5, 3)):
        one = effects.compare(bundled, ids, Intervention(zero_heads=((layer, head),)), 0, lens=False)
        want = one["mean_loss_after"] - one["mean_loss_before"]
        assert sweep["delta_loss"][layer][head] == pytest.approx(want, abs=1e-4)
    with pytest.raises(effects.SweepTooLongError, match="would take about") as e:
        effects.head_sweep(bundled, ids, limit_s=1e-6)
    assert e.value.estimate_s > 0


def test_readme_worked_example(bundled):
    """The numbers README's "Inside the model" section states, recomputed: TransformerLens's induction
    test (50 random frequent tokens, then the same 50 again) with every head zeroed in turn."""
    from tests.helpers import TINY_SHAKESPEARE

    if not TINY_SHAKESPEARE.is_file():
        pytest.skip("Tiny Shakespeare is not on this machine")
    from playground.inside.interventions import run_with_hooks

    text = TINY_SHAKESPEARE.read_text(encoding="utf-8")
    tok = load_tokenizer()
    counts = torch.bincount(torch.tensor(tok.encode(text[: int(len(text) * 0.9)])), minlength=bundled.cfg.vocab_size)
    pool = counts.argsort(descending=True, stable=True)[:2000]  # the 2,000 most frequent training tokens
    n = 50
    seq = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(0))[:n]]
    ids = torch.cat([torch.tensor([tok.eot_id]), seq, seq])  # <|endoftext|>, a copy, the same copy
    first, second = range(1, n), range(n + 1, 2 * n)  # positions predicting tokens 2..n of each copy

    def copy_losses(logits):
        nll = F.cross_entropy(logits[:-1].float(), ids[1:], reduction="none")
        return float(nll[list(first)].mean()), float(nll[list(second)].mean())

    base_first, base_second = copy_losses(logits_of(bundled, ids.tolist()))
    heads = [(layer, head) for layer in range(bundled.cfg.n_layers) for head in range(bundled.cfg.n_heads)]
    after = {}
    for layer, head in heads:
        gain = torch.ones(bundled.cfg.n_layers, 1, bundled.cfg.n_heads)
        gain[layer, 0, head] = 0.0
        with torch.no_grad():
            logits, _ = run_with_hooks(bundled, ids[None], capture=False, head_gain=gain)
        after[layer, head] = copy_losses(logits[0])[1]
    ranked = sorted(after, key=lambda k: -after[k])
    print(
        f"first copy {base_first:.3f}, second {base_second:.3f}; " + ", ".join(f"{k}: {after[k]:.3f}" for k in ranked)
    )
    assert (round(base_first, 2), round(base_second, 2)) == WORKED_FIRST_SECOND
    assert ranked[:2] == WORKED_TOP_HEADS
    assert [round(after[k], 2) for k in ranked[:2]] == WORKED_TOP_LOSSES
    # Zeroing any one head of layers 2-5 leaves the copying (within 0.05 nats of the intact model)
    assert all(after[k] < base_second + 0.05 for k in heads if k[0] >= 2)
    # Layer 0's heads stand in for each other: any one zeroed costs little, all four end the copying.
    gain = torch.ones(bundled.cfg.n_layers, 1, bundled.cfg.n_heads)
    gain[0] = 0.0
    with torch.no_grad():
        logits, _ = run_with_hooks(bundled, ids[None], capture=False, head_gain=gain)
    assert all(after[0, h] < base_second + 0.3 for h in range(bundled.cfg.n_heads))
    assert round(copy_losses(logits[0])[1], 2) == WORKED_LAYER0_ALL


def test_readme_python_example_runs():
    import re

    from tests.helpers import DOCS

    if not BUNDLED_CHECKPOINT.is_file():
        pytest.skip("no bundled model in this copy")
    text = (DOCS / "inside.md").read_text()
    code = re.search(
        r"```python\n(from playground import load_bundled, load_tokenizer\nfrom playground.inside import lenses.*?)```",
        text,
        re.S,
    ).group(1)
    scope = {}
    exec(code, scope)
    ids = scope["ids"]
    assert ids[11] == load_tokenizer().encode("?")[0] and ids[12] == load_tokenizer().encode("\n")[0]
    assert len(scope["dose"]["logprob"]) == 11 and len(scope["sweep"]["delta_loss"]) == 6
