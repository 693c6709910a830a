"""A question on the teacher's view (server.view_questions): the answer is the head the run's own attention names.

On GPT-2-layout weights the answer of each question on each layer is the argmax of head_stats /
induction_scores computed independently, from transformers' own attention maps of the same tokens; a crafted
run whose layer 1 head 2 looks at the previous token (and another whose head 3 is an induction head) is
answered with that head; ties, a run without repeats and bad input are refused with a message."""

import numpy as np
import pytest
import torch

from playground.engine.head_patterns import head_stats, induction_scores
from playground.errors import UserError
from playground.server import attention_views, view_questions
from playground.server.recipes import random_recipe
from playground.server.runs import start_run

PROMPT = "The cat sat on the mat. The cat sat on the mat. The dog"
METRIC = {"previous-token": "previous-token", "first-token": "first-token"}


def a_run(model, prompt=PROMPT, new=6):
    from playground import PRESETS

    run, gen = start_run(
        model,
        random_recipe(PRESETS["nano"]),
        prompt,
        max_new_tokens=new,
        temperature=1.0,
        top_k=None,
        top_p=None,
        seed=2,
    )
    run.steps.extend(gen)
    return run


@pytest.fixture(scope="module")
def gpt2_layout(tmp_path_factory):
    """(our model, transformers' model) of the same random GPT-2-layout weights."""
    transformers = pytest.importorskip("transformers")
    from playground.engine.hf_hub import load_pretrained

    torch.manual_seed(11)
    cfg = transformers.GPT2Config(
        n_embd=64, n_layer=3, n_head=4, n_positions=64, initializer_range=0.2, attn_implementation="eager"
    )
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    folder = tmp_path_factory.mktemp("gpt2-layout")
    hf.save_pretrained(folder)
    return load_pretrained(folder, device="cpu"), hf


def test_each_answer_is_the_argmax_of_the_heads_scores_from_transformers_attention(gpt2_layout):
    ours, hf = gpt2_layout
    run = a_run(ours)
    ids = run.token_ids
    assert len(ids) <= 64  # one context window: the run's whole
    with torch.no_grad():
        maps = [a[0].numpy() for a in hf(torch.tensor([ids]), output_attentions=True).attentions]  # (H, T, T) each
    independent = {**{k: head_stats(maps)[m] for k, m in METRIC.items()}, "induction": induction_scores(maps, ids)}
    answered = refused = 0
    for kind, scores in independent.items():
        for layer in range(len(maps)):
            row = scores[layer]
            top2 = np.sort(row)[::-1][:2]
            if top2[0] - top2[1] < view_questions.TIE_MARGIN - 1e-5:
                with pytest.raises(UserError) as e:
                    view_questions.ask(ours, run, kind, layer)
                assert e.value.key == "view_question.tie"
                refused += 1
                continue
            if top2[0] - top2[1] <= view_questions.TIE_MARGIN + 1e-5:
                continue  # (on the margin itself: float32 maps may fall either side)
            asked = view_questions.ask(ours, run, kind, layer)
            assert asked.head == int(np.argmax(row)), (kind, layer, row, asked.scores)
            assert asked.answer == f"h{asked.head}" and asked.choices == [f"h{h}" for h in range(4)]
            np.testing.assert_allclose(asked.scores, row, rtol=1e-4, atol=1e-5)
            answered += 1
    assert answered >= 6, (answered, refused)


def crafted(monkeypatch, model, run, make):
    """``run``'s attention replaced by ``make(T)``'s hand-built (H, T, T) maps for every layer."""
    w = attention_views.window(model, run)
    T = len(w.ids)
    maps = make(T)
    monkeypatch.setattr(attention_views, "layer_attention", lambda qk, i: maps)
    return T


def causal_uniform(H, T):
    a = np.tril(np.ones((H, T, T)))
    return a / a.sum(-1, keepdims=True)


def test_a_crafted_previous_token_head_is_the_answer_and_identical_heads_are_a_tie(gpt2_layout, monkeypatch):
    ours, _ = gpt2_layout
    run = a_run(ours)

    def previous_at_head_2(T):
        a = causal_uniform(4, T)
        a[2] = 0
        a[2, 0, 0] = 1
        a[2, np.arange(1, T), np.arange(T - 1)] = 1  # head 2: every query on the token before it
        return a

    crafted(monkeypatch, ours, run, previous_at_head_2)
    asked = view_questions.ask(ours, run, "previous-token", 1)
    assert asked.head == 2 and asked.answer == "h2" and asked.scores[2] == 1.0
    # the first-token question on the same maps: head 2 never looks at token 0 past the first query; the three
    # uniform heads share the top exactly: no one answer
    with pytest.raises(UserError) as e:
        view_questions.ask(ours, run, "first-token", 1)
    assert e.value.key == "view_question.tie" and "no one answer" in str(e.value)


def test_a_crafted_induction_head_is_the_answer_and_a_run_without_repeats_is_refused(gpt2_layout, monkeypatch):
    ours, _ = gpt2_layout
    run = a_run(ours)
    w = attention_views.window(ours, run)
    from playground.engine.head_patterns import prefix_matches

    m = prefix_matches(w.ids)

    def induction_at_head_3(T):
        a = causal_uniform(4, T)
        rows = m.any(1)
        a[3, rows] = m[rows] / m[rows].sum(-1, keepdims=True)  # head 3: where the last occurrence led
        return a

    crafted(monkeypatch, ours, run, induction_at_head_3)
    asked = view_questions.ask(ours, run, "induction", 0)
    assert asked.head == 3 and asked.repeating == int(m.any(1).sum()) > 0
    monkeypatch.undo()

    plain = a_run(ours, "Abc", new=1)  # two tokens, neither repeated
    ids = attention_views.window(ours, plain).ids
    assert len(set(ids)) == len(ids)
    with pytest.raises(UserError) as e:
        view_questions.ask(ours, plain, "induction", 0)
    assert e.value.key == "view_question.no_repeat"


def test_bad_questions_are_refused_by_name(gpt2_layout):
    ours, _ = gpt2_layout
    run = a_run(ours, new=2)
    for kind, layer, key in [
        ("nonsense", 0, "view_question.bad_kind"),
        ("previous-token", 3, None),  # past the last layer
        ("previous-token", "x", None),
        ("previous-token", -1, None),
    ]:
        with pytest.raises(UserError) as e:
            view_questions.ask(ours, run, kind, layer)
        assert key is None or e.value.key == key
        assert "Layer" in str(e.value) or key
    with pytest.raises(UserError) as e:
        view_questions.ask(ours, None, "previous-token", 0)
    assert e.value.key == "view_question.no_run"


def test_a_layer_with_more_heads_than_a_vote_takes_is_refused_with_the_counts():
    from playground.engine.config import GPTConfig
    from playground.engine.model import GPTModel
    from playground.server.room_checks import MAX_CHOICES

    n = MAX_CHOICES + 1
    model = GPTModel(GPTConfig(context_length=16, emb_dim=n * 2, n_heads=n, n_layers=1)).eval()
    with pytest.raises(UserError) as e:
        view_questions.ask(model, a_run(model, prompt="ab ab", new=2), "previous-token", 0)
    assert e.value.key == "view_question.too_many_heads"
    assert f"{n} heads" in str(e.value) and f"at most {MAX_CHOICES}" in str(e.value)
