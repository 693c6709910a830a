"""Watching heads form during training: every head's scores on a small fixed probe, every N steps.

The probe is TransformerLens's induction test at a small size: ``PROBE_ROWS`` rows, each
``<|endoftext|>`` and then a run of ``PROBE_PERIOD`` distinct frequent tokens of the training text said
twice. On it, for every head (``engine.head_patterns``, the numbers the Inside views show):
  previous-token: its mean attention on the token just before the query;
  induction:      its mean attention, over the second run's queries, on the token after the query's
                  earlier occurrence (prefix matching);
  first-token:    its mean attention on position 0 (the attention sink);
and for the model, the in-context loss gap: the mean loss on the second run's tokens minus that on
the first run's (both from their second token on). It is about 0 before the model can copy and falls
far below 0 once an induction circuit reads the second run off the first.

The probe is fixed for the run (drawn once with ``PROBE_SEED``), so a change in a score between two
logged steps is a change in the weights. Each record keeps the first probe row's attention maps, small
(layers × heads × 33 × 33), for the scrubber.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from playground.engine.head_patterns import head_stats, induction_scores
from playground.engine.tokenizer import load_tokenizer
from playground.training.repeats import END_OF_TEXT, frequent_tokens

PROBE_ROWS = 4  # each row costs a 50,257-way output head: four keep a log a few % of a step's time
PROBE_PERIOD = 16
PROBE_POOL = 500  # the probe's tokens: drawn from the training text's most frequent
PROBE_SEED = 0
PHASE_JUMP = 0.1  # a rise of the induction score between two logs that counts as the phase change


def probe_batch(train_ids, rows: int = PROBE_ROWS, period: int = PROBE_PERIOD, seed: int = PROBE_SEED) -> torch.Tensor:
    """(rows, 1 + 2·period) token ids: ``<|endoftext|>``, a run of distinct frequent tokens, the run again."""
    tok = load_tokenizer()
    # whole characters only: a token that is part of a character's bytes labels the map as �
    pool = torch.tensor(
        [t for t in frequent_tokens(train_ids, PROBE_POOL).tolist() if "\ufffd" not in tok.decode([t])],
        dtype=torch.long,
    )
    if len(pool) < period:  # a text of a few words: the probe takes other tokens too
        others = torch.tensor([i for i in range(256, 256 + 2 * period) if i not in set(pool.tolist())])
        pool = torch.cat([pool, others])[: max(period, len(pool))]
    gen = torch.Generator().manual_seed(seed)
    runs = [pool[torch.randperm(len(pool), generator=gen)[:period]] for _ in range(rows)]
    return torch.stack([torch.cat([torch.tensor([END_OF_TEXT]), run, run]) for run in runs])


def probe_period(context_length: int) -> int:
    """The probe's period for a model of this context: ``PROBE_PERIOD``, or what fits twice after
    ``<|endoftext|>`` (0: no probe fits, the heads are not watched)."""
    period = min(PROBE_PERIOD, (context_length - 1) // 2)
    return period if period >= 2 else 0


@dataclass(frozen=True)
class HeadScores:
    """One logged step: [layers, heads] scores, the probe's losses and the first row's maps."""

    step: int
    previous_token: np.ndarray
    induction: np.ndarray
    first_token: np.ndarray
    early_loss: float  # mean loss on the first run (its tokens 2..period)
    late_loss: float  # mean loss on the second run (its tokens 2..period)
    maps: np.ndarray  # [layers, heads, T, T] float16: the first probe row's attention

    @property
    def gap(self) -> float:
        """The in-context loss gap: late minus early (negative once the model copies)."""
        return self.late_loss - self.early_loss


@torch.no_grad()
def measure(model, probe: torch.Tensor, step: int) -> HeadScores:
    """Every head's scores on ``probe`` now (the model in eval mode meanwhile, then as it was)."""
    was_training = model.training
    model.eval()
    try:
        logits, trace = model(probe.to(model.device), return_attention=True)
        maps = [layer.float().cpu().numpy() for layer in trace.all_layers()]  # each (rows, H, T, T)
    finally:
        model.train(was_training)
    rows, period = probe.shape[0], (probe.shape[1] - 1) // 2
    per_row = [head_stats([m[r] for m in maps]) for r in range(rows)]
    ids = probe.cpu().numpy()
    induction = np.mean([induction_scores([m[r] for m in maps], ids[r]) for r in range(rows)], axis=0)
    # nll[:, j]: the loss of predicting token j + 1 (the last position predicts nothing: ignored, so
    # that the logits are read in place, not copied); the first run holds tokens 1..period
    targets = torch.cat([probe[:, 1:], torch.full((rows, 1), -100)], dim=1).to(logits.device)
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none", ignore_index=-100)
    nll = nll.view(rows, -1).cpu()
    return HeadScores(
        step=step,
        previous_token=np.mean([s["previous-token"] for s in per_row], axis=0),
        induction=induction,
        first_token=np.mean([s["first-token"] for s in per_row], axis=0),
        early_loss=float(nll[:, 1:period].mean()),
        late_loss=float(nll[:, period + 1 : 2 * period].mean()),
        maps=np.stack([m[0] for m in maps]).astype(np.float16),
    )


def phase_change(steps: list[int], induction: list[np.ndarray]) -> dict | None:
    """Where the induction score jumps: for the head with the highest score at the last log, the
    logged step that ends its largest rise between two logs; None when no rise reaches ``PHASE_JUMP``."""
    if len(steps) < 2:
        return None
    layer, head = np.unravel_index(int(np.nanargmax(induction[-1])), induction[-1].shape)
    series = np.array([float(scores[layer, head]) for scores in induction])
    rises = np.diff(series)
    at = int(np.nanargmax(rises))
    if not rises[at] >= PHASE_JUMP:
        return None
    return {"step": steps[at + 1], "layer": int(layer), "head": int(head), "rise": round(float(rises[at]), 4)}


class HeadWatch:
    """A trainer callback: measures the heads at step 0 and every ``every`` steps, and where the run
    ends; ``seconds`` is the time it spent, to set against the run's."""

    def __init__(self, model, probe: torch.Tensor, every: int):
        if every < 1:
            raise ValueError("the head scores need a step interval of at least 1")
        self.model, self.probe, self.every = model, probe, every
        self.records: list[HeadScores] = []
        self.seconds = 0.0

    def due(self, step: int) -> bool:
        return (not self.records or self.records[-1].step != step) and (step == 0 or step % self.every == 0)

    def observe(self, step: int, final: bool = False) -> HeadScores | None:
        """Measure now if ``step`` is a logged one (or the run's last, ``final``); the new record, else None."""
        if not (self.due(step) or (final and (not self.records or self.records[-1].step != step))):
            return None
        started = time.perf_counter()
        record = measure(self.model, self.probe, step)
        self.records.append(record)
        self.seconds += time.perf_counter() - started
        return record

    def __call__(self, event) -> HeadScores | None:
        """As ``Trainer.run``'s callback: a TrainEvent's step, and its end."""
        return self.observe(event.step, final=event.kind == "done")

    def timeline(self) -> dict:
        return timeline(self.records, self.probe, self.seconds)


def _rounded(a: np.ndarray) -> list:
    return np.round(a.astype(np.float64), 4).tolist()


def record_json(record: HeadScores) -> dict:
    """One logged step as plain numbers (a metrics-file line): [layer][head] lists, 4 decimals."""
    return {
        "kind": "heads",
        "step": record.step,
        "previous_token": _rounded(record.previous_token),
        "induction": _rounded(record.induction),
        "first_token": _rounded(record.first_token),
        "early_loss": round(record.early_loss, 4),
        "late_loss": round(record.late_loss, 4),
        "in_context_gap": round(record.gap, 4),
    }


def timeline(records: list[HeadScores], probe: torch.Tensor, seconds: float = 0.0) -> dict:
    """The whole run's scores, steps × layers × heads, as plain JSON; where the induction score jumped."""
    layers, heads = records[0].induction.shape if records else (0, 0)
    return {
        "probe": {"ids": probe.tolist(), "period": (probe.shape[1] - 1) // 2, "rows": probe.shape[0]},
        "layers": int(layers),
        "heads": int(heads),
        "steps": [r.step for r in records],
        "previous_token": [_rounded(r.previous_token) for r in records],
        "induction": [_rounded(r.induction) for r in records],
        "first_token": [_rounded(r.first_token) for r in records],
        "early_loss": [round(r.early_loss, 4) for r in records],
        "late_loss": [round(r.late_loss, 4) for r in records],
        "in_context_gap": [round(r.gap, 4) for r in records],
        "phase_change": phase_change([r.step for r in records], [r.induction for r in records]),
        "seconds": round(seconds, 3),
    }
