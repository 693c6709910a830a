"""Each lesson question's answer recomputed by another route through the library (a plain module,
no gradio), so the unit and browser tests check a lesson against the library's own figures."""

import math
from dataclasses import replace

import torch

from playground.engine.presets import PRESETS
from playground.engine.sizes import count_parameters_analytic
from playground.engine.tokenizer import load_tokenizer
from playground.inside.attention_maths import attention_maths
from playground.inside.effects import token_losses
from playground.inside.inspection import count_parameters, parameter_breakdown
from playground.inside.interventions import Intervention, run_with_hooks
from playground.inside.lenses import lens_cell
from playground.inside.patching import check_pair
from playground.inside.patching_paths import path_patching
from playground.inside.scoring import score_ids


def _row(model, ids, layer, head, t):
    return attention_maths(model, ids, layer, head, t)["softmax"]


def _head(question):
    return tuple(int(x) for x in question.fields["head"].split("."))


def _previous_token_head(model, ids):
    T = len(ids)
    mass = {
        (layer, h): sum(_row(model, ids, layer, h, t)[t - 1] for t in range(1, T))
        for layer in range(model.cfg.n_layers)
        for h in range(model.cfg.n_heads)
    }
    return max(mass, key=mass.get)


def _induction_place(model, ids):
    """Where the head with the highest prefix-matching score looks from the repeat of the prompt's
    first tokens (at most 24, as the lesson says them twice), by attention_maths' rows."""
    n = min(len(ids), 24, model.cfg.context_length // 2)
    twice = list(ids[:n]) * 2
    queries = range(n + 1, 2 * n)
    heads = [(layer, h) for layer in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
    rows = {lh: {q: _row(model, twice, *lh, q) for q in queries} for lh in heads}
    score = {lh: sum(r[q][q - n + 1] for q in queries) for lh, r in rows.items()}
    best = rows[max(score, key=score.get)]
    places = {"prev": lambda q: q - 1, "copy": lambda q: q - n, "after": lambda q: q - n + 1, "first": lambda q: 0}
    mass = {name: sum(best[q][at(q)] for q in queries) for name, at in places.items()}
    return max(mass, key=mass.get)


def _path_key_share(model, question):
    """The lesson's pair as the Inside tab reads it (its texts, tokenized again), measured by the
    path-patching grid's own route: the sender's output into the receiver's key alone."""
    tok = load_tokenizer()
    patch = question.target["patch"]
    clean, corrupted = tok.encode(patch["clean"]), tok.encode(patch["corrupted"])
    answer, wrong = (tok.encode(patch[key].replace("\\n", "\n")) for key in ("answer", "wrong"))
    assert len(answer) == len(wrong) == 1, patch
    pair = check_pair(model, clean, corrupted, answer[0], wrong[0])
    sender, receiver = (tuple(int(x) for x in patch[name].split(".")) for name in ("sender", "receiver"))
    return path_patching(model, pair, sender, receiver, "k")["value"]


def _mean_loss(model, ids):
    return float(score_ids(model, ids).surprisal_bits.mean()) * math.log(2)


def _recorded_answer(kind: str) -> str:
    """The lesson on heads forming reads the recorded run's file: its answers recomputed from the file's
    own lists with plain loops (tests/integration/test_heads_timeline.py checks the file against a new run)."""
    import json

    from playground.training.induction_run import TIMELINE

    tl = json.loads(TIMELINE.read_text(encoding="utf-8"))["timeline"]
    last = tl["induction"][-1]
    cells = [(last[layer][h], layer, h) for layer in range(len(last)) for h in range(len(last[layer]))]
    _, layer, head = max(cells)
    if kind == "induction_layer":
        return str(layer)
    if kind == "phase_step":
        series = [scores[layer][head] for scores in tl["induction"]]
        rises = [(b - a, i + 1) for i, (a, b) in enumerate(zip(series, series[1:]))]
        return str(tl["steps"][max(rises)[1]])
    return "below" if tl["late_loss"][-1] < tl["early_loss"][-1] else "above"


def library_answer(step, model, prompt: str, question) -> str:
    """The answer id of ``step``'s question on ``model`` and ``prompt`` (``question``: what the lesson
    asked, for the head or layer it chose to ask about)."""
    tok = load_tokenizer()
    ids = tok.encode(prompt)
    T = len(ids)
    parts = {r.component: r.measured for r in parameter_breakdown(model).rows}
    kind = step.question
    if kind in ("induction_layer", "phase_step", "repeat_loss"):
        return _recorded_answer(kind)
    if kind == "token_count":
        return str(T)
    if kind == "word_pieces":
        return str(len(tok.encode(step.params["word"])))
    if kind == "embedding_width":
        return str(model.cfg.emb_dim)
    if kind == "embedding_params":
        return f"{parts['token embedding']:,}"
    if kind == "attends_most":
        row = _row(model, ids, *_head(question), T - 1)
        return str(max(range(T - 1), key=lambda j: row[j]))
    if kind == "sink_head":
        heads = [(layer, h) for layer in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
        first = {lh: sum(_row(model, ids, *lh, t)[0] for t in range(1, T)) for lh in heads}
        return "{}.{}".format(*max(first, key=first.get))
    if kind == "induction_looks":
        return _induction_place(model, ids)
    if kind == "path_patching_key":
        share = _path_key_share(model, question)
        return ("0-25", "25-50", "50-75", "75-100")[min(3, max(0, int(share * 4)))]
    if kind == "previous_head":
        return str(_previous_token_head(model, ids)[1])
    if kind == "head_ablation":
        best = _previous_token_head(model, ids)
        plain = token_losses(run_with_hooks(model, ids, capture=False)[0], ids)
        ablated = token_losses(run_with_hooks(model, ids, Intervention(zero_heads=(best,)), capture=False)[0], ids)
        return "rise" if sum(ablated) > sum(plain) else "fall"
    if kind == "ffn_width":
        return f"{model.trf_blocks[0].ff.layers[0].out_features:,}"
    if kind == "ffn_vs_attention":
        attention = parts["attention QKV"] + parts["attention output"]
        return "feed-forward" if parts["feed-forward"] > attention else "attention"
    if kind == "param_count":
        return f"{count_parameters(model):,}"
    if kind == "untied_count":
        cfg = PRESETS[step.params["preset"]] if step.params.get("preset") else model.cfg
        return f"{count_parameters_analytic(replace(cfg, tie_weights=False)):,}"
    if kind in ("gqa_saving", "kv_cache_saving"):  # measured on models built on the meta device
        from playground.engine.kv_cache import KVCache
        from playground.engine.model import GPTModel
        from playground.engine.presets import get_preset

        cfg = get_preset(step.params["preset"])
        if kind == "kv_cache_saving":
            cache = KVCache(cfg.replace(context_length=4), 1, "meta", torch.bfloat16)
            return f"{cache.nbytes() // 4:,}"
        with torch.device("meta"):
            with_gqa, without = GPTModel(cfg), GPTModel(cfg.replace(n_kv_heads=0))
        return f"{count_parameters(without) - count_parameters(with_gqa):,}"
    if kind == "lens_first_top":
        L = model.cfg.n_layers

        def top1(i, t):
            return lens_cell(model, ids, i, t, k=1)["top"][0][0]

        t = next((t for t in range(T - 1, -1, -1) if top1(L, t) != ids[t]), T - 1)
        return str(next(i for i in range(L + 1) if top1(i, t) == top1(L, t)))
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=model.device))[0, -1].float().cpu()
    temperature = float(step.params.get("temperature", 0.3))
    if kind == "next_token":
        return str(int(torch.softmax(logits / temperature, -1).argmax()))
    if kind == "top_prob_temperature":
        p1, pt = float(torch.softmax(logits, -1).max()), float(torch.softmax(logits / temperature, -1).max())
        return "same" if math.isclose(p1, pt, abs_tol=5e-4) else ("up" if pt > p1 else "down")
    if kind == "loss_vs_uniform":
        return "below" if _mean_loss(model, ids) < math.log(model.cfg.vocab_size) else "above"
    if kind == "prompt_loss":
        return f"{_mean_loss(model, ids):.1f}"
    raise AssertionError(f"no library figure for question type {kind!r}: add one here")
