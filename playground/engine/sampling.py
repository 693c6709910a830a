"""Sampling: temperature / top-k / top-p as pure functions on logits, and ``generate`` yielding steps.

Each stage is its own function so the UI can show how a distribution is reshaped knob by knob:
raw softmax -> after temperature -> after top-k -> after top-p.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import torch

from playground.engine import decoding
from playground.engine.decoding import Row, RowResult, SampledRow, last_row_probs
from playground.engine.generation_checks import checked_prompt, checked_settings
from playground.engine.model import GPTModel
from playground.engine.receipts import inverse_cdf_draw, slices
from playground.engine.row_summary import (
    NonFiniteError as NonFiniteError,  # raised by generation: importable from here as it always was
)
from playground.engine.row_summary import (
    check_logits,
    count_above,
    entropy_bits,
    first_argmax,
    greedy_step_fields,
)

STAGES = ("raw", "temperature", "top_k", "top_p")


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by T; T = 0 (greedy) leaves them as they are, the argmax is taken later.
    (T = 1 returns the same tensor: x / 1 is x, and later stages can then skip recomputing it.)
    The maximum is subtracted first (softmax does not change), so a tiny T sends every other logit
    to -inf instead of overflowing to inf - inf = NaN: the distribution tends to greedy, as it should."""
    if temperature > 0 and temperature != 1:
        return (logits - logits.max(dim=-1, keepdim=True).values) / temperature
    return logits


def apply_top_k(logits: torch.Tensor, top_k: int | None) -> torch.Tensor:
    """Keep the k largest logits (ties at the k-th value kept too), the rest -> -inf. 0/None = off."""
    if not top_k or top_k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, int(top_k), dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def apply_top_p(logits: torch.Tensor, top_p: float | None) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose mass reaches p.
    The most likely token always survives. None/1 = off."""
    if top_p is None or top_p >= 1.0:
        return logits
    if logits.dim() != 1:
        return torch.stack([apply_top_p(row, top_p) for row in logits.reshape(-1, logits.size(-1))]).view_as(logits)
    probs = torch.softmax(logits, dim=-1)
    n = logits.numel()
    # The most likely tokens in order, only as many as it takes: sorting a whole 50,257-token
    # vocabulary costs ~25x its top 64, which usually reach p already; then the top 4,096; then
    # everything, by numpy's sort (faster than torch's here; figures in docs/benchmarks.md).
    for k in (64, 4096, n):
        if k >= n:
            order = torch.from_numpy(np.argsort(-logits.float().cpu().numpy(), kind="quicksort")).to(logits.device)
        else:
            order = torch.topk(logits, k).indices  # (k,), most likely first
        top = probs[order]
        mass_before = torch.cumsum(top, dim=-1) - top  # mass of strictly more likely tokens
        drop = mass_before >= top_p
        if k >= n or bool(drop.any()):
            keep = order[~drop]
            return torch.full_like(logits, float("-inf")).index_put_((keep,), logits[keep])
    raise AssertionError("unreachable: the last pass sorts the whole row")


def sampling_distribution(logits, temperature, top_k=None, top_p=None) -> dict[str, torch.Tensor]:
    """Probabilities after each stage, float32: {"raw", "temperature", "top_k", "top_p"}."""
    logits = logits.float()
    t = apply_temperature(logits, temperature)
    k = apply_top_k(t, top_k)
    p = apply_top_p(k, top_p)
    # A stage that is switched off returns its input tensor itself; its softmax is computed once
    # and shared (at temperature 0 with no filters all four stages are one softmax over the vocab).
    softmaxes: dict[int, torch.Tensor] = {}
    for x in (logits, t, k, p):
        if id(x) not in softmaxes:
            softmaxes[id(x)] = torch.softmax(x, dim=-1)
    return {name: softmaxes[id(x)] for name, x in zip(STAGES, (logits, t, k, p))}


@dataclass
class GenerationStep:
    """One generated token, with what the UI needs to explain the choice."""

    index: int  # 0 for the first new token
    position: int  # its position in the full sequence (prompt + generated)
    token_id: int
    prob: float  # probability under the final sampling distribution
    raw_prob: float  # probability under the plain softmax of the logits
    rank: int  # 1 = the most likely token under the plain softmax
    entropy: float  # bits, of the final sampling distribution
    raw_entropy: float  # bits, of the plain softmax
    top: list[tuple[int, float]]  # most likely alternatives under the sampling distribution
    candidates: list[int]  # ids shown in the stage view: raw top-n plus the chosen token
    stages: dict[str, list[float]]  # stage -> probability of each candidate
    context_start: int = 0  # tokens dropped from the left when the window was full
    attention: list[torch.Tensor] | None = None  # per layer (n_heads, k_len), this step's query row
    kept_tokens: int = 0  # how many tokens survive top-k and top-p
    u: float | None = None  # the seeded uniform draw in [0, 1) that chose the token; None when greedy
    intervals: list[tuple[int, float, float]] = field(default_factory=list)  # (id, lo, hi) slices of [0, 1)


def _any_training(model: torch.nn.Module) -> bool:
    return any(m.training for m in model.modules())


@dataclass
class Generation:
    """Iterate to get ``GenerationStep``s. ``n_cropped`` prompt tokens were dropped from the left to
    fit the context window (said, never silent).

    A decoder serving many generations at once takes each one's ``next_row()``, computes the rows
    together (``engine.decoding``) and hands each generation its result with ``advance``; a step with
    no row (the prompt, a slid window) runs by itself with ``step_alone``, which is what iterating does.

    Sampling draws from a private ``torch.Generator``, never torch's global one, so runs of different
    users never disturb each other: one float64 uniform per sampled step (``receipts.inverse_cdf_draw``;
    greedy steps draw nothing). ``seed_used`` is the seed it was given, or, without one, the seed
    drawn from ``os.urandom``: passing it back as ``seed`` reproduces the run.
    Raises NonFiniteError (a ValueError) at the step whose logits are NaN or infinite."""

    model: GPTModel
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    capture_attention: bool = False
    n_top: int = 10
    use_cache: bool = True
    n_cropped: int = 0
    steps: list[GenerationStep] = field(default_factory=list)
    seed_used: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        # The settings' rules live in one place; a caller that parsed them already passes typed values.
        typed = checked_settings(self.temperature, self.top_k, self.top_p, self.seed, self.max_new_tokens)
        self.temperature, self.top_k, self.top_p, self.seed = (
            typed.temperature,
            typed.top_k or None,
            typed.top_p,
            typed.seed,
        )
        ids = checked_prompt(self.prompt_ids, self.model.cfg.vocab_size)
        context = self.model.cfg.context_length
        self.n_cropped = max(0, len(ids) - context)
        self.prompt_ids = ids[self.n_cropped :]
        # 32 random bits: short enough to type back into a seed box, exact in a JavaScript number.
        self.seed_used = int(self.seed) if self.seed is not None else int.from_bytes(os.urandom(4), "little")
        self._gen = torch.Generator(device="cpu").manual_seed(self.seed_used)
        self._seq = list(self.prompt_ids)
        # The positions this run can reach (its window slides only once it outgrows the context).
        reach = min(context, len(self.prompt_ids) + self.max_new_tokens)
        self._cache = self.model.new_kv_cache(capacity=reach) if self.use_cache else None
        self._window_start = 0  # first sequence position inside the model's window
        self._finished = False
        self._was_training: bool | None = None  # the model's mode before the first step
        # Called once when the generation ends (done, failed or closed): whoever holds something for it
        # (a server's memory room) gives it back then.
        self.on_finish: list = []
        self._decoder = decoding.decoder_of(self.model)
        cfg = self.model.cfg
        # A greedy step with no filter needs only a summary of its row (row_summary).
        plain_greedy = (
            self.temperature == 0
            and (not self.top_k or self.top_k >= cfg.vocab_size)
            and (self.top_p is None or self.top_p >= 1.0)
            and self.model.device.type == "cpu"
        )
        self._summarize = self._decoder.summarizer(self.n_top) if plain_greedy else None
        # A sampled step may have a faster way to the same fields than ``_choose`` (the decoder's; None: plain).
        sampled = self.temperature > 0 and self.model.device.type == "cpu"
        self._sample = self._decoder.sampler(self.n_top) if sampled else None

    def __iter__(self):
        return self

    def __next__(self) -> GenerationStep:
        if self.done:
            raise StopIteration
        return self.step_alone()

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]

    @property
    def done(self) -> bool:
        """All tokens made, or stopped by a step that failed."""
        return self._finished or len(self.steps) >= self.max_new_tokens

    def next_row(self) -> Row | None:
        """This generation's next step as one row of a shared forward (one new token continuing its
        cache, or the whole prompt where the decoder takes prompts as rows), or None when that step runs
        alone: the first one (a prompt longer than the decoder's ``prompt_rows``), one after the window
        slid, one without a cache, or none left."""
        cache = self._cache
        if self.done or cache is None or self._window_start > 0:
            return None
        if cache.length == 0 and len(self._seq) <= self._decoder.prompt_rows(self.model):
            # the whole prompt as one row, where the decoder feeds prompts with the rows beside them
            return Row(self._seq[-1], cache, self.capture_attention, before=tuple(self._seq[:-1]))
        if cache.length == 0 or len(self._seq) - cache.length != 1:
            return None
        return Row(self._seq[-1], cache, self.capture_attention)

    @torch.no_grad()
    def step_alone(self) -> GenerationStep:
        """Make the next token by itself: the row through this model's decoder, or the whole window."""
        self._begin()
        try:
            row = self.next_row()
            result = self._window_logits() if row is None else self._decoder.rows(self.model, [row])[0]
        except BaseException:
            self._finish()
            raise
        return self.advance(result)

    def sampled_row(self, result: RowResult) -> SampledRow | None:
        """This step as a row of its decoder's ``sample_rows`` (a sampled step the decoder has a sampler for),
        else None: ``advance(result, fields)`` then takes what ``sample_rows`` made of it."""
        if self._sample is None or self.done:
            return None
        return SampledRow(self._sample, result[0], self._gen, self.temperature, self.top_k, self.top_p)

    @torch.no_grad()
    def advance(self, result: RowResult, fields: dict | None = None, sampled: bool = False) -> GenerationStep:
        """Choose the next token from its logits (and attach its attention): ``result`` is what a
        decoder's ``rows`` returned for ``next_row()``, or what ``step_alone`` computed. ``sampled``: the
        decoder's ``sample_rows`` already made this step's ``fields`` from ``sampled_row(result)`` (None: the
        row is left to ``_choose``)."""
        self._begin()
        logits, attention = result
        index = len(self.steps)
        try:
            if self._summarize is not None:
                summary = self._summarize(logits)
                if summary is None:
                    check_logits(logits, index + 1)  # raises, saying what is not finite
                assert summary is not None
                fields = greedy_step_fields(summary, STAGES)
                step = GenerationStep(index, len(self._seq), context_start=self._window_start, **fields)
            else:
                if not sampled:
                    fields = None
                    if self._sample is not None:  # None: the row is left to ``_choose`` (it drew nothing)
                        fields = self._sample(logits, self._gen, self.temperature, self.top_k, self.top_p)
                if fields is not None:
                    step = GenerationStep(index, len(self._seq), context_start=self._window_start, **fields)
                else:
                    with self._decoder.sampling(self.model):
                        step = self._choose(logits, self._gen, index, len(self._seq), self._window_start)
        except BaseException:
            self._finish()
            raise
        if attention is not None:
            step.attention = attention
        self.steps.append(step)
        self._seq.append(step.token_id)
        context = self.model.cfg.context_length
        if len(self._seq) - self._window_start > context:
            self._window_start = len(self._seq) - context
        if self.done:
            self._finish()
        return step

    def close(self) -> None:
        """Stop here: no further steps; the model's training mode is as it was."""
        self._finish()

    def _begin(self) -> None:
        if self._was_training is None:
            self._was_training = self.model.training
            if _any_training(self.model):  # setting the mode walks every module: a room's runs begin at once
                self.model.eval()

    def _finish(self) -> None:
        self._finished = True
        if self._was_training is not None:
            if self._was_training or _any_training(self.model):
                self.model.train(self._was_training)
            self._was_training = None
        callbacks, self.on_finish = self.on_finish, []
        for callback in callbacks:
            callback()

    def _window_logits(self) -> RowResult:
        """The whole window through the model's forward: the first step, no cache, or a full window that
        slid (with learned positions every token's position changes then: the cache cannot shift)."""
        model, cache = self.model, self._cache
        if cache is not None:
            cache.reset()
        window = self._seq[self._window_start :]
        idx = torch.tensor([window], dtype=torch.long, device=model.device)
        out = model(idx, kv_cache=cache, return_attention=self.capture_attention, last_token_only=True)
        if self.capture_attention:
            logits, trace = out
            # Only the newest query row is this step's attention: (n_heads, k_len) per layer.
            return logits[0, -1].float(), [last_row_probs(q, k) for q, k in zip(trace.queries, trace.keys)]
        return out[0, -1].float(), None

    def _choose(self, logits, gen, index, position, window_start) -> GenerationStep:
        check_logits(logits, index + 1)
        dists = sampling_distribution(logits, self.temperature, self.top_k, self.top_p)
        final = dists["top_p"]
        u, intervals = None, []
        if self.temperature == 0:
            token_id = first_argmax(final)
        else:
            # The project's own inverse-CDF sampler, not torch.multinomial: multinomial draws one
            # exponential per vocabulary entry and takes argmax(p / E), so no single number explains
            # its choice. Here one seeded uniform u picks the token whose cumulative-probability slice
            # holds it, and the step keeps u and the slices: its sampling receipt (receipts.py).
            token_id, u, cdf = inverse_cdf_draw(final.cpu(), gen)
        raw = dists["raw"]
        raw_prob = float(raw[token_id])
        rank = count_above(raw, raw_prob) + 1
        n = min(self.n_top, final.numel())
        top_p_vals, top_ids = torch.topk(final, n)
        if raw is final:  # no stage changed anything (e.g. greedy): one top-k and one entropy
            raw_top = top_ids.tolist()
        else:
            raw_top = torch.topk(raw, min(self.n_top, raw.numel())).indices.tolist()
        candidates = raw_top if token_id in raw_top else raw_top + [token_id]
        if u is not None:
            shown = list(dict.fromkeys(top_ids.tolist() + [token_id]))
            intervals = slices(cdf, shown)
        cand = torch.tensor(candidates, device=raw.device)
        entropy = entropy_bits(final)
        stage_rows: dict[int, list[float]] = {}  # stages that share a tensor share the row
        for name in STAGES:
            if id(dists[name]) not in stage_rows:
                stage_rows[id(dists[name])] = dists[name][cand].tolist()
        return GenerationStep(
            index=index,
            position=position,
            token_id=token_id,
            prob=float(final[token_id]),
            raw_prob=raw_prob,
            rank=rank,
            entropy=entropy,
            raw_entropy=entropy if raw is final else entropy_bits(raw),
            top=list(zip(top_ids.tolist(), top_p_vals.tolist())),
            candidates=candidates,
            stages={name: list(stage_rows[id(dists[name])]) for name in STAGES},
            context_start=window_start,
            kept_tokens=count_above(final, 0.0),
            u=u,
            intervals=intervals,
        )


def generate(
    model: GPTModel,
    prompt_ids,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    capture_attention: bool = False,
    n_top: int = 10,
    use_cache: bool = True,
) -> Generation:
    """Yield one ``GenerationStep`` per new token. Parameters are checked at the call, so bad
    values raise ValueError before anything runs. Temperature 0 is greedy."""
    return Generation(
        model,
        list(prompt_ids),
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        capture_attention,
        n_top,
        use_cache,
    )
