"""The compiled sampled step (runtime.native_sampler through accel.sampler) against the teaching sampler,
``Generation._choose``: the same tokens, draws, ranks, counts and ids, the probabilities within float32 rounding,
on random rows and on real models' generations; the rows it leaves to ``_choose``; switched off."""

import math
import os

import pytest
import torch

from playground.accel.decoder import ACCELERATED
from playground.accel.sampler import CompiledSampler, sample_rows
from playground.engine import decoding
from playground.engine.decoding import SampledRow
from playground.engine.receipts import receipt
from playground.engine.sampling import STAGES, Generation, NonFiniteError, generate
from playground.engine.weights import load_checkpoint
from playground.runtime import native_sampler
from tests.helpers import ROOT
from tests.tiny_models import random_model

N_TOP = 10
TORCH_REL = 5e-5  # torch's float32 softmax against the exact one (as tests/native/test_row_summary.py)
PROMPT = [15496, 11, 314, 716]  # "Hello, I am"
V = 50257
# (temperature, top_k, top_p): no filter, each filter at its edges, both, a tiny temperature
SETTINGS = [
    (1.0, None, None),
    (0.8, None, None),
    (0.8, 40, None),
    (1.0, 1, None),
    (1.3, V, None),
    (0.7, None, 0.9),
    (1.0, None, 0.05),
    (1.0, None, 1.0),
    (0.9, 40, 0.9),
    (1e-3, None, None),
    (1e-6, 40, 0.9),
]


@pytest.fixture(autouse=True)
def forget_sampler():
    native_sampler.forget()
    yield
    native_sampler.forget()


def compiled(n_top: int = N_TOP) -> CompiledSampler:
    if not native_sampler.available():
        status = native_sampler.status()
        pytest.skip(f"no compiled sampler here: {status.reason} {status.detail}")
    return CompiledSampler(n_top)


def reference(model, settings, n_top: int = N_TOP) -> Generation:
    temperature, top_k, top_p = settings
    return Generation(model, PROMPT, 1, temperature, top_k, top_p, n_top=n_top)


def assert_same_step(got: dict, want):
    """Ids, counts and the draw equal; probabilities, entropies and slices within float32 rounding."""
    for name in ("token_id", "u", "rank", "kept_tokens", "candidates"):
        assert got[name] == getattr(want, name), name
    assert [i for i, _ in got["top"]] == [i for i, _ in want.top]
    assert [p for _, p in got["top"]] == pytest.approx([p for _, p in want.top], rel=TORCH_REL, abs=1e-30)
    for name in ("prob", "raw_prob"):
        assert got[name] == pytest.approx(getattr(want, name), rel=TORCH_REL, abs=1e-30), name
    # The reference's entropy is taken from float32 probabilities whose normaliser, a float32 sum of a peaked
    # row, drops its smallest terms' low bits (up to ~1e-4 of the sum, test_top_p_cuts_on_the_bundled_models_
    # rows): every probability then carries the same factor 1 + e, which moves the entropy by up to about
    # e / ln 2 = 1.5e-4 bits. The compiled entropy is summed in double from the logits.
    for name in ("entropy", "raw_entropy"):
        assert got[name] == pytest.approx(getattr(want, name), rel=TORCH_REL, abs=2e-4), name
    assert list(got["stages"]) == list(STAGES)
    for name in STAGES:
        assert got["stages"][name] == pytest.approx(want.stages[name], rel=TORCH_REL, abs=1e-30), name
    assert [i for i, _, _ in got["intervals"]] == [i for i, _, _ in want.intervals]
    flat = [x for _, lo, hi in got["intervals"] for x in (lo, hi)]
    assert flat == pytest.approx([x for _, lo, hi in want.intervals for x in (lo, hi)], rel=TORCH_REL, abs=1e-12)


def random_rows():
    """Rows at several scales, and one with ties away from the top (at the k-th place of top-k 40)."""
    g = torch.Generator().manual_seed(0)
    for scale in (0.5, 1.0, 3.0, 10.0):
        for _ in range(2):
            yield f"randn x{scale}", torch.randn(V, generator=g) * scale
    tied = torch.randn(V, generator=g) * 2
    ranked = torch.argsort(tied, descending=True)
    tied[ranked[36:44]] = float(tied[ranked[39]])  # eight entries tie at the 40th place; the top 11 are distinct
    yield "tied at the k-th place", tied


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
def test_random_rows_give_the_reference_step(settings):
    sample = compiled()
    chooser = reference(random_model(), settings)
    taken = 0
    for seed, (name, x) in enumerate(random_rows()):
        want = chooser._choose(x, torch.Generator().manual_seed(seed), 0, 0, 0)
        got = sample(x, torch.Generator().manual_seed(seed), *settings)
        if got is None:  # a top-p cut within float32 rounding of p: the reference's row
            assert settings[2] is not None and settings[2] < 1, name
            continue
        assert_same_step(got, want)
        taken += 1
    assert taken == 9 if settings[2] is None or settings[2] >= 1 else taken >= 3


def test_ties_at_the_top_are_left_to_the_reference_without_a_draw():
    """torch.topk orders equal probabilities its own way: such a row is ``_choose``'s, and the generator is untouched."""
    sample = compiled()
    x = torch.randn(V, generator=torch.Generator().manual_seed(3))
    x[[40000, 7, 123]] = 9.0  # a three-way tie for the largest
    gen = torch.Generator().manual_seed(5)
    state = gen.get_state()
    assert sample(x, gen, 0.8, None, None) is None
    assert torch.equal(gen.get_state(), state)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_rows_are_left_to_the_reference(bad):
    sample = compiled()
    x = torch.randn(V, generator=torch.Generator().manual_seed(4))
    x[4321] = bad
    assert sample(x, torch.Generator().manual_seed(0), 0.8, 40, 0.9) is None
    with pytest.raises(NonFiniteError):
        reference(random_model(), (0.8, 40, 0.9))._choose(x, torch.Generator().manual_seed(0), 0, 0, 0)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_together_give_each_row_the_step_it_gets_alone(threads):
    """``sample_rows``: one compiled call for many rows, each with its own settings, sampler and generator, gives
    every row the fields its sampler gives it alone, bit for bit; a row left to the reference (ties at the top,
    a top-p cut at p, NaN) comes back None with its generator as it was, so the reference draws the same u."""
    compiled()
    xs = [x for _, x in random_rows()]
    top_tie = torch.randn(V, generator=torch.Generator().manual_seed(3))
    top_tie[[40000, 7, 123]] = 9.0
    nan_row = torch.randn(V, generator=torch.Generator().manual_seed(4))
    nan_row[4321] = float("nan")
    xs += [top_tie, nan_row]
    cases = [(x, SETTINGS[(i * 5) % len(SETTINGS)], 1000 + i) for i, x in enumerate(xs)]
    cases += [(x, settings, 2000 + j) for j, settings in enumerate(SETTINGS) for x in xs[4:5]]

    def rows():
        return [
            SampledRow(compiled(), x, torch.Generator().manual_seed(seed), *settings) for x, settings, seed in cases
        ]

    alone = rows()
    want = [r.sampler(r.logits, r.generator, r.temperature, r.top_k, r.top_p) for r in alone]
    together = rows()
    before = [r.generator.get_state() for r in together]
    got = sample_rows(together, threads)
    assert got == want
    assert sum(g is None for g in got) >= 2  # the two rows above at least were the reference's
    for r, a, state, g in zip(together, alone, before, got):
        assert torch.equal(r.generator.get_state(), a.generator.get_state())
        if g is None:  # nothing drawn
            assert torch.equal(r.generator.get_state(), state)


def test_rows_together_take_a_non_contiguous_row_and_leave_other_samplers_to_themselves():
    """A strided row is copied for the call; a row whose sampler is not a compiled one is its own sampler's."""
    compiled()
    wide = torch.randn(V, 2, generator=torch.Generator().manual_seed(6))
    calls = []

    def other(logits, generator, temperature, top_k, top_p):
        calls.append((temperature, top_k, top_p))
        return {"own": True}

    strided = wide[:, 0]  # every second float
    assert not strided.is_contiguous()
    rows = [
        SampledRow(compiled(), strided, torch.Generator().manual_seed(1), 0.8, 40, None),
        SampledRow(other, wide[:, 1], torch.Generator().manual_seed(2), 0.5, None, 0.9),
    ]
    want = compiled()(strided.contiguous(), torch.Generator().manual_seed(1), 0.8, 40, None)
    assert want is not None
    got = sample_rows(rows, 2)
    assert got == [want, {"own": True}] and calls == [(0.5, None, 0.9)]


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(ROOT / "playground" / "assets" / "bundled" / "model.safetensors", dtype="float32")


def run(model, settings, n: int, seed: int, accelerated: bool = True, n_top: int = N_TOP) -> list:
    temperature, top_k, top_p = settings
    if accelerated:
        decoding.attach(model, ACCELERATED)
    try:
        gen = generate(
            model, PROMPT, max_new_tokens=n, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, n_top=n_top
        )
        return list(gen)
    finally:
        decoding.detach(model)


def assert_same_steps(got: list, want: list):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert (a.index, a.position, a.context_start) == (b.index, b.position, b.context_start)
        fields = {name: getattr(a, name) for name in ("token_id", "u", "rank", "kept_tokens", "candidates")}
        fields |= {name: getattr(a, name) for name in ("top", "prob", "raw_prob", "entropy", "raw_entropy")}
        assert_same_step(fields | {"stages": a.stages, "intervals": a.intervals}, b)


@pytest.mark.parametrize("which", ["tiny", "bundled"])
@pytest.mark.parametrize("settings", [(0.8, 40, None), (1.0, None, None), (0.9, None, 0.9), (1.2, 40, 0.95)], ids=str)
def test_generations_take_the_reference_steps(which, settings, request, monkeypatch):
    """Seeded generations through the accelerated decoder against the plain one (``_choose`` on every step),
    and each compiled step against ``_choose`` on the logits it was given."""
    compiled()
    model = random_model() if which == "tiny" else request.getfixturevalue("bundled")
    taken = []
    real = CompiledSampler.__call__

    def counted(self, *args):
        got = real(self, *args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(CompiledSampler, "__call__", counted)
    fast = run(model, settings, 30, seed=11)
    plain = run(model, settings, 30, seed=11, accelerated=False)
    # The compiled sampler takes every step but those whose top-p cut lies within float32 rounding of p: on the
    # tiny random model's nearly flat rows (tens of thousands of tokens in the nucleus) that is most of them.
    assert len(taken) == 30 and sum(taken) >= (28 if settings[2] is None or which == "bundled" else 5)
    assert_same_steps(fast, plain)
    assert len({s.token_id for s in fast}) > 5
    assert all(receipt(s).reproduced for s in fast)  # u lies in the chosen token's slice


@pytest.mark.parametrize("sampled_together", [False, True], ids=["each sampled alone", "sampled together"])
def test_a_generation_alone_and_beside_others_takes_the_same_steps(bundled, sampled_together):
    """Stepped alone, or with two others through ``next_row`` -> ``decoder.rows`` -> ``advance`` (each run's
    sampler on its own, or every run's step from one ``sample_rows`` call): the same steps."""
    compiled()
    settings = dict(max_new_tokens=12, temperature=0.8, top_k=40, n_top=N_TOP)
    decoding.attach(bundled, ACCELERATED)
    try:
        alone = list(generate(bundled, PROMPT, seed=7, **settings))
        gens = [
            generate(bundled, prompt, seed=seed, **settings) for prompt, seed in ((PROMPT, 7), ([464], 8), ([50], 9))
        ]
        for g in gens:
            g.step_alone()  # the prompt, by itself
        while not all(g.done for g in gens):
            live = [g for g in gens if not g.done]
            rows = [g.next_row() for g in live]
            assert all(r is not None for r in rows)
            results = ACCELERATED.rows(bundled, rows)
            if sampled_together:
                asks = [g.sampled_row(result) for g, result in zip(live, results)]
                assert all(a is not None for a in asks)
                made = ACCELERATED.sample_rows(asks)
                for g, result, fields in zip(live, results, made):
                    g.advance(result, fields, sampled=True)
            else:
                for g, result in zip(live, results):
                    g.advance(result)
    finally:
        decoding.detach(bundled)
    together = gens[0].steps
    assert [(s.token_id, s.u, s.prob, s.entropy, s.top, s.intervals, s.stages) for s in together] == [
        (s.token_id, s.u, s.prob, s.entropy, s.top, s.intervals, s.stages) for s in alone
    ]


def test_non_finite_logits_stop_a_sampled_generation_at_the_same_step():
    compiled()
    model = random_model()
    decoding.attach(model, ACCELERATED)
    try:
        gen = generate(model, PROMPT, max_new_tokens=6, temperature=0.8, top_k=40, seed=0)
        assert [next(gen).index, next(gen).index] == [0, 1]
        with torch.no_grad():
            model.trf_blocks[1].ff.layers[2].bias.fill_(float("inf"))
        with pytest.raises(NonFiniteError, match=r"^Step 3: the model produced NaN/infinite logits \(") as info:
            next(gen)
        assert info.value.step == 3
    finally:
        decoding.detach(model)


def test_switched_off_the_reference_samples(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ACCEL", "off")
    assert ACCELERATED.sampler(N_TOP) is None and native_sampler.status().reason == "off"
    assert decoding.PLAIN.sampler(N_TOP) is None
    model = random_model()
    a = run(model, (0.8, 40, None), 5, seed=3)
    b = run(model, (0.8, 40, None), 5, seed=3, accelerated=False)
    assert [(s.token_id, s.u, s.prob, s.top) for s in a] == [(s.token_id, s.u, s.prob, s.top) for s in b]


@pytest.mark.parametrize("n_top", [1, 0, 3])
def test_other_top_sizes(n_top):
    """A top of 1 or 0 ids (the candidates are then the token alone), and top-k below the top size."""
    sample = compiled(n_top)
    chooser = reference(random_model(), (0.9, 2, None), n_top)
    x = torch.randn(V, generator=torch.Generator().manual_seed(6)) * 3
    for seed in range(5):
        want = chooser._choose(x, torch.Generator().manual_seed(seed), 0, 0, 0)
        got = sample(x, torch.Generator().manual_seed(seed), 0.9, 2, None)
        assert got is not None
        assert_same_step(got, want)


def test_the_portable_build_gives_the_same_step(monkeypatch, tmp_path):
    """Built without AVX2 (as for a CPU that lacks it), the plain C++ loops: the same step."""
    import platform

    from playground.runtime import library_cache

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the AVX2 switch is an x86 flag")
    x = torch.randn(V, generator=torch.Generator().manual_seed(8)) * 2
    vectorised = compiled()(x, torch.Generator().manual_seed(1), 0.8, None, 0.9)
    native_sampler.forget()
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(library_cache, "FLAGS", [*library_cache.FLAGS, "-mno-avx2", "-mno-fma"])
    portable = compiled()(x, torch.Generator().manual_seed(1), 0.8, None, 0.9)
    assert portable is not None and vectorised is not None
    for name in ("token_id", "u", "rank", "kept_tokens", "candidates"):
        assert portable[name] == vectorised[name]
    assert portable["entropy"] == pytest.approx(vectorised["entropy"], rel=1e-6)
    assert math.isclose(portable["prob"], vectorised["prob"], rel_tol=1e-6)


def test_the_fused_passes_give_the_separate_passes_bits(monkeypatch, tmp_path):
    """Where AVX-512 or AVX2 fuses prepare's passes (sample_fused.cpp), every field of every step is the one the
    separate passes (the same source built with PG_SAMPLE_SEPARATE) give, bit for bit: the same operations in the
    same order. On an AVX-512 CPU the AVX2 build's fused passes (built without AVX-512) give them too."""
    from playground.runtime import library_cache

    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if " avx2" not in flags or " fma" not in flags:
        pytest.skip("no AVX2 here: the fused passes are not built")
    gen = torch.Generator().manual_seed(11)
    rows = [torch.randn(V, generator=gen) * scale for scale in (1.0, 3.0, 12.0)]
    rows.append(torch.round(torch.randn(V, generator=gen) * 2))  # ties among the top ids and at top-k's k-th
    rows.append(torch.randn(V - 70, generator=gen) * 2)  # its last block: sixteens, then eight, then three,
    rows[-1][-11:] += 6.0  # and the mass there
    settings = [*SETTINGS, (0.5, 300, None), (2.0, 5, 0.99)]

    def steps(*extra):
        native_sampler.forget()
        if extra:
            monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path / extra[-1].lstrip("-")))
            monkeypatch.setattr(library_cache, "FLAGS", [*BUILT_FLAGS, *extra])
        out = []
        for lanes in (8, 16):  # torch's softmax sums in 16 lanes with AVX-512, else 8: both, whatever the CPU
            sample = compiled()
            sample.lanes = lanes
            out += [sample(x, torch.Generator().manual_seed(i), *st) for i, x in enumerate(rows) for st in settings]
        return out

    BUILT_FLAGS = list(library_cache.FLAGS)
    fused = steps()
    assert sum(step is not None for step in fused) > len(fused) // 2  # most rows taken here, not left to _choose
    assert steps("-DPG_SAMPLE_SEPARATE") == fused
    if " avx512f" in flags:
        assert steps("-mno-avx512f") == fused


@pytest.mark.parametrize("settings", [(1.0, None, 0.9), (1.0, None, 0.95), (0.8, None, 0.9), (1.0, 40, 0.9)], ids=str)
def test_top_p_cuts_on_the_bundled_models_rows(bundled, settings, monkeypatch):
    """A float32 sum of a peaked row drops its smallest terms' low bits (up to ~1e-4 of the sum): the compiled
    step sums as torch's softmax does, so its top-p cut is torch's on every row it takes."""
    sample = compiled()
    rows = []
    real = Generation.advance

    def recorded(self, result):
        rows.append(result[0].clone())
        return real(self, result)

    monkeypatch.setattr(Generation, "advance", recorded)
    for seed, prompt in enumerate((PROMPT, [464], [50, 1110, 318])):
        list(generate(bundled, prompt, max_new_tokens=30, temperature=1.0, seed=seed))
    chooser = reference(bundled, settings)
    left = 0
    for seed, x in enumerate(rows):
        got = sample(x, torch.Generator().manual_seed(seed), *settings)
        if got is None:
            left += 1
            continue
        assert_same_step(got, chooser._choose(x, torch.Generator().manual_seed(seed), 0, 0, 0))
    assert len(rows) == 90 and left <= 20
