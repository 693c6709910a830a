"""Scoring speed (issue 13): the first 8 KB of Tiny Shakespeare under the bundled model, against the
usual evaluation loop measured in the same run (each window's full logits, then log_softmax: what the
Hugging Face perplexity recipe does), with the same windows and stride. Both losses are reported so
the speed is of the same answer."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from .timing import median

TEXT = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "tinyshakespeare.txt"
N_BYTES = 8192


def _text() -> str | None:
    if not TEXT.is_file():
        return None
    return TEXT.read_bytes()[:N_BYTES].decode("utf-8", errors="ignore")


@torch.no_grad()
def full_logits_loop(model, ids, stride) -> float:
    """The peer: every window's logits for all its rows, log_softmax, the new targets' losses (nats)."""
    W, n = model.cfg.context_length, len(ids)
    total, count, prev_end, begin = 0.0, 0, 1, 0
    x = torch.tensor(ids)
    while True:
        end = min(begin + W, n - 1) + 1
        logp = torch.log_softmax(model(x[begin : end - 1][None])[0].float(), -1)
        rows = torch.arange(prev_end, end) - 1 - begin
        total -= float(logp[rows, x[prev_end:end]].double().sum())
        count += end - prev_end
        if end == n:
            return total / count
        prev_end, begin = end, begin + stride


def measure(reps: int = 5) -> dict:
    from playground.engine.tokenizer import load_tokenizer
    from playground.inside.scoring import default_stride, score_ids
    from playground.server.recipes import BUNDLED_CHECKPOINT, build_from_recipe, bundled_recipe

    text = _text()
    if text is None or not BUNDLED_CHECKPOINT.is_file():
        return {"error": "Tiny Shakespeare (../shared/data) or the bundled model is missing"}
    model = build_from_recipe(bundled_recipe())
    ids = load_tokenizer().encode(text)
    stride = default_stride(model.cfg.context_length)
    ours, peer = [], []
    score_ids(model, ids)  # warm-up
    for _ in range(reps):  # interleaved, so load changes hit both alike
        t0 = time.perf_counter()
        s = score_ids(model, ids)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        peer_loss = full_logits_loop(model, ids, stride)
        peer.append(time.perf_counter() - t0)
    return {
        "bytes": N_BYTES,
        "tokens": len(ids),
        "window": s.window,
        "stride": s.stride,
        "windows": s.n_windows,
        "median_s": median(ours),
        "rounds_s": ours,
        "peer_median_s": median(peer),
        "peer_rounds_s": peer,
        "loss_nats": s.loss_nats,
        "peer_loss_nats": peer_loss,
        "bits_per_byte": s.bits_per_byte,
        "losses_agree": math.isclose(s.loss_nats, peer_loss, rel_tol=1e-4),
    }


def rows(r: dict) -> list[str]:
    if "median_s" not in r:
        return [f"scoring: {r.get('error')}"]
    return [
        f"Scoring {r['bytes']:,} bytes of Tiny Shakespeare ({r['tokens']:,} tokens, bundled model, window "
        f"{r['window']}, stride {r['stride']}, {r['windows']} windows): {r['median_s']:.3f} s median "
        f"(full-logits loop {r['peer_median_s']:.3f} s, ×{r['peer_median_s'] / r['median_s']:.2f}); "
        f"loss {r['loss_nats']:.4f} nats/token = {r['bits_per_byte']:.3f} bits/byte (peer {r['peer_loss_nats']:.4f})"
    ]
