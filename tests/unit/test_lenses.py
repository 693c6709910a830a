"""The lenses (issue 11) against independent computations: the model's own logits, torch's
softmax and cross-entropy, the attention trace the Generate tab draws, and module hooks, on tiny random
models (on the bundled model: tests/integration/test_lenses_bundled.py)."""

import pytest
import torch
import torch.nn.functional as F

from playground.engine.tokenizer import load_tokenizer
from playground.inside import attribution, effects, lenses, view_checks
from playground.inside.interventions import Intervention
from tests.tiny_models import SINCE_GPT2, three_layer_model

TEXT = "ROMEO:\nWhat light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n"


@pytest.fixture(scope="module")
def ids():
    return load_tokenizer().encode(TEXT)


@pytest.fixture(scope="module")
def tiny():
    return three_layer_model(seed=2, std=0.15)


def test_attribution_of_a_layers_heads_equals_its_attention_output_read_by_hand(tiny, ids):
    """Per-head terms + the bias term of a layer = that layer's whole attention output (taken with
    an ordinary forward hook) read through the frozen final norm."""
    pos, target, layer = 5, 123, 1
    d = attribution.logit_attribution(tiny, ids, pos, target)
    seen = {}
    handle = tiny.trf_blocks[layer].att.register_forward_hook(lambda m, a, out: seen.setdefault("att", out))
    try:
        with torch.no_grad():
            tiny(torch.tensor([ids]), return_attention=False)
    finally:
        handle.remove()
    from playground.inside.interventions import run_with_hooks

    _, cache = run_with_hooks(tiny, ids)
    x = cache.resid[-1][0, pos].double()
    sigma = torch.sqrt(x.var(unbiased=False) + 1e-5)
    u = tiny.out_head.weight[target].detach().double() * tiny.final_norm.scale.detach().double() / sigma
    att = seen["att"][0, pos].double()
    want = float(u @ (att - att.mean()))
    assert sum(d["heads"][layer]) + d["attn_bias"][layer] == pytest.approx(want, abs=1e-6)


def test_resolve_target_is_one_token_or_a_message():
    tok = load_tokenizer()
    assert tok.decode([view_checks.resolve_target(tok, " the")]) == " the"
    assert tok.decode([view_checks.resolve_target(tok, "\\n")]) == "\n"
    with pytest.raises(view_checks.LensError, match="exactly one token; 'hello world' is 2 tokens"):
        view_checks.resolve_target(tok, "hello world")
    with pytest.raises(view_checks.LensError, match="Type the target"):
        view_checks.resolve_target(tok, "")


# ----------------------------------------------------------------------------------------------
# The shortcuts the views take (start at a layer, last row only) against the full hooked forward

VARIANTS = [
    {},
    dict(norm_placement="post"),
    dict(attention_impl="per_head"),
    dict(pos_encoding="sinusoidal", activation="relu"),
    SINCE_GPT2,
]


@pytest.mark.parametrize("changes", VARIANTS)
def test_last_row_block_equals_the_blocks_last_row(changes):
    from playground.inside.effects import last_row_block
    from playground.inside.interventions import Hooks

    model = three_layer_model(seed=4, std=0.15, **changes)
    x = torch.randn(3, 9, model.cfg.emb_dim, generator=torch.Generator().manual_seed(5))
    gain = torch.rand(model.cfg.n_layers, 3, model.cfg.n_heads, generator=torch.Generator().manual_seed(6)) * 2
    with torch.no_grad():
        for i, block in enumerate(model.trf_blocks):
            torch.testing.assert_close(last_row_block(block, x), block(x)[:, -1:], rtol=1e-5, atol=1e-6)
            hooked = Hooks(model.cfg, capture=False, head_gain=gain).layer(i)
            want = block(x, None, None, Hooks(model.cfg, capture=False, head_gain=gain).layer(i))[:, -1:]
            torch.testing.assert_close(last_row_block(block, x, hooked), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "spec",
    [
        Intervention(zero_heads=((2, 0), (1, 1))),
        Intervention(scale_head=(2, 1, 1.7)),
        Intervention(skip_mlps=(1,)),
        Intervention(unmasked_layers=(2,)),
        Intervention(mean_heads=((1, 0),)),
        Intervention(drop_pos_emb=True),
    ],
    ids=["zero", "scale", "skip-mlp", "unmask", "mean", "no-pos"],
)
def test_compare_resumed_at_the_first_changed_layer_equals_the_whole_hooked_forward(spec):
    """compare() reuses the plain forward's blocks before the intervention's first layer; its
    losses and lens must equal a forward that runs the intervention from the embeddings."""
    from playground.inside.interventions import run_with_hooks

    model = three_layer_model(seed=7, std=0.15)
    ids = torch.randint(0, model.cfg.vocab_size, (12,), generator=torch.Generator().manual_seed(8)).tolist()
    out = effects.compare(model, ids, spec, 5)
    logits, cache = run_with_hooks(model, ids, spec)
    want = F.cross_entropy(logits[0, :-1].double(), torch.tensor(ids[1:]), reduction="none")
    torch.testing.assert_close(torch.tensor(out["loss_after"], dtype=torch.float64), want, rtol=1e-5, atol=1e-5)
    p = torch.softmax(logits[0, 5].double(), -1)
    assert out["after"] == pytest.approx([float(p[t]) for t in out["shown_ids"]], rel=1e-4, abs=1e-7)
    assert out["lens_after"]["top_id"] == lenses.logit_lens(model, ids, spec)["top_id"]
    # a window: its last layer is taken from the per-position loss's own readout, not read twice
    window = effects.compare(model, ids, spec, 5, lens_window=(3, 9))["lens_after"]
    direct = lenses.logit_lens(model, ids, spec, first=3, stop=9)
    assert window["top_id"] == direct["top_id"]
    for key in ("top_prob", "next_prob"):
        assert sum(window[key], []) == pytest.approx(sum(direct[key], []), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_dose_response_equals_a_full_forward_per_alpha(layer):
    model = three_layer_model(seed=9, std=0.15)
    ids = torch.randint(0, model.cfg.vocab_size, (10,), generator=torch.Generator().manual_seed(10)).tolist()
    d = effects.dose_response(model, ids, layer, 1, 6, target_id=17)
    for alpha, got in zip(d["alphas"], d["logprob"]):
        from playground.inside.interventions import run_with_hooks

        logits, _ = run_with_hooks(model, ids[:7], Intervention(scale_head=(layer, 1, alpha)), capture=False)
        assert got == pytest.approx(float(torch.log_softmax(logits[0, -1].double(), -1)[17]), abs=2e-5)


def test_dose_response_points_grow_to_the_whole_curve():
    """Drawn point by point: each yield holds the α values so far, and the last is the whole curve."""
    model = three_layer_model(seed=9, std=0.15)
    ids = torch.randint(0, model.cfg.vocab_size, (10,), generator=torch.Generator().manual_seed(10)).tolist()
    whole = effects.dose_response(model, ids, 1, 1, 6, target_id=17)
    steps = list(effects.dose_response_points(model, ids, 1, 1, 6, target_id=17, chunk=4))
    assert [len(d["alphas"]) for d in steps] == [4, 8, 11]
    for d in steps:
        n = len(d["alphas"])
        assert d["alphas"] == whole["alphas"][:n]
        assert d["logprob"] == pytest.approx(whole["logprob"][:n], abs=2e-5)


def test_head_sweep_layers_fill_in_a_layer_at_a_time():
    model = three_layer_model(seed=9, std=0.15)
    ids = torch.randint(0, model.cfg.vocab_size, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    whole = effects.head_sweep(model, ids)
    steps = list(effects.head_sweep_layers(model, ids, whole["estimate_s"]))
    L = model.cfg.n_layers
    assert len(steps) == L
    for k, d in enumerate(steps):
        assert all(row is None for row in d["delta_loss"][k + 1 :])  # not measured yet
        for got, want in zip(d["delta_loss"][: k + 1], whole["delta_loss"][: k + 1]):
            assert got == pytest.approx(want, abs=1e-5)
    assert steps[-1]["base_loss"] == pytest.approx(whole["base_loss"], abs=1e-6)


def test_head_sweep_seconds_count_the_sweep_not_the_time_its_caller_holds_it_paused():
    """A page draws each layer while the sweep waits: that time is not the sweep's (its estimate
    is of the sweep alone)."""
    import time

    model = three_layer_model(seed=9, std=0.15)
    ids = torch.randint(0, model.cfg.vocab_size, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    t0, seconds = time.perf_counter(), []
    for d in effects.head_sweep_layers(model, ids, 1.0):
        seconds.append(d["seconds"])
        time.sleep(0.3)  # the caller's drawing
    wall = time.perf_counter() - t0
    assert seconds == sorted(seconds) and seconds[0] > 0
    assert seconds[-1] < wall - 0.3 * len(seconds) + 0.05  # the pauses (0.9 s) are not in it


def test_head_sweep_layers_leave_grad_mode_alone_between_layers():
    """A paused sweep must not switch gradients off for its caller: a server thread that drew one
    layer of it goes on to time a training step (whose backward then failed)."""
    model = three_layer_model(seed=9, std=0.15)
    ids = torch.randint(0, model.cfg.vocab_size, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    steps = effects.head_sweep_layers(model, ids, 1.0)
    assert torch.is_grad_enabled()
    next(steps)
    assert torch.is_grad_enabled()
    steps.close()


@pytest.mark.parametrize("changes", [{}, {"norm_placement": "post"}, {"attention_impl": "per_head"}])
def test_attention_maths_reads_the_hooked_forwards_q_k_v_and_head_output(changes, ids):
    """The maths runs only the blocks before its layer and that block's attention: its q, k, v and
    the head's output are the ones a whole hooked forward captures there."""
    from playground.inside import attention_maths
    from playground.inside.interventions import run_with_hooks

    model = three_layer_model(seed=4, std=0.15, **changes)
    layer, head, pos = 1, 2, 7
    d = attention_maths.attention_maths(model, ids, layer, head, pos)
    _, cache = run_with_hooks(model, ids, capture_qkv=(layer,))
    q, k, v = (t[0, head].double() for t in cache.qkv[layer])
    torch.testing.assert_close(torch.tensor(d["q"], dtype=torch.float64), q[pos])
    torch.testing.assert_close(torch.tensor(d["k"], dtype=torch.float64), k)
    torch.testing.assert_close(torch.tensor(d["v"], dtype=torch.float64), v)
    torch.testing.assert_close(torch.tensor(d["ctx"], dtype=torch.float64), cache.ctx[layer][0, head, pos].double())
    torch.testing.assert_close(torch.tensor(d["weighted_v"]), torch.tensor(d["ctx"]), rtol=1e-5, atol=1e-6)


def _counting_blocks(model) -> list:
    calls: list = []
    for block in model.trf_blocks:
        block.register_forward_hook(lambda m, a, out: calls.append(1))
    return calls


def test_a_stop_ends_the_sweep_before_its_next_block_or_readout():
    model = three_layer_model(seed=9, std=0.15)
    calls = _counting_blocks(model)
    ids = torch.randint(0, model.cfg.vocab_size, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    # Asked before every block: once it says True, no other block runs and the unfinished layer is not yielded.
    assert list(effects.head_sweep_layers(model, ids, 1.0, batch=1, stop=lambda: len(calls) >= 5)) == []
    assert len(calls) == 5
    # Stopped after the first layer: it ends at once, with what it had yielded.
    asked, said = [], []
    steps = effects.head_sweep_layers(model, ids, 1.0, stop=lambda: asked.append(1) or bool(said))
    first = next(steps)
    before = (len(calls), len(asked))
    said.append(True)
    assert list(steps) == [] and len(calls) == before[0] and len(asked) == before[1] + 1
    assert first["delta_loss"][0] is not None and first["delta_loss"][1] is None
    # Asked between heads' readouts too: a stop raised during the readout of a batch's first head
    # ends the sweep before the second head is read.
    reads = []
    original = effects.HeadReader.__call__

    def counting(self, rows, *a, **k):
        reads.append(1)
        return original(self, rows, *a, **k)

    effects.HeadReader.__call__ = counting
    try:
        assert list(effects.head_sweep_layers(model, ids, 1.0, stop=lambda: len(reads) >= 2)) == []
    finally:
        effects.HeadReader.__call__ = original
    assert len(reads) == 2  # the base loss' readout and the first head's


def test_a_stop_ends_the_dose_curve_before_its_next_block():
    model = three_layer_model(seed=9, std=0.15)
    calls = _counting_blocks(model)
    ids = torch.randint(0, model.cfg.vocab_size, (10,), generator=torch.Generator().manual_seed(10)).tolist()
    said: list = []
    steps = effects.dose_response_points(model, ids, 0, 1, 6, target_id=17, chunk=4, stop=lambda: bool(said))
    first = next(steps)
    blocks = len(calls)
    said.append(True)
    assert list(steps) == [] and len(calls) == blocks and len(first["alphas"]) == 4


def test_a_cell_read_from_the_lens_rows_equals_its_own_forward(tiny, ids):
    """The rows a lens window read give each of its cells the numbers lens_cell's own forward gives
    (the Inside tab draws the cell from the lens view's rows), and the lens itself is unchanged."""
    first, stop = 4, 12
    lens, rows = lenses.logit_lens_rows(tiny, ids, first=first, stop=stop)
    assert lens == lenses.logit_lens(tiny, ids, first=first, stop=stop)
    assert rows.shape == (tiny.cfg.n_layers + 1, stop - first, tiny.cfg.emb_dim)
    for layer, p in [(0, 4), (2, 7), (tiny.cfg.n_layers, 11)]:
        got = lenses.cell_from_rows(tiny, rows[layer, p - first], rows[-1, p - first], layer, p)
        want = lenses.lens_cell(tiny, ids, layer, p)
        assert [t for t, _ in got["top"]] == [t for t, _ in want["top"]]
        assert [q for _, q in got["top"]] == pytest.approx([q for _, q in want["top"]], abs=1e-6)
        assert got["kl_to_final_nats"] == pytest.approx(want["kl_to_final_nats"], abs=1e-5)
        assert (got["layer"], got["position"]) == (layer, p)
    # the last layer's cell is the model's own prediction: KL to itself is 0
    assert lenses.cell_from_rows(tiny, rows[-1, 0], rows[-1, 0], 3, first)["kl_to_final_nats"] == 0.0
