"""The model that ships in playground/assets/bundled: small, quick to load, a GPT-2 that transformers loads from
the same folder with the same logits, and every figure in facts.json recomputed here from the file,
with the playground's model and with transformers', and held against the issue's targets: a
previous-token head, an induction head, in-context copying, a first-token sink and the held-out loss."""

from __future__ import annotations

import json
import math
import sys
import time

import pytest
import torch

from playground.engine.config import GPT2_VOCAB_SIZE, GPTConfig
from playground.engine.model import GPTModel
from playground.engine.tokenizer import load_tokenizer
from playground.engine.weights import load_checkpoint, read_checkpoint_metadata
from playground.training.losses import unigram_loss
from tests.helpers import ROOT, TINY_SHAKESPEARE

BUNDLED = ROOT / "playground" / "assets" / "bundled"
CHECKPOINT = BUNDLED / "model.safetensors"
FACTS = json.loads((BUNDLED / "facts.json").read_text())
TARGETS = FACTS["targets"]

sys.path.insert(0, str(ROOT / "tools" / "bundled"))  # how the model is made: its metrics
import bundled_metrics as bm  # noqa: E402

transformers = pytest.importorskip("transformers")
needs_corpus = pytest.mark.skipif(
    not TINY_SHAKESPEARE.is_file(), reason="../shared/data/tinyshakespeare.txt is not present"
)


@pytest.fixture(scope="module")
def model():
    return load_checkpoint(CHECKPOINT)


@pytest.fixture(scope="module")
def hf_model():
    return transformers.GPT2LMHeadModel.from_pretrained(
        BUNDLED, attn_implementation="eager", dtype=torch.float32
    ).eval()


@pytest.fixture(scope="module")
def split():
    """Train / held-out ids, split here independently of playground.training.corpus: last 10% held out."""
    ids = torch.tensor(load_tokenizer().encode(TINY_SHAKESPEARE.read_text(encoding="utf-8")))
    n_val = round(len(ids) * 0.1)
    return ids[:-n_val], ids[-n_val:]


def test_checkpoint_is_small_and_loads_fast():
    size = CHECKPOINT.stat().st_size
    assert size <= TARGETS["bytes_max"] == 16_000_000
    assert size == FACTS["bytes_on_disk"]
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        m = load_checkpoint(CHECKPOINT)
        times.append(time.perf_counter() - t0)
    print(f"bundled checkpoint: {size:,} bytes, load {min(times) * 1000:.0f}-{max(times) * 1000:.0f} ms")
    assert min(times) < 5.0  # the target is < 1 s; this bound only guards against a shared, busy CPU
    assert isinstance(m, GPTModel) and m.load_report.ok and not m.load_report.unexpected


def test_checkpoint_matches_its_facts(model):
    assert model.cfg == GPTConfig.from_dict(FACTS["config"])
    assert model.cfg.vocab_size == GPT2_VOCAB_SIZE and model.cfg.tie_weights
    assert (model.cfg.pos_encoding, model.cfg.norm_placement, model.cfg.activation) == ("learned", "pre", "gelu_tanh")
    assert sum(p.numel() for p in model.parameters()) == FACTS["parameters"]
    meta = read_checkpoint_metadata(CHECKPOINT)
    assert int(meta["step"]) == FACTS["step"] and int(meta["tokens_seen"]) == FACTS["tokens_seen"]
    stages = FACTS["recipe"]  # train_bundled.py's arguments of each stage, with the steps it ran
    assert FACTS["step"] == sum(s["steps_run"] for s in stages)
    assert FACTS["tokens_seen"] == sum(s["steps_run"] * s["batch"] * s["context"] for s in stages)
    # Stored in float16: two bytes a number (the tied embedding once), plus a small header.
    assert FACTS["parameters"] * 2 < FACTS["bytes_on_disk"] < FACTS["parameters"] * 2 + 100_000
    assert model.tok_emb.weight.data_ptr() == model.out_head.weight.data_ptr()  # re-tied on load


def test_transformers_loads_the_same_folder_with_the_same_logits(model, hf_model):
    ids = torch.tensor([load_tokenizer().encode("ROMEO:\nWhat say you, my good lord? Speak, and I shall hear.")])
    with torch.no_grad():
        ours, trace = model(ids, return_attention=True)
        theirs = hf_model(ids, output_attentions=True)
    torch.testing.assert_close(theirs.logits, ours, atol=2e-4, rtol=1e-4)
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(theirs.attentions[layer], trace.layer(layer), atol=1e-5, rtol=1e-4)


@needs_corpus
def test_greedy_continuation_is_english_not_noise(model):
    tok = load_tokenizer()
    ids = torch.tensor([tok.encode("ROMEO:\nWhat say you, my good lord")])
    with torch.no_grad():
        for _ in range(20):
            ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], dim=1)
    text = tok.decode(ids[0, -20:].tolist())
    words = [w.strip(".,;:!?'-\n").lower() for w in text.split()]
    words = [w for w in words if w]
    # Words of the play, not noise: nearly every word is one the training text uses.
    known = {w.strip(".,;:!?'-").lower() for w in TINY_SHAKESPEARE.read_text(encoding="utf-8").split()}
    assert len(words) >= 5 and sum(w in known for w in words) >= 0.8 * len(words), text


@pytest.fixture(scope="module", params=["playground", "transformers"])
def measured(request, model, hf_model, split):
    """bundled_metrics' measurements of the shipped file, through either model's own forward."""
    train_ids, val_ids = split
    which = model if request.param == "playground" else hf_model
    with torch.no_grad():
        return request.param, bm.all_metrics(which, train_ids, val_ids, FACTS["config"]["context_length"])


@needs_corpus
def test_held_out_loss_is_recomputed(measured, split):
    who, m = measured
    print(f"{who}: val {m['val_loss']:.4f}, train {m['train_loss']:.4f}")
    assert m["val_loss"] == pytest.approx(FACTS["val_loss"][who], abs=2e-3)
    train_ids, val_ids = split
    assert m["val_loss"] < unigram_loss(train_ids, val_ids) - 1.0
    assert FACTS["val_loss"]["random_init"] == pytest.approx(math.log(GPT2_VOCAB_SIZE), abs=0.1)


HEADS = (("previous_token", "prev_token"), ("induction", "induction"), ("first_token", "first_token"))


@needs_corpus
def test_heads_and_copying_are_recomputed(measured):
    who, m = measured
    for name, key in HEADS:
        got, stated = m[key], FACTS["heads"][name]
        print(f"{who}: {name} head L{got['layer']}H{got['head']} score {got['score']:.3f}")
        assert (got["layer"], got["head"]) == (stated["layer"], stated["head"])
        assert got["score"] == pytest.approx(stated["score" if who == "playground" else "transformers_score"], abs=2e-3)
    copying = FACTS["copying"]["random" if who == "playground" else "random_transformers"]
    print(f"{who}: copying random {m['copy_random']}, text {m['copy_text']}")
    assert m["copy_random"]["gap"] == pytest.approx(copying["gap"], abs=5e-3)


@needs_corpus
def test_the_named_induction_head_shows_on_lines_said_twice(measured):
    """What a teacher shows (issue 34): on held-out lines each said twice, the named induction head puts
    at least half its attention on the token after the earlier occurrence, more than any other head,
    and zeroing it costs the second copy at least half a nat per token."""
    who, m = measured
    stated = FACTS["heads"]["induction"]
    got = m["lines_twice"]  # all_metrics ablates the induction head it names, checked against facts.json below
    assert (got["ablation"]["layer"], got["ablation"]["head"]) == (stated["layer"], stated["head"])
    facts = FACTS["lines_twice"] if who == "playground" else FACTS["lines_twice"]["transformers"]
    named = got["attention"][stated["layer"]][stated["head"]]
    print(f"{who}: lines said twice: L{stated['layer']}H{stated['head']} {named:.3f}, ablation {got['ablation']}")
    assert (got["best"]["layer"], got["best"]["head"]) == (stated["layer"], stated["head"])
    assert named >= TARGETS["lines_induction_min"] == 0.5
    assert got["ablation"]["gain"] >= TARGETS["lines_ablation_gain_min"] == 0.5
    assert named == pytest.approx(facts["attention"][stated["layer"]][stated["head"]], abs=2e-3)
    assert got["ablation"]["gain"] == pytest.approx(facts["ablation"]["gain"], abs=5e-3)
    others = [
        a
        for layer, row in enumerate(got["attention"])
        for h, a in enumerate(row)
        if (layer, h) != (stated["layer"], stated["head"])
    ]
    assert max(others) < named


TARGET_CHECKS = {  # target -> (its name in facts.json's targets_short, measured value, comparison, bound)
    "held_out_loss": ("held-out loss", lambda m: m["val_loss"], "<=", "val_loss_max"),
    "previous_token_head": ("previous-token head", lambda m: m["prev_token"]["score"], ">=", "previous_token_min"),
    "induction_head": ("induction head", lambda m: m["induction"]["score"], ">=", "induction_min"),
    "copying_gap": ("copying gap", lambda m: m["copy_random"]["gap"], ">=", "copy_gap_random_min"),
    "first_token_sink": ("first-token sink", lambda m: m["first_token"]["score"], ">=", "first_token_min"),
}


def _stated_short(name: str) -> bool:
    return any(line.startswith(name + " ") for line in FACTS.get("targets_short", []))


@needs_corpus
@pytest.mark.parametrize(
    "target",
    [
        pytest.param(
            t,
            marks=pytest.mark.xfail(
                _stated_short(TARGET_CHECKS[t][0]),
                strict=True,
                reason="facts.json says the shipped model misses this target (docs/bundled-model.md)",
            ),
        )
        for t in TARGET_CHECKS
    ],
)
def test_meets_the_teaching_target(measured, target):
    """Each of the issue's targets, measured here: a target facts.json says is met must hold, and one it
    says is missed must still be missed (strict), so facts.json cannot drift from the file either way."""
    who, m = measured
    _, value_of, op, bound_key = TARGET_CHECKS[target]
    value, bound = value_of(m), TARGETS[bound_key]
    print(f"{who}: {target} {value:.3f} (target {op} {bound})")
    assert value <= bound if op == "<=" else value >= bound


def test_the_generate_tabs_head_examples_show_their_pattern(model):
    """The Generate tab offers a head only where it meets its target, and each example's prompt shows
    its head's pattern: the induction example (two lines said twice) makes that head look from each
    repeated token to the token after its first occurrence far more than an even spread would."""
    from playground.ui.attention_view import HEAD_PATTERNS, head_examples

    examples, labels = head_examples("heatmap")
    offered = {name for name in HEAD_PATTERNS for ex in examples if ex[0] == HEAD_PATTERNS[name][1]}
    met = {n for n, h in FACTS["heads"].items() if h["score"] >= TARGETS[f"{n}_min"]}
    assert offered == met and "induction" in offered
    assert len(labels) == len(examples)
    layer, head = FACTS["heads"]["induction"]["layer"], FACTS["heads"]["induction"]["head"]
    ids = load_tokenizer().encode(HEAD_PATTERNS["induction"][1])
    with torch.no_grad():
        _, trace = model(torch.tensor([ids]), return_attention=True)
    a = trace.layer(layer)[0, head]
    pairs = [(q, j + 1) for q in range(len(ids)) for j in range(q - 1) if ids[j] == ids[q] and ids[j + 1] != ids[q]]
    on_pattern = sum(float(a[q, k]) for q, k in pairs) / len(pairs)
    even = sum(1 / (q + 1) for q, _ in pairs) / len(pairs)
    print(f"induction example: L{layer}H{head} puts {on_pattern:.2f} on the pattern (even spread {even:.3f})")
    assert len(pairs) >= 20 and on_pattern > 5 * even
    # The previous-token and sink examples, when offered: their head looks where its label says on the
    # example's own prompt (queries from position 4 on, where an even spread is at most 0.2).
    where = {"previous_token": lambda a, q: float(a[q, q - 1]), "first_token": lambda a, q: float(a[q, 0])}
    for name in offered & set(where):
        layer, head = FACTS["heads"][name]["layer"], FACTS["heads"][name]["head"]
        ids = load_tokenizer().encode(HEAD_PATTERNS[name][1])
        with torch.no_grad():
            _, trace = model(torch.tensor([ids]), return_attention=True)
        a = trace.layer(layer)[0, head]
        share = sum(where[name](a, q) for q in range(4, len(ids))) / (len(ids) - 4)
        print(f"{name} example: L{layer}H{head} puts {share:.2f} where its pattern says")
        assert len(ids) >= 12 and share >= TARGETS[f"{name}_min"]
