"""The bundled model's teaching measurements: held-out loss, head scores and copying.

Shared by train_bundled.py (at every evaluation) and the export (on the final float16 file).

Only the package's top-level public names are used, and the attention maps are computed here from
``GPTModel(idx, return_attention=True)``'s trace (queries and keys per layer), so nothing depends on
where the package's internals live. Every function also takes transformers' ``GPT2LMHeadModel``
(loaded with ``attn_implementation="eager"``), measured through transformers' own forward: the
export measures the shipped file both ways.

Definitions (all on tokens of the GPT-2 BPE; the split is the one the app uses: the first
``len - round(0.1 * len)`` tokens of Tiny Shakespeare train, the rest is held out):

* ``val_loss``: mean cross-entropy (nats/token) over all non-overlapping ``context_length``-token
  windows of the held-out tenth (each window scored on its own, no BOS token prepended): the
  definition of the app's ``evaluate_loss(..., n_windows=None)`` and of facts.json's ``val_loss``.
* ``prev_token`` / ``first_token`` (attention sink): for each head, the mean attention mass a query
  puts on the key just before it / on position 0, over queries ``HEAD_MIN_QUERY`` .. T-1 of
  ``HEAD_WINDOWS`` evenly spaced held-out windows of ``HEAD_BLOCK`` tokens; the best head is reported.
  Queries before ``HEAD_MIN_QUERY`` are left out: with only a few keys to choose from, every head
  looks "previous-token" or "first-token" there.
* ``induction``: TransformerLens's induction score. A batch of ``INDUCTION_BATCH`` sequences, each
  ``<|endoftext|>`` followed by ``INDUCTION_LEN`` random tokens repeated twice; the tokens are drawn
  (without replacement within a sequence, fixed seed) from the ``FREQUENT_TOKENS`` most frequent
  training tokens. A head's score is the mean of its attention pattern's diagonal at offset
  ``1 - INDUCTION_LEN`` (from each token to the token after its earlier occurrence), as in the
  TransformerLens tutorial; the best head is reported.
* ``copy_gap_random``: on those same sequences, the mean loss on tokens 1..N-1 of the first copy minus
  that on tokens 1..N-1 of the second copy (token 0 of each copy cannot be predicted by copying).
* ``copy_gap_text``: the same with ``COPY_TEXT_WINDOWS`` held-out spans of ``COPY_TEXT_LEN`` real
  tokens, each repeated twice (no BOS).
* ``lines_twice``: what a teacher shows: ``LINES`` held-out lines of Tiny Shakespeare (whole lines of
  at least ``LINE_MIN_TOKENS`` tokens counting their newline, evenly spaced through the held-out
  tenth), each said twice (``line line``, no BOS) and run one at a time. ``attention[layer][head]``:
  the mean, over the lines, of the head's mean attention from each token of the second copy to the
  token after its earlier occurrence (key ``q - L + 1`` for a line of L tokens). ``ablation``: for the
  induction head (in ``all_metrics``: the best by TransformerLens's score), the mean loss on tokens
  1..L-1 of the second copy with that head's output zeroed (its slice of the output projection's input)
  minus the loss without, over all the lines' tokens.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

VAL_FRACTION = 0.1
EOT = 50256  # <|endoftext|>, GPT-2's only special token, used as BOS

HEAD_WINDOWS, HEAD_BLOCK, HEAD_MIN_QUERY = 32, 256, 8
FREQUENT_TOKENS = 2000
INDUCTION_BATCH, INDUCTION_LEN, INDUCTION_SEED = 32, 40, 0
COPY_TEXT_WINDOWS, COPY_TEXT_LEN = 32, 100
LINES, LINE_MIN_TOKENS, NEWLINE = 20, 8, 198


def split_ids(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The app's split (playground's corpus.split_ids, restated): first 90% train, last 10% held out."""
    n_train = len(ids) - int(round(len(ids) * VAL_FRACTION))
    return ids[:n_train].clone(), ids[n_train:].clone()


def load_split(text_path: str):
    from playground import load_tokenizer

    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    ids = torch.tensor(load_tokenizer().encode(text), dtype=torch.long)
    return split_ids(ids)


def frequent_tokens(train_ids: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n`` most frequent training tokens, most frequent first (ties by token id)."""
    counts = torch.bincount(train_ids, minlength=EOT + 1).double()
    order = torch.argsort(-counts * (EOT + 2) + torch.arange(len(counts)).double())  # stable tie-break by id
    return order[:n].clone()


# ----------------------------------------------------------------------------------------------
# Attention maps from the model's trace


def is_transformers(model) -> bool:
    """A transformers ``GPT2LMHeadModel`` (measured through its own forward) rather than ours."""
    return hasattr(model, "transformer")


def attention_maps(model, idx: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """logits (B, T, V) and each layer's attention probabilities (B, H, T, T), float32."""
    if is_transformers(model):
        out = model(idx, output_attentions=True)  # needs attn_implementation="eager"
        return out.logits, [a.float() for a in out.attentions]
    logits, trace = model(idx, return_attention=True)
    maps = []
    for q, k in zip(trace.queries, trace.keys):
        scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1))
        T = scores.size(-1)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        maps.append(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1))
    return logits, maps


def _best(score: torch.Tensor) -> dict:
    layer, head = divmod(int(score.argmax()), score.size(1))
    return {"score": round(float(score[layer, head]), 4), "layer": layer, "head": head}


# ----------------------------------------------------------------------------------------------
# The measurements


class hidden_states:
    """Within: ``model(x)`` returns the final hidden states (after the final LayerNorm) instead of
    logits: the output head is swapped for an identity and handed out as ``.head``. Losses are then
    computed a few rows at a time, so a batch's (rows x 50257) logits are never held whole."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.name = "lm_head" if is_transformers(self.model) else "out_head"
        self.head = getattr(self.model, self.name)
        setattr(self.model, self.name, torch.nn.Identity())
        return self

    def __exit__(self, *exc):
        setattr(self.model, self.name, self.head)


def _loss_sum(head, h: torch.Tensor, y: torch.Tensor, chunk: int = 128) -> tuple[float, int]:
    h, y = h.flatten(0, -2), y.flatten()
    total = 0.0
    for i in range(0, len(y), chunk):
        logits = head(h[i : i + chunk]).float()
        total += float(F.cross_entropy(logits, y[i : i + chunk], reduction="sum"))
    return total, len(y)


@torch.no_grad()
def window_loss(model, ids: torch.Tensor, starts: torch.Tensor, block: int, batch: int = 4) -> float:
    """Mean next-token loss over the (block + 1)-token windows of ``ids`` starting at ``starts``."""
    total, count = 0.0, 0
    with hidden_states(model) as hs:
        for chunk in starts.split(batch):
            w = ids[chunk[:, None] + torch.arange(block + 1)]
            h = model(w[:, :-1])
            t, c = _loss_sum(hs.head, h.logits if is_transformers(model) else h, w[:, 1:])
            total, count = total + t, count + c
    return total / count


def val_loss(model, val_ids: torch.Tensor, block: int) -> float:
    """The app's held-out loss (playground's losses.evaluate_loss with n_windows=None, restated):
    windows of block + 1 tokens starting every ``block`` tokens, all ``block`` positions scored."""
    return window_loss(model, val_ids, torch.arange(0, len(val_ids) - block, block), block)


def sampled_loss(model, ids: torch.Tensor, block: int, n_windows: int) -> float:
    """Mean loss on ``n_windows`` evenly spaced (block + 1)-token windows (for the training split)."""
    return window_loss(model, ids, torch.linspace(0, len(ids) - block - 1, n_windows).round().long(), block)


@torch.no_grad()
def head_patterns(model, val_ids: torch.Tensor, block: int = HEAD_BLOCK) -> dict:
    """Per head (n_layers, n_heads): mean attention on the previous token and on position 0."""
    starts = torch.linspace(0, len(val_ids) - block - 1, HEAD_WINDOWS).round().long()
    windows = val_ids[starts[:, None] + torch.arange(block)]
    q = torch.arange(HEAD_MIN_QUERY, block)
    prev, first = [], []
    for i in range(0, HEAD_WINDOWS, 8):
        with hidden_states(model):  # the maps only: no logits
            _, maps = attention_maps(model, windows[i : i + 8])
        prev.append(torch.stack([m[:, :, q, q - 1].sum(dim=(0, 2)) for m in maps]))  # (L, H)
        first.append(torch.stack([m[:, :, q, 0].sum(dim=(0, 2)) for m in maps]))
    n = HEAD_WINDOWS * len(q)
    prev, first = sum(prev) / n, sum(first) / n
    # what a head spreading attention evenly over the keys it can see would put there
    even = float((1.0 / (q + 1).double()).mean())
    return {"prev_token": prev, "first_token": first, "even_spread": even}


def induction_batch(train_ids: torch.Tensor) -> torch.Tensor:
    pool = frequent_tokens(train_ids, FREQUENT_TOKENS)
    gen = torch.Generator().manual_seed(INDUCTION_SEED)
    rows = [pool[torch.randperm(len(pool), generator=gen)[:INDUCTION_LEN]] for _ in range(INDUCTION_BATCH)]
    r = torch.stack(rows)
    bos = torch.full((INDUCTION_BATCH, 1), EOT, dtype=torch.long)
    return torch.cat([bos, r, r], dim=1)  # (B, 1 + 2N)


def _copy_gap(logits: torch.Tensor, idx: torch.Tensor, start: int, n: int) -> tuple[float, float]:
    """Mean loss on tokens 1..n-1 of the copy at [start, start+n) and of the copy at [start+n, start+2n)."""
    nll = torch.stack(
        [  # nll[:, j]: the loss of predicting token j + 1
            F.cross_entropy(row[:-1].float(), ids[1:], reduction="none") for row, ids in zip(logits, idx)
        ]
    )
    first = nll[:, start : start + n - 1].mean()  # targets start+1 .. start+n-1
    second = nll[:, start + n : start + 2 * n - 1].mean()  # targets start+n+1 .. start+2n-1
    return float(first), float(second)


@torch.no_grad()
def induction_and_copying(model, train_ids: torch.Tensor, val_ids: torch.Tensor, batch=None) -> dict:
    idx = induction_batch(train_ids) if batch is None else batch
    logits, maps = attention_maps(model, idx)
    N = INDUCTION_LEN
    score = torch.stack([m.diagonal(offset=1 - N, dim1=-2, dim2=-1).mean(dim=(0, 2)) for m in maps])  # (L, H)
    first, second = _copy_gap(logits, idx, 1, N)

    starts = torch.linspace(0, len(val_ids) - COPY_TEXT_LEN - 1, COPY_TEXT_WINDOWS).round().long()
    spans = val_ids[starts[:, None] + torch.arange(COPY_TEXT_LEN)]
    text = torch.cat([spans, spans], dim=1)
    text_logits = model(text).logits if is_transformers(model) else model(text)
    t_first, t_second = _copy_gap(text_logits, text, 0, COPY_TEXT_LEN)
    return {
        "induction": score,
        "copy_random": {"first": first, "second": second, "gap": first - second},
        "copy_text": {"first": t_first, "second": t_second, "gap": t_first - t_second},
    }


def said_twice_lines(val_ids: torch.Tensor) -> list[torch.Tensor]:
    """``LINES`` whole held-out lines, evenly spaced, each with its newline token."""
    ends = (val_ids == NEWLINE).nonzero().flatten()
    lines = [val_ids[s + 1 : e + 1] for s, e in zip(ends[:-1].tolist(), ends[1:].tolist())]
    lines = [line for line in lines if len(line) >= LINE_MIN_TOKENS]
    picks = torch.linspace(0, len(lines) - 1, LINES).round().long().tolist()
    return [lines[i] for i in picks]


class zeroed_head:
    """Within: one head's output is zeroed (its slice of the output projection's input), in our model
    or in transformers' GPT-2."""

    def __init__(self, model, layer: int, head: int):
        if is_transformers(model):
            attn = model.transformer.h[layer].attn
            self.proj, hd = attn.c_proj, attn.head_dim
        else:
            att = model.trf_blocks[layer].att
            self.proj, hd = att.out_proj, att.head_dim
        self.cols = slice(head * hd, (head + 1) * hd)

    def _zero(self, module, args):
        x = args[0].clone()
        x[..., self.cols] = 0
        return (x, *args[1:])

    def __enter__(self):
        self.handle = self.proj.register_forward_pre_hook(self._zero)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def _second_copy_loss(model, lines: list[torch.Tensor]) -> float:
    total, count = 0.0, 0
    for line in lines:
        L, idx = len(line), torch.cat([line, line])[None]
        logits = model(idx).logits if is_transformers(model) else model(idx)
        nll = F.cross_entropy(logits[0, L : 2 * L - 1].float(), idx[0, L + 1 :], reduction="sum")
        total, count = total + float(nll), count + L - 1
    return total / count


@torch.no_grad()
def lines_twice(model, val_ids: torch.Tensor, head: tuple[int, int] | None = None) -> dict:
    """The ``lines_twice`` measurement (module docstring); ``head`` is the one ablated (default: the
    best by attention)."""
    model.eval()
    lines = said_twice_lines(val_ids)
    per_line = []
    for line in lines:
        L, idx = len(line), torch.cat([line, line])[None]
        with hidden_states(model):
            _, maps = attention_maps(model, idx)
        q = torch.arange(L, 2 * L)
        per_line.append(torch.stack([m[0][:, q, q - L + 1].mean(dim=-1) for m in maps]))  # (layers, H)
    attention = torch.stack(per_line).mean(dim=0)
    best = _best(attention)
    layer, h = head if head is not None else (best["layer"], best["head"])
    loss = _second_copy_loss(model, lines)
    with zeroed_head(model, layer, h):
        ablated = _second_copy_loss(model, lines)
    return {
        "best": best,
        "attention": [[round(float(x), 3) for x in row] for row in attention],
        "second_copy_loss": round(loss, 4),
        "ablation": {"layer": layer, "head": h, "loss": round(ablated, 4), "gain": round(ablated - loss, 4)},
        "lines": len(lines),
    }


def all_metrics(model, train_ids, val_ids, block: int, *, train_windows: int = 32) -> dict:
    """Everything logged at an evaluation. ``model`` is put in eval mode (and left there)."""
    model.eval()
    heads = head_patterns(model, val_ids, min(block, HEAD_BLOCK))
    ind = induction_and_copying(model, train_ids, val_ids)
    named = _best(ind["induction"])  # the induction head (TransformerLens's score): the one ablated on lines
    lines = lines_twice(model, val_ids, head=(named["layer"], named["head"]))
    out = {
        "val_loss": round(val_loss(model, val_ids, block), 4),
        "train_loss": round(sampled_loss(model, train_ids, block, train_windows), 4),
        "prev_token": _best(heads["prev_token"]),
        "first_token": _best(heads["first_token"]),
        "even_spread": round(heads["even_spread"], 4),
        "induction": named,
        "copy_gap_random": round(ind["copy_random"]["gap"], 3),
        "copy_random": {k: round(v, 3) for k, v in ind["copy_random"].items()},
        "copy_gap_text": round(ind["copy_text"]["gap"], 3),
        "copy_text": {k: round(v, 3) for k, v in ind["copy_text"].items()},
        "lines_twice": lines,
        "per_head": {
            "prev_token": [[round(float(x), 3) for x in row] for row in heads["prev_token"]],
            "first_token": [[round(float(x), 3) for x in row] for row in heads["first_token"]],
            "induction": [[round(float(x), 3) for x in row] for row in ind["induction"]],
        },
    }
    return out
