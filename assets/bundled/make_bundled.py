"""How assets/bundled/shakespeare.safetensors and facts.json were made, and how to make them again.

1. Train (about 25-40 minutes on one CPU thread):

    nice python -m playground.training \\
        --config '{"context_length": 256, "emb_dim": 64, "n_heads": 4, "n_layers": 6}' \\
        --data ../shared/data/tinyshakespeare.txt --steps 1200 --batch-size 4 --lr 3e-3 --min-lr 3e-4 \\
        --warmup-steps 100 --eval-interval 100 --eval-batches 4 --seed 1337 --threads 1 \\
        --save-every 200 --out runs/bundled

2. Export in float16 and measure everything the README states:

    python assets/bundled/make_bundled.py runs/bundled/model.safetensors

Every figure in facts.json is measured here on the held-out last tenth of Tiny Shakespeare, on the
exported float16 file loaded the way the app loads it.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from playground.engine.model import GPTModel  # noqa: E402
from playground.engine.sampling import generate  # noqa: E402
from playground.engine.tokenizer import load_tokenizer  # noqa: E402
from playground.engine.weights import load_checkpoint, save_checkpoint  # noqa: E402
from playground.training.corpus import load_tiny_shakespeare, prepare_corpus  # noqa: E402
from playground.training.losses import evaluate_loss, random_init_loss, unigram_loss  # noqa: E402

OUT = Path(__file__).resolve().parent
CHECKPOINT = OUT / "shakespeare.safetensors"
FACTS = OUT / "facts.json"

# The fixed subset tests/test_bundled_model.py evaluates: 64 evenly spaced windows of 128 tokens.
TEST_WINDOWS, TEST_BLOCK = 64, 128
# Attention statistics: evenly spaced held-out windows, queries from this position on (the first
# few queries have so few keys to choose from that every head "attends to the previous token").
HEAD_WINDOWS, HEAD_BLOCK, HEAD_MIN_QUERY = 32, 128, 8
LINE_BREAK_IDS = [198, 628]  # "\n" and "\n\n" in the GPT-2 BPE
CLEAR_RATIO = 2.0  # a head "has" a pattern when it attends there at least twice as much as an even spread


# ----------------------------------------------------------------------------------------------
# Measuring


def attention_windows(val_ids: torch.Tensor) -> torch.Tensor:
    starts = torch.linspace(0, len(val_ids) - HEAD_BLOCK - 1, HEAD_WINDOWS).round().long()
    return val_ids[starts[:, None] + torch.arange(HEAD_BLOCK)]  # (W, T)


def pattern_masks(windows: torch.Tensor) -> dict[str, torch.Tensor]:
    """For each pattern, which keys it consists of: (W, Q, T) booleans for queries HEAD_MIN_QUERY..T-1."""
    W, T = windows.shape
    q = torch.arange(HEAD_MIN_QUERY, T)
    eye = torch.eye(T, dtype=torch.bool)
    line_breaks = torch.isin(windows, torch.tensor(LINE_BREAK_IDS))
    return {
        "previous_token": eye[q - 1].expand(W, -1, -1),
        "first_token": eye[torch.zeros_like(q)].expand(W, -1, -1),
        "line_break": line_breaks[:, None, :].expand(W, len(q), T),
        "duplicate_token": (windows[:, None, :] == windows[:, q, None]) & ~eye[q],  # earlier copies of the query
    }


def head_scores(model: GPTModel, val_ids: torch.Tensor) -> dict[str, dict]:
    """For each pattern: ``score`` (n_layers, n_heads), the mean attention mass a head puts on the
    pattern's keys, and ``base_rate``, the mass a head spreading attention evenly would put there."""
    windows = attention_windows(val_ids)
    T = windows.size(1)
    q = torch.arange(HEAD_MIN_QUERY, T)
    visible = torch.ones(T, T, dtype=torch.bool).tril()[q]  # (Q, T) keys each query can see
    with torch.no_grad():
        _, trace = model(windows, return_attention=True)
    probs = [trace.layer(i)[:, :, q] for i in range(trace.n_layers)]  # each (W, H, Q, T)
    out = {}
    for name, mask in pattern_masks(windows).items():
        mask = mask & visible
        base = float((mask.sum(-1) / visible.sum(-1)).mean())
        score = torch.stack([(p * mask[:, None]).sum(-1).mean(dim=(0, 2)) for p in probs])  # (L, H)
        out[name] = {"score": score, "base_rate": base}
    return out


def best_head(pattern: dict) -> dict:
    scores = pattern["score"]
    layer, head = divmod(int(scores.argmax()), scores.size(1))
    score = float(scores[layer, head])
    return {
        "layer": layer,
        "head": head,
        "score": round(score, 4),
        "base_rate": round(pattern["base_rate"], 4),
        "ratio": round(score / pattern["base_rate"], 2),
    }


def _wall_clock(stdout: Path) -> float | None:
    """Seconds since start on the last progress line the training command printed ("... | 1,555 s")."""
    if not stdout.is_file():
        return None
    seconds = re.findall(r"\| ([\d,]+) s$", stdout.read_text(), flags=re.M)
    return float(seconds[-1].replace(",", "")) if seconds else None


def main(trained_path: str) -> None:
    torch.manual_seed(0)
    trained_path = Path(trained_path)
    trained = load_checkpoint(trained_path, max_bytes=None)
    meta = trained.checkpoint_metadata
    train_config = json.loads(meta["train_config"])
    cfg = trained.cfg
    save_checkpoint(
        trained,
        CHECKPOINT,
        dtype="float16",
        metadata={
            "name": "Tiny Shakespeare (bundled)",
            "corpus": "Tiny Shakespeare, first 90% of the GPT-2 tokens",
            "tokenizer": "gpt2",
            "step": int(meta["step"]),
            "tokens_seen": int(meta["tokens_seen"]),
            "train_config": train_config,
        },
    )
    loads = []
    for _ in range(7):
        t0 = time.perf_counter()
        model = load_checkpoint(CHECKPOINT)
        loads.append(time.perf_counter() - t0)

    corpus = prepare_corpus(load_tiny_shakespeare(download=False), cfg.context_length, name="Tiny Shakespeare")
    val = corpus.val_ids
    full = dict(n_windows=None, block_size=cfg.context_length)
    subset = dict(n_windows=TEST_WINDOWS, block_size=TEST_BLOCK)
    val_full = evaluate_loss(model, val, **full)
    val_subset = evaluate_loss(model, val, **subset)
    val_full_fp32 = evaluate_loss(trained, val, **full)
    rand_full = random_init_loss(cfg, val, seed=0, **full)
    rand_subset = random_init_loss(cfg, val, seed=0, **subset)
    uni = unigram_loss(corpus.train_ids, val)
    train_subset = evaluate_loss(model, corpus.train_ids, **subset)

    scores = head_scores(model, val)
    best = {name: best_head(pattern) for name, pattern in scores.items()}
    clear = {name: found for name, found in best.items() if found["ratio"] >= CLEAR_RATIO}

    tok = load_tokenizer()
    prompt = "ROMEO:\n"
    sample = generate(model, tok.encode(prompt), max_new_tokens=60, temperature=0.8, top_k=40, seed=0)
    sample_text = prompt + tok.decode([s.token_id for s in sample])

    # Margins the test asserts: three quarters of each measured gap on the test subset, rounded
    # down to 0.1 nat, so float noise or a different BLAS cannot flip the test.
    gap_random, gap_unigram = rand_subset - val_subset, uni - val_subset
    margins = {
        "vs_random_init": math.floor(0.75 * gap_random * 10) / 10,
        "vs_unigram": math.floor(0.75 * gap_unigram * 10) / 10,
    }
    history = json.loads(meta.get("val_history", "[]"))
    facts = {
        "checkpoint": CHECKPOINT.name,
        "config": cfg.to_dict(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_config": train_config,
        "steps": int(meta["step"]),
        "tokens_seen": int(meta["tokens_seen"]),
        "epochs": round(int(meta["tokens_seen"]) / len(corpus.train_ids), 2),
        "train_wall_time_s": float(meta["elapsed_s"]),  # time inside Trainer.step, summed
        "train_wall_clock_s": _wall_clock(trained_path.parent / "stdout.txt"),  # incl. evaluations, start-up
        "threads": 1,
        "corpus": {
            "name": "Tiny Shakespeare",
            "tokens": corpus.n_tokens,
            "train_tokens": len(corpus.train_ids),
            "val_tokens": len(val),
        },
        "storage_dtype": "float16",
        "bytes_on_disk": CHECKPOINT.stat().st_size,
        "load_time_s": {"median": round(statistics.median(loads), 4), "max": round(max(loads), 4)},
        "val_loss": {
            "trained": round(val_full, 4),
            "trained_float32_before_export": round(val_full_fp32, 4),
            "random_init": round(rand_full, 4),
            "unigram": round(uni, 4),
            "ln_vocab": round(math.log(cfg.vocab_size), 4),
            "how": f"mean cross-entropy in nats over all {len(val) // cfg.context_length} non-overlapping "
            f"{cfg.context_length}-token windows of the held-out tenth; unigram over all its tokens "
            f"(add-one smoothed counts of the training tokens); random init = same config, seed 0",
        },
        "test_subset": {
            "windows": TEST_WINDOWS,
            "block_size": TEST_BLOCK,
            "trained": round(val_subset, 4),
            "random_init": round(rand_subset, 4),
            "train_split_trained": round(train_subset, 4),
        },
        "test_margins": margins,
        "val_history": history,
        "attention_heads": clear,
        "attention_best_per_pattern": best,
        "attention_heads_how": f"score = mean attention mass on the pattern's keys over queries "
        f"{HEAD_MIN_QUERY}..{HEAD_BLOCK - 1} of {HEAD_WINDOWS} evenly spaced "
        f"{HEAD_BLOCK}-token held-out windows; base_rate = the mass a head spreading "
        f"attention evenly over the visible keys would give them; a head is listed in "
        f"attention_heads when score / base_rate >= {CLEAR_RATIO}; line breaks are "
        f"token ids {LINE_BREAK_IDS}",
        "head_scores": {
            k: {
                "base_rate": round(v["base_rate"], 4),
                "score": [[round(float(x), 3) for x in row] for row in v["score"]],
            }
            for k, v in scores.items()
        },
        "sample": {"prompt": prompt, "temperature": 0.8, "top_k": 40, "seed": 0, "text": sample_text},
    }
    FACTS.write_text(json.dumps(facts, indent=2) + "\n")
    print(
        json.dumps(
            {
                k: facts[k]
                for k in (
                    "bytes_on_disk",
                    "load_time_s",
                    "val_loss",
                    "test_subset",
                    "test_margins",
                    "attention_best_per_pattern",
                )
            },
            indent=2,
        )
    )
    print(sample_text)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "runs" / "bundled" / "model.safetensors"))
