"""The row summary a greedy step reads (engine.row_summary on runtime.native_row_summary): the compiled one and
the numpy/torch one against the full sampler's softmax, top-k and entropy; greedy generations with it on and off."""

import math

import numpy as np
import pytest
import torch

from playground.accel.decoder import ACCELERATED
from playground.accel.row_summary import CompiledSummarizer as Summarizer
from playground.engine import decoding
from playground.engine.row_summary import reference_summary
from playground.engine.sampling import STAGES, Generation, NonFiniteError, generate, sampling_distribution
from playground.engine.weights import load_checkpoint
from playground.runtime import native_row_summary
from tests.helpers import ROOT

N_TOP = 10
TORCH_REL = 5e-5  # torch's float32 softmax against the exact one (its vectorised exp is not the exact one)
PROMPT = [15496, 11, 314, 716]  # "Hello, I am"


@pytest.fixture(autouse=True)
def forget_summary():
    native_row_summary.forget()
    yield
    native_row_summary.forget()


def compiled() -> Summarizer:
    summarize = Summarizer(N_TOP)
    if not summarize.compiled:
        status = native_row_summary.status()
        pytest.skip(f"no compiled row summary here: {status.reason} {status.detail}")
    return summarize


def rows() -> dict[str, torch.Tensor]:
    """Rows as a model gives them and the awkward ones: ties (at the top and at the n-th place), one huge
    logit, a spread so wide that probabilities underflow, fewer entries than n_top."""
    g = torch.Generator().manual_seed(0)
    out = {f"randn x{s}": torch.randn(50257, generator=g) * s for s in (0.5, 3.0, 30.0)}
    tied = torch.randn(50257, generator=g)
    tied[[40000, 7, 123]] = 9.0  # three-way tie for the largest
    tied[[50000, 3, 999, 20000, 11, 42, 5000, 44]] = 8.0  # the n-th place falls inside a tie
    out["ties"] = tied
    out["zeros"] = torch.zeros(1000)
    peaked = torch.randn(50257, generator=g)
    peaked[31337] = 80.0
    out["peaked"] = peaked
    out["underflow"] = torch.randn(50257, generator=g) * 200  # thousands of probabilities round to 0
    out["short"] = torch.tensor([1.0, 3.0, 3.0, 2.0])
    return out


def torch_answer(x: torch.Tensor, n_top: int):
    """What ``Generation._choose`` computes at temperature 0: the softmax, its top n (ordered by larger
    logit, then lower id: torch.topk leaves the order of ties open), its entropy and nonzero count."""
    probs = sampling_distribution(x, 0.0)["raw"]
    a = x.numpy()
    order = np.lexsort((np.arange(a.size), -a))[: min(n_top, a.size)].tolist()
    entropy = float(torch.special.entr(probs.double()).sum() / math.log(2))
    return int(torch.argmax(x)), probs, order, entropy, int((probs > 0).sum())


@pytest.mark.parametrize("name", list(rows()))
@pytest.mark.parametrize("which", ["compiled", "reference"])
def test_summary_equals_the_full_sampler(name, which):
    x = rows()[name]
    summary = compiled()(x) if which == "compiled" else reference_summary(x, N_TOP)
    assert summary is not None
    argmax, probs, order, entropy, kept = torch_answer(x, N_TOP)
    assert summary.argmax == argmax == order[0]
    assert [i for i, _ in summary.top] == order
    # The compiled summary's probabilities are within float32 rounding of the exact (float64) softmax; torch's
    # float32 softmax, which the fallback and the full sampler use, is within a few 1e-5 of it.
    exact = torch.softmax(x.double(), -1)
    got = [p for _, p in summary.top] + [summary.prob]
    want = exact[order + [argmax]].tolist()
    assert got == pytest.approx(want, rel=3e-7 if which == "compiled" else TORCH_REL, abs=1e-30)
    assert got == pytest.approx(probs[order + [argmax]].tolist(), rel=TORCH_REL, abs=1e-30)
    assert summary.entropy == pytest.approx(entropy, rel=1e-5, abs=1e-6)
    assert summary.kept == kept
    if name == "underflow":
        assert 0 < kept < x.numel()  # the row did reach float32's underflow


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("which", ["compiled", "reference"])
def test_a_non_finite_entry_gives_no_summary(bad, which):
    x = torch.randn(50257, generator=torch.Generator().manual_seed(1))
    x[4321] = bad
    summary = compiled()(x) if which == "compiled" else reference_summary(x, N_TOP)
    assert summary is None


def test_minus_infinity_entries_are_zero_probabilities_when_allowed():
    """A row after top-k or top-p: -inf entries count as probability 0, not as an error."""
    compiled()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1000, generator=g) * 2
    x[torch.randperm(1000, generator=g)[:995]] = float("-inf")  # five finite entries for a top 10
    buffers = native_row_summary.Buffers(N_TOP)
    assert not native_row_summary.summarize(x.data_ptr(), 1000, buffers)
    assert native_row_summary.summarize(x.data_ptr(), 1000, buffers, allow_neg_inf=True)
    probs = torch.softmax(x, -1)
    finite = sorted(torch.nonzero(x > float("-inf"))[:, 0].tolist(), key=lambda i: -float(x[i]))
    assert buffers.ids[:5].tolist() == finite
    assert buffers.probs[:5].tolist() == pytest.approx(probs[finite].tolist(), rel=2e-6)
    assert buffers.probs[5:].tolist() == [0.0] * 5  # then -inf entries, the lower ids first
    assert buffers.ids[5:].tolist() == sorted(set(range(10)) - set(finite))[:5]
    assert buffers.out[3] == pytest.approx(float(torch.special.entr(probs).sum()) / math.log(2), rel=1e-5)
    assert buffers.out[4] == 5 and buffers.out[5] == 0


def test_switched_off_it_is_the_fallback(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    summarize = Summarizer(N_TOP)
    assert not summarize.compiled and native_row_summary.status().reason == "off"
    x = rows()["ties"]
    assert summarize(x) == reference_summary(x, N_TOP)


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(ROOT / "playground" / "assets" / "bundled" / "model.safetensors", dtype="float32")


def greedy_run(model, n: int, n_top: int = N_TOP, accelerated: bool = True) -> list:
    """Greedy steps through the accelerated decoder (the compiled summary where it built) or the plain one."""
    if accelerated:
        decoding.attach(model, ACCELERATED)
    try:
        return list(generate(model, PROMPT, max_new_tokens=n, temperature=0, n_top=n_top))
    finally:
        decoding.detach(model)


def assert_same_steps(got, want):
    """Every field equal; the probabilities and entropies within torch's float32 softmax's error of each other."""
    assert len(got) == len(want)
    for a, b in zip(got, want):
        for name in ("index", "position", "token_id", "rank", "candidates", "context_start", "kept_tokens", "u"):
            assert getattr(a, name) == getattr(b, name), name
        assert a.intervals == b.intervals == [] and a.attention is b.attention is None
        assert [i for i, _ in a.top] == [i for i, _ in b.top]
        for name in ("prob", "raw_prob", "entropy", "raw_entropy"):
            assert getattr(a, name) == pytest.approx(getattr(b, name), rel=TORCH_REL), name
        assert [p for _, p in a.top] == pytest.approx([p for _, p in b.top], rel=TORCH_REL, abs=1e-30)
        assert list(a.stages) == list(STAGES)
        for name in STAGES:
            assert a.stages[name] == pytest.approx(b.stages[name], rel=TORCH_REL, abs=1e-30)


def test_greedy_generation_with_the_compiled_summary_on_and_off(bundled, monkeypatch):
    compiled()
    on = greedy_run(bundled, 24)
    plain = greedy_run(bundled, 24, accelerated=False)  # the reference summary
    native_row_summary.forget()
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    off = greedy_run(bundled, 24)  # the accelerated decoder with the compiled summary switched off
    assert native_row_summary.status().reason == "off"
    assert_same_steps(on, plain)
    assert_same_steps(on, off)


@pytest.mark.parametrize("n_top", [N_TOP, 1, 0])
def test_greedy_steps_equal_the_full_samplers_steps(bundled, n_top, monkeypatch):
    """Each compiled-summary step as ``Generation._choose`` (softmax, torch.topk, entropy over the whole row) makes it."""
    seen = []
    real = Generation.advance

    def recorded(self, result):
        seen.append(result[0].clone())
        return real(self, result)

    monkeypatch.setattr(Generation, "advance", recorded)
    steps = greedy_run(bundled, 12, n_top)
    chooser = Generation(bundled, PROMPT, 1, temperature=0.0, n_top=n_top)
    want = [chooser._choose(x, None, s.index, s.position, 0) for x, s in zip(seen, steps)]
    assert len({s.token_id for s in steps}) > 3  # not one token over and over
    assert_same_steps(steps, want)


def test_non_finite_logits_stop_the_summary_path_at_the_same_step(monkeypatch):
    compiled()
    model = sampling_model()
    gen = generate(model, PROMPT, max_new_tokens=6, temperature=0)
    assert [next(gen).index, next(gen).index] == [0, 1]
    with torch.no_grad():
        model.trf_blocks[1].ff.layers[2].bias.fill_(float("inf"))
    with pytest.raises(NonFiniteError, match=r"^Step 3: the model produced NaN/infinite logits \(") as info:
        next(gen)
    assert info.value.step == 3


def sampling_model():
    from playground.engine.config import GPTConfig
    from playground.engine.model import GPTModel

    cfg = GPTConfig(context_length=32, emb_dim=32, n_heads=4, n_layers=2)
    return GPTModel(cfg, generator=torch.Generator().manual_seed(0)).eval()


def test_the_summary_path_is_only_for_plain_greedy(monkeypatch):
    """Temperature, top-k and top-p steps keep the full sampler (their stages differ)."""
    built = []
    model = sampling_model()
    decoder = decoding.decoder_of(model)
    real = decoder.summarizer
    monkeypatch.setattr(decoder, "summarizer", lambda n: built.append(n) or real(n))
    for kwargs in (dict(temperature=0.7), dict(temperature=0, top_k=5), dict(temperature=0, top_p=0.9)):
        list(generate(model, PROMPT, max_new_tokens=2, seed=0, **kwargs))
    assert built == []
    list(generate(model, PROMPT, max_new_tokens=2, temperature=0, top_k=50257, top_p=1.0))
    assert built == [N_TOP]


@pytest.mark.parametrize("name", ["randn x3.0", "ties", "underflow", "short"])
def test_the_portable_build_gives_the_same_summary(name, monkeypatch, tmp_path):
    """Built without AVX2 (as for a CPU that lacks it), the summary runs its plain C++ loops: the same answer."""
    import platform

    from playground.runtime import library_cache

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the AVX2 switch is an x86 flag")
    vectorised = compiled()(rows()[name])
    native_row_summary.forget()
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(library_cache, "FLAGS", [*library_cache.FLAGS, "-mno-avx2", "-mno-fma"])
    portable = compiled()(rows()[name])
    assert portable is not None and vectorised is not None
    assert (portable.argmax, portable.kept, [i for i, _ in portable.top]) == (
        vectorised.argmax,
        vectorised.kept,
        [i for i, _ in vectorised.top],
    )
    assert [p for _, p in portable.top] == pytest.approx([p for _, p in vectorised.top], rel=3e-7, abs=1e-30)
    assert portable.entropy == pytest.approx(vectorised.entropy, rel=1e-6)
