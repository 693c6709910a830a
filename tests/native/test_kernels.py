"""Measured kernel choice (issue 14): the chooser against injected timers, and every kernel / layout
path it can pick against the plain computation (same numbers within the dtype's tolerance).
No wall-clock assertion anywhere: which candidate is faster is the machine's business."""

import threading

import pytest
import torch
import torch.nn as nn

from playground.accel import accelerate, native_choice
from playground.accel.decode_paths import stacked_qkv_of
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.readout import many_row_product
from playground.runtime import decode_decisions, kernels

TINY = dict(context_length=48, emb_dim=64, n_heads=4, n_layers=2)


class FakeClock:
    """A timer that only advances when a candidate "runs"."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def costs(self, seconds, calls=None):
        def run():
            self.now += seconds
            if calls is not None:
                calls.append(seconds)

        return run


@pytest.fixture(autouse=True)
def fresh_choices():
    kernels.forget()
    yield
    kernels.forget()


# ---------------------------------------------------------------------------------------------
# The chooser


@pytest.mark.parametrize("fast", ["a", "b"])
def test_the_faster_candidate_wins_and_its_figures_are_kept(fast):
    clock = FakeClock()
    cands = {"a": clock.costs(1.0 if fast == "a" else 2.0), "b": clock.costs(1.0 if fast == "b" else 2.0)}
    choice = kernels.choose(("t", fast), "test decision", cands, timer=clock)
    assert choice.winner == fast and choice.measured
    assert choice.seconds == {"a": 1.0 if fast == "a" else 2.0, "b": 1.0 if fast == "b" else 2.0}
    assert choice.speedup() == pytest.approx(2.0)
    assert choice in kernels.measured()
    assert "test decision: " + fast in choice.summary()


def _within(seconds, work):
    """``work()`` on a thread of its own; its result, or None if it had not returned within ``seconds``."""
    out = []
    t = threading.Thread(target=lambda: out.append(work()), daemon=True)
    t.start()
    t.join(seconds)
    return out[0] if out else None


def test_a_measurement_under_way_holds_no_read_a_request_makes():
    """The background measures a new shape at low priority, slowly on a loaded machine; meanwhile a
    forward's ``decided``, a request's plain candidate (``decided_only``) and the list of decisions answer at
    once. A second measurement waits for the first (two would time each other's load)."""
    clock = FakeClock()
    made = kernels.choose(("t", "made"), "test decision", {"a": clock.costs(1.0), "b": clock.costs(2.0)}, timer=clock)
    started, release = threading.Event(), threading.Event()

    def held():
        started.set()
        release.wait(30)

    measuring = threading.Thread(
        target=kernels.choose, args=(("t", "slow"), "test decision", {"a": held, "b": lambda: None}), daemon=True
    )
    measuring.start()
    try:
        assert started.wait(10)
        assert _within(5, lambda: kernels.decided(("t", "made"))) == made

        def plain():
            with kernels.decided_only():
                return kernels.choose(("weight layout", (3, 3)), "weight layout", lambda: pytest.fail("measured"))

        assert _within(5, plain).winner == kernels.PLAIN["weight layout"]
        assert made in _within(5, kernels.measured)
        second = {"a": clock.costs(1.0), "b": clock.costs(3.0)}
        waiting = threading.Thread(
            target=kernels.choose, args=(("t", "second"), "test decision", second), kwargs={"timer": clock}, daemon=True
        )
        waiting.start()
        waiting.join(1)
        assert waiting.is_alive() and kernels.decided(("t", "second")) is None
    finally:
        release.set()
        measuring.join(30)
    waiting.join(30)
    assert kernels.decided(("t", "slow")).measured
    assert kernels.decided(("t", "second")).winner == "a"  # measured once the first had ended


def test_median_not_mean_a_burst_of_load_does_not_decide():
    clock = FakeClock()
    spikes = iter([1.0] + [100.0] + [1.0] * 20)  # b: warm-up 1, then one 100 s hiccup, then 1 s
    cands = {"a": clock.costs(1.5), "b": lambda: setattr(clock, "now", clock.now + next(spikes))}
    assert kernels.choose(("burst",), "burst", cands, reps=5, budget=1e9, timer=clock).winner == "b"


def test_a_tie_of_medians_under_load_goes_to_the_fastest_pass():
    """Load slows both candidates alike (medians 2% apart, b's a little lower); a's least disturbed
    pass is the faster one, as it would be on a quiet machine: a wins. Medians 10% apart decide alone."""
    clock = FakeClock()
    a = iter([1.0, 1.0] + [3.06] * 6)  # warm-up, then one quiet pass among loaded ones
    b = iter([1.0] + [3.0] * 7)
    cands = {
        "a": lambda: setattr(clock, "now", clock.now + next(a)),
        "b": lambda: setattr(clock, "now", clock.now + next(b)),
    }
    choice = kernels.choose(("tie",), "tie", cands, reps=7, budget=1e9, timer=clock)
    assert choice.seconds["b"] < choice.seconds["a"] <= choice.seconds["b"] * (1 + kernels.TIE)
    assert choice.winner == "a"
    clock = FakeClock()
    a = iter([1.0, 1.0] + [3.3] * 6)
    b = iter([1.0] + [3.0] * 7)
    cands = {
        "a": lambda: setattr(clock, "now", clock.now + next(a)),
        "b": lambda: setattr(clock, "now", clock.now + next(b)),
    }
    assert kernels.choose(("no tie",), "no tie", cands, reps=7, budget=1e9, timer=clock).winner == "b"


def test_a_decision_is_measured_once_per_process_and_key():
    clock, calls = FakeClock(), []
    cands = {"a": clock.costs(1.0, calls), "b": clock.costs(2.0, calls)}
    first = kernels.choose(("once",), "once", cands, reps=3, timer=clock)
    n = len(calls)
    assert kernels.choose(("once",), "once", cands, reps=3, timer=clock) is first
    assert len(calls) == n  # nothing ran again
    kernels.forget()
    kernels.choose(("once",), "once", cands, reps=3, timer=clock)
    assert len(calls) == 2 * n


def test_a_hopeless_candidate_is_not_repeated_and_the_budget_caps_the_rest():
    clock, slow_calls, fast_calls = FakeClock(), [], []
    cands = {"slow": clock.costs(10.0, slow_calls), "fast": clock.costs(1.0, fast_calls), "close": clock.costs(1.5)}
    choice = kernels.choose(("budget",), "budget", cands, reps=50, budget=6.0, timer=clock)
    assert choice.winner == "fast"
    assert len(slow_calls) == 1  # only its warm-up: 10x the best cannot win
    assert choice.seconds["slow"] == 10.0  # ... and that is the figure shown
    assert kernels.MIN_REPS + 1 <= len(fast_calls) < 50  # stopped by the budget, after the minimum


def test_measurements_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    clock, calls = FakeClock(), []
    choice = kernels.choose(
        ("off",), "off", {"plain": clock.costs(2.0, calls), "fast": clock.costs(1.0, calls)}, timer=clock
    )
    assert choice.winner == "plain" and not choice.measured and calls == []
    assert choice.speedup() == 1.0 and "not measured" in choice.summary()


def test_real_decisions_name_one_of_their_candidates():
    torch.manual_seed(0)
    layout = decode_decisions.weight_layout((96, 32), torch.float32, 3)
    assert layout.winner in ("out_in", "in_out") and set(layout.seconds) == {"out_in", "in_out"}
    assert all(s > 0 for s in layout.seconds.values())
    qkv = decode_decisions.stacked_qkv(32, torch.float32, False, 2)
    assert qkv.winner in ("separate", "stacked")
    assert torch.backends.mkldnn.enabled  # no measurement switches oneDNN off
    product = many_row_product(torch.randn(32, 500))
    assert product.winner in ("torch", "numpy") and set(product.seconds) == {"torch", "numpy"}
    assert "numpy in " in product.decision and " lane" in product.decision
    assert "many-row product" in product.summary()


# ---------------------------------------------------------------------------------------------
# Every path the chooser can pick gives the plain numbers


def _force(monkeypatch, layout=None, stacked=None):
    if layout is not None:
        monkeypatch.setattr(
            decode_decisions, "weight_layout", lambda shape, dtype, count: kernels.Choice("f", layout, measured=False)
        )
        # the compiled kernel: test_native_gemv.py
        monkeypatch.setattr(decode_decisions, "one_row_kernel", lambda *a: None)
        monkeypatch.setattr(native_choice, "prepare", lambda model: None)  # the compiled step: test_native_step.py
    if stacked is not None:
        monkeypatch.setattr(decode_decisions, "stacked_qkv", lambda *a: kernels.Choice("f", stacked, measured=False))


def _model(dtype=torch.float32, **changes):
    torch.manual_seed(0)
    model = GPTModel(GPTConfig(**{**TINY, **changes}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(
                1 + 0.2 * torch.randn(p.shape) if name.endswith("scale") else 0.1 * torch.randn(p.shape)
            )  # not randn_like: it follows the strides
    return accelerate(model.to(dtype).eval())


def _decode(model, ids, n_new=8):
    with torch.no_grad():
        cache = model.new_kv_cache()
        out = [model(ids, kv_cache=cache)]
        for _t in range(n_new):
            out.append(model(out[-1][:, -1:].argmax(-1), kv_cache=cache))
    return torch.cat(out, dim=1).float()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "layout, stacked",
    [("in_out", "stacked"), ("in_out", "separate"), ("out_in", "stacked")],
)
def test_every_layout_and_stacking_gives_the_plain_logits(monkeypatch, dtype, layout, stacked):
    ids = torch.randint(0, 50257, (1, 12), generator=torch.Generator().manual_seed(3))
    _force(monkeypatch, layout="out_in", stacked="separate")  # the plain path
    plain = _model(dtype)
    assert all(m.weight.is_contiguous() for m in plain.modules() if isinstance(m, nn.Linear))
    want = _decode(plain, ids)
    _force(monkeypatch, layout=layout, stacked=stacked)
    fast = _model(dtype)
    att = fast.trf_blocks[0].att
    assert (stacked_qkv_of(att) is not None) == (stacked == "stacked")
    w = fast.trf_blocks[0].ff.layers[0].weight
    assert (w.stride() == (1, w.size(0))) == (layout == "in_out")
    got = _decode(fast, ids)
    spread = want.std().item()
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, atol=1e-4 * spread, rtol=1e-4)
    else:  # one bfloat16 rounding per product, in a different order
        assert (got - want).abs().mean() < 0.02 * spread
        assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.9
    assert torch.backends.mkldnn.enabled


def test_stacked_copy_follows_the_measured_layout(monkeypatch):
    _force(monkeypatch, layout="in_out", stacked="stacked")
    model = _model()
    att = model.trf_blocks[1].att
    x = torch.randn(1, 1, 64)
    with torch.no_grad():
        q, k, v = att.project_qkv(x)
    weight, _ = stacked_qkv_of(att).tensors((att.W_query, att.W_key, att.W_value))
    assert weight.stride() == (1, weight.size(0))  # (in, out) storage, like the three it stacks
    for got, lin in zip((q, k, v), (att.W_query, att.W_key, att.W_value)):
        torch.testing.assert_close(got, lin(x).view(1, 1, 4, 16).transpose(1, 2), atol=1e-6, rtol=1e-5)


def test_relayout_after_a_dtype_change_asks_again(monkeypatch):
    asked = []
    monkeypatch.setattr(
        decode_decisions,
        "weight_layout",
        lambda shape, dtype, count: (
            asked.append((shape, dtype, count)) or kernels.Choice("f", "out_in", measured=False)
        ),
    )
    monkeypatch.setattr(decode_decisions, "stacked_qkv", lambda *a: kernels.Choice("f", "separate", measured=False))
    monkeypatch.setattr(decode_decisions, "one_row_kernel", lambda *a: None)
    model = _model()
    assert ((64, 64), torch.float32, 8) in asked  # 4 square matrices a layer, 2 layers
    asked.clear()
    accelerate(model.to(torch.bfloat16))
    assert {(s, d) for s, d, _ in asked} == {
        ((64, 64), torch.bfloat16),
        ((256, 64), torch.bfloat16),
        ((64, 256), torch.bfloat16),
        ((50257, 64), torch.bfloat16),
    }
    accelerate(model)


def test_a_plain_model_measures_nothing_until_it_is_accelerated():
    from playground.engine.sampling import generate

    kernels.forget()
    model = GPTModel(GPTConfig(**TINY)).to(torch.bfloat16).eval()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]))
        model(torch.tensor([[4]]))
    assert len(list(generate(model, [1, 2], max_new_tokens=3, temperature=0))) == 3
    assert kernels.measured() == []  # a plain forward and a plain generate time nothing
    accelerate(model)
    assert kernels.measured() != []


def test_a_different_thread_count_measures_again():
    clock, calls = FakeClock(), []
    cands = {"a": clock.costs(1.0, calls), "b": clock.costs(2.0, calls)}
    before = torch.get_num_threads()
    kernels.choose(("threads",), "threads", cands, reps=3, timer=clock)
    n = len(calls)
    kernels.choose(("threads",), "threads", cands, reps=3, timer=clock)
    assert len(calls) == n
    try:
        torch.set_num_threads(1 if before > 1 else 2)
        kernels.choose(("threads",), "threads", cands, reps=3, timer=clock)
        assert len(calls) == 2 * n  # the winner can change with the thread count
    finally:
        torch.set_num_threads(before)
