"""Score a text under a model: how surprised it is by each token, and by the whole text.

For every token after the first (the first has nothing before it to be predicted from):

- surprisal, in bits: -log2 p(token | the tokens before it)
- its probability, its rank among the vocabulary (1 = the model's top guess) and that top guess

and for the text: the mean loss in nats per token (what training minimises), its perplexity
(e^loss) and bits per byte (total surprisal / UTF-8 bytes scored: comparable across tokenizers).

Texts longer than the model's context are scored in windows of ``context_length`` tokens that
move by ``stride`` (the "sliding window" evaluation): each token is scored exactly once, in the
first window where it has at least ``context_length - stride + 1`` tokens of left context (tokens
of the first window have fewer: all there are). A smaller stride gives more context and costs more
forwards.

Pure torch; the UI and the API call ``score_text`` / ``compare_scores``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from playground.engine.model import GPTModel
from playground.engine.readout import CHUNK_ROWS, HeadReader
from playground.engine.tokenizer import load_tokenizer
from playground.errors import UserError
from playground.runtime.memory import BUDGET
from playground.whole_numbers import exact_whole, read_number

MAX_SCORE_TOKENS = 16_384  # a longer text is cut here (and the cut is said)
MAX_SCORE_CHARS = 200_000  # read at most this much text before tokenising
LN2 = math.log(2.0)


class ScoringError(UserError):
    """A text that cannot be scored; the message is written for the user."""


@dataclass
class Scores:
    """Per-token figures (numpy arrays over the scored tokens, i.e. positions 1..n-1) and totals."""

    token_ids: list[int]  # every token of the text, the unscored first one included
    surprisal_bits: np.ndarray  # float64, one per scored token
    prob: np.ndarray
    rank: np.ndarray  # int64, 1 = the model's top guess
    top_id: np.ndarray  # int64, the model's top guess at that position
    context: np.ndarray  # int64, how many tokens of left context the token was scored with
    n_bytes: int  # UTF-8 bytes of the scored tokens
    window: int  # the model's context length
    stride: int
    n_windows: int
    truncated_from: int | None = None  # tokens in the text before the cap, when it was cut
    label: str = ""  # which model, for messages
    chars_read: tuple[int, int] | None = None  # (characters read, characters in the text), when it was cut

    @property
    def n_scored(self) -> int:
        return len(self.surprisal_bits)

    @property
    def total_bits(self) -> float:
        return float(self.surprisal_bits.sum())

    @property
    def loss_nats(self) -> float:
        """Mean cross-entropy in nats per token: the number a training loss curve shows."""
        return self.total_bits * LN2 / self.n_scored

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss_nats)

    @property
    def bits_per_byte(self) -> float:
        return self.total_bits / self.n_bytes if self.n_bytes else float("nan")

    def summary(self) -> dict:
        return {
            "model": self.label,
            "tokens": len(self.token_ids),
            "scored_tokens": self.n_scored,
            "loss_nats_per_token": self.loss_nats,
            "perplexity": self.perplexity,
            "bits_per_byte": self.bits_per_byte,
            "total_bits": self.total_bits,
            "bytes_scored": self.n_bytes,
            "window": self.window,
            "stride": self.stride,
            "windows": self.n_windows,
            "truncated_from_tokens": self.truncated_from,
        }

    def to_dict(self) -> dict:
        """Everything as JSON-able lists (for the API)."""
        tok = load_tokenizer()
        return {
            **self.summary(),
            "token_ids": self.token_ids,
            "tokens": [p.display for p in tok.pieces(self.token_ids)],
            "surprisal_bits": self.surprisal_bits.tolist(),
            "prob": self.prob.tolist(),
            "rank": self.rank.tolist(),
            "top_id": self.top_id.tolist(),
            "context": self.context.tolist(),
        }


def default_stride(context_length: int) -> int:
    """Half the window: every token after the first window sees at least half a window of context."""
    return max(1, context_length // 2)


def check_text(text) -> str:
    """Refuse what cannot be scored, with a message saying why (empty, or nothing but U+FFFD, the
    mark a decoder leaves for bytes it could not read)."""
    if not isinstance(text, str):
        raise ScoringError("score.text_not_str", "The text must be a string, got {kind}.", kind=type(text).__name__)
    if not text.strip():
        raise ScoringError("score.text_empty", "The text is empty: paste or upload some text to score.")
    if not text.replace("\ufffd", "").strip():
        raise ScoringError(
            "score.only_garbage",
            "The text is only undecodable bytes (every character is the replacement mark �): there is nothing "
            "real to score. Check the file's encoding.",
        )
    return text


def score_text(
    model: GPTModel,
    text: str,
    *,
    stride: int | None = None,
    max_tokens: int = MAX_SCORE_TOKENS,
    progress=None,
    label: str = "",
) -> Scores:
    """Tokenise ``text`` (GPT-2 BPE) and score it; see ``score_ids``."""
    check_text(text)
    chars_read = None
    if len(text) > MAX_SCORE_CHARS:
        chars_read = (MAX_SCORE_CHARS, len(text))
        text = text[:MAX_SCORE_CHARS]
    ids = load_tokenizer().encode(text)
    scores = score_ids(model, ids, stride=stride, max_tokens=max_tokens, progress=progress, label=label)
    scores.chars_read = chars_read
    return scores


@torch.no_grad()
def score_ids(
    model: GPTModel,
    ids,
    *,
    stride: int | None = None,
    max_tokens: int = MAX_SCORE_TOKENS,
    progress=None,
    label: str = "",
) -> Scores:
    """Score token ids under ``model``. ``progress(done, total)`` is called after each window with
    the number of tokens scored so far. Raises ScoringError for texts that cannot be scored."""
    ids = [int(i) for i in ids]
    cfg = model.cfg
    W = cfg.context_length
    stride = default_stride(W) if stride in (None, "", 0) else stride
    try:
        number = exact_whole(read_number(stride))  # "3" or 3.0 is 3; never rounded through a float
    except (TypeError, ValueError):
        number = None
    if number is None or not 1 <= number <= W:
        raise ScoringError(
            "score.stride_range",
            "The stride must be a whole number of tokens between 1 and the window ({window}), got {stride!r}.",
            window=W,
            stride=stride,
        )
    stride = number
    truncated_from = None
    if len(ids) > max_tokens:
        truncated_from, ids = len(ids), ids[:max_tokens]
    if len(ids) < 2:
        raise ScoringError(
            "score.single_token",
            "The text is a single token: the first token has nothing before it to be predicted from, so at "
            "least two tokens are needed.",
        )
    bad = next((i for i in ids if not 0 <= i < cfg.vocab_size), None)
    if bad is not None:
        raise ScoringError(
            "score.token_outside",
            "Token id {token_id} is outside this model's vocabulary (0..{last}): the text needs a model with "
            "the GPT-2 vocabulary (50,257 tokens).",
            token_id=bad,
            last=cfg.vocab_size - 1,
        )
    n = len(ids)
    with BUDGET.reserve(scoring_bytes(model, stride), f"scoring {n:,} tokens", "scoring"):
        out = _score_windows(model, ids, W, stride, progress)
    surprisal, prob, rank, top, context, n_windows = out
    tok = load_tokenizer()
    n_bytes = sum(len(tok.token_bytes(i)) for i in ids[1:])
    return Scores(ids, surprisal, prob, rank, top, context, n_bytes, W, stride, n_windows, truncated_from, label)


# Rows of logits reduced at once (playground.engine.readout): the product, the argmax, the log-sum-exp and
# the rank count read them from cache instead of from memory -- the reductions, not the head's
# product, were most of scoring's time when whole windows of logits went through them.
SCORE_ROWS = CHUNK_ROWS
# Windows run through the blocks together, up to this many tokens: one batched forward instead of
# many small ones (a small model's blocks are per-op overhead at batch 1).
GROUP_TOKENS = 2048


def _group_size(model: GPTModel) -> int:
    return max(1, min(8, GROUP_TOKENS // model.cfg.context_length))


def scoring_bytes(model: GPTModel, stride: int) -> int:
    """Peak extra memory: one group of windows' activations, their scored rows' hidden states, and
    the chunk buffers (float32 logits and a bool mask; twice, for a non-float32 head's own output)."""
    cfg = model.cfg
    g = _group_size(model)
    acts = g * (cfg.context_length * cfg.emb_dim * 4 * 8 + cfg.n_heads * cfg.context_length**2 * 4)
    return acts + g * cfg.context_length * cfg.emb_dim * 4 + 2 * SCORE_ROWS * cfg.vocab_size * 5


def _windows(n: int, W: int, stride: int):
    """(begin, first, end) per window: targets [first, end) are scored, target t with ids[begin:t]
    as its context. A window's input ids[begin:end-1] is at most W tokens long."""
    begin, first = 0, 1
    while True:
        end = min(begin + W, n - 1) + 1
        yield begin, first, end
        if end == n:
            return
        first, begin = end, begin + stride


def _groups(windows: list, size: int):
    """Consecutive windows with inputs of one length, at most ``size`` at a time (one batch each)."""
    group: list = []
    for w in windows:
        if group and (len(group) == size or w[2] - w[0] != group[0][2] - group[0][0]):
            yield group
            group = []
        group.append(w)
    if group:
        yield group


def _score_windows(model, ids, W, stride, progress):
    n = len(ids)
    ids_t = torch.tensor(ids, dtype=torch.long)
    windows = list(_windows(n, W, stride))
    reader = HeadReader(model, SCORE_ROWS)
    parts = []
    was_training = model.training
    model.eval()
    try:
        for group in _groups(windows, _group_size(model)):
            idx = torch.stack([ids_t[begin : end - 1] for begin, _, end in group]).to(model.device)  # (g, L)
            # Rows first-1 .. end-2 of a window predict its targets first .. end-1; rows before them
            # are context only and never reach the head.
            hidden = _final_hidden(model, idx)  # (g, L, d)
            rows = torch.cat([hidden[k, first - 1 - begin :] for k, (begin, first, _) in enumerate(group)])  # (r, d)
            targets = torch.cat([ids_t[first:end] for _, first, end in group]).to(rows.device)
            context = torch.cat([torch.arange(first, end) - begin for begin, first, end in group])
            del hidden
            parts.append(_row_figures(reader, rows, targets))
            parts.append(context)
            if progress is not None:
                progress(group[-1][2] - 1, n - 1)
    finally:
        model.train(was_training)
    figures = [p for p in parts if isinstance(p, tuple)]
    cols = [torch.cat([p[i] for p in figures]).cpu().numpy() for i in range(4)]
    context = torch.cat([p for p in parts if not isinstance(p, tuple)]).numpy()
    surprisal, prob, rank, top = cols
    return surprisal.astype(np.float64), prob.astype(np.float64), rank, top, context, len(windows)


def _final_hidden(model: GPTModel, idx: torch.Tensor) -> torch.Tensor:
    """final_norm(residual stream) of every row: the plain forward's steps up to the output head."""
    positions = torch.arange(idx.size(1), device=idx.device)
    x = model.drop_emb(model.tok_emb(idx) + model.pos_emb(positions).to(model.dtype))  # (B, T, d)
    for block in model.trf_blocks:
        x = block(x)
    return model.final_norm(x)


def _logits_of_rows(model: GPTModel, idx: torch.Tensor, start: int) -> torch.Tensor:
    """Float32 logits of rows ``start``.. of one window, as scoring computes them (the head applied
    to the scored rows only). tests/test_scoring.py holds this to ``model(idx)``."""
    return model.out_head(_final_hidden(model, idx)[0, start:]).float()


def _row_figures(reader: HeadReader, rows: torch.Tensor, targets: torch.Tensor):
    """(surprisal bits, probability, rank, top guess) of each target under its row."""
    f = reader(rows, targets, rank=True)
    return -f.target_logp / LN2, f.target_logp.exp(), f.rank, f.top_id


# ----------------------------------------------------------------------------------------------
# Two models on one text


@dataclass
class Comparison:
    a: Scores
    b: Scores

    @property
    def difference_bits(self) -> np.ndarray:
        """b's surprisal minus a's, per token: negative where b found the token easier."""
        return self.b.surprisal_bits - self.a.surprisal_bits

    def most_changed(self, n: int = 10) -> list[tuple[int, float]]:
        """(position in the text, difference) of the ``n`` tokens whose surprisal changed most."""
        d = self.difference_bits
        order = np.argsort(-np.abs(d), kind="stable")[:n]
        return [(int(i) + 1, float(d[i])) for i in order]

    def to_dict(self) -> dict:
        return {
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "difference_bits": self.difference_bits.tolist(),
            "loss_difference_nats": self.b.loss_nats - self.a.loss_nats,
            "bits_per_byte_difference": self.b.bits_per_byte - self.a.bits_per_byte,
        }


def compare_scores(a: Scores, b: Scores) -> Comparison:
    """Pair two scorings of the same tokens (the same text under two models)."""
    if a.token_ids != b.token_ids:
        raise ScoringError(
            "score.different_tokens",
            "The two scorings are of different token sequences; score the same text with both models.",
        )
    return Comparison(a, b)


def compare_models(
    model_a: GPTModel, model_b: GPTModel, text: str, *, stride: int | None = None, labels=("A", "B"), progress=None
) -> Comparison:
    """Score ``text`` under both models (each with its own window; ``stride`` None = half of each)."""
    a = score_text(
        model_a,
        text,
        stride=stride and min(stride, model_a.cfg.context_length),
        label=labels[0],
        progress=progress and (lambda d, t: progress(d, 2 * t)),
    )
    b = score_text(
        model_b,
        text,
        stride=stride and min(stride, model_b.cfg.context_length),
        label=labels[1],
        progress=progress and (lambda d, t: progress(t + d, 2 * t)),
    )
    return compare_scores(a, b)


def decode_upload(data: bytes, *, replace: bool = False) -> str:
    """Bytes of an uploaded text file -> str. Not UTF-8: ScoringError that says where, unless
    ``replace`` (undecodable bytes become �, the replacement the error message offers)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark is not text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if replace:
            return data.decode("utf-8", errors="replace")
        bad = data[e.start : e.start + 4].hex(" ")
        raise ScoringError(
            "score.not_utf8",
            "This file is not UTF-8 text (byte {byte:,} is {bad!r}, which UTF-8 cannot read). Tick “replace "
            "undecodable bytes” to score it with � in their place, or save it as UTF-8.",
            byte=e.start,
            bad=bad,
        ) from None
