"""A training job's heads, for the Train tab and the API: the timeline, and one logged step's map.

The job's ``HeadWatch`` (playground.training.head_watch) measures every head on a fixed probe while
the run trains; this reads what it has logged so far (its thread appends, so a copy of the list is
read) and picks, for a logged step and a head, the head's map on the probe's first row and the
sample the model wrote nearest before that step.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from playground.engine.tokenizer import load_tokenizer
from playground.errors import UserError
from playground.server.train_samples import decoded
from playground.training.head_watch import HeadScores
from playground.training.head_watch import timeline as _timeline

KEPT_RUNS = 32  # finished runs whose heads stay in memory for the scrubber (~1 MB each at most)


@dataclass(frozen=True)
class WatchedRun:
    """What the views read of a job, copied: its logged heads and samples, never its model."""

    records: tuple[HeadScores, ...]
    probe: torch.Tensor
    every: int
    seconds: float
    samples: tuple[tuple[int, list[int]], ...]
    sample_prompt: list[int]
    total_steps: int
    done: bool


def view_of(job) -> WatchedRun:
    return WatchedRun(
        records=tuple(job.watch.records),
        probe=job.watch.probe,
        every=job.watch.every,
        seconds=job.watch.seconds,
        samples=tuple(job.samples),
        sample_prompt=list(job.sample_prompt),
        total_steps=job.tcfg.steps,
        done=job.done.is_set(),
    )


_FINISHED: OrderedDict[str, WatchedRun] = OrderedDict()
_LOCK = threading.Lock()


def keep(job) -> None:
    """Keep a finished job's heads for the scrubber and the API once the job itself is gone."""
    with _LOCK:
        _FINISHED[job.id] = view_of(job)
        while len(_FINISHED) > KEPT_RUNS:
            _FINISHED.popitem(last=False)


def find(job_id, jobs: dict) -> WatchedRun | None:
    """The heads of job ``job_id``: live (in ``jobs``) or kept."""
    job = jobs.get(job_id or "")
    if job is not None:
        return view_of(job)
    with _LOCK:
        return _FINISHED.get(job_id or "")


def timeline(run: WatchedRun) -> dict:
    """Steps × layers × heads scores so far, as plain JSON (``head_watch.timeline``); with the
    run's step count, how often it logs and whether it has ended."""
    return {
        **_timeline(list(run.records), run.probe, run.seconds),
        "every": run.every,
        "total_steps": run.total_steps,
        "done": run.done,
    }


def probe_labels(run: WatchedRun) -> list[str]:
    """The probe's first row as tick labels: position-numbered so that repeated tokens stay apart,
    a leading space shown as ␣."""
    tok = load_tokenizer()
    ids = run.probe[0].tolist()
    return [f"{i}·{tok.decode([t]).replace(' ', '␣').replace(chr(10), '↵')}" for i, t in enumerate(ids)]


def nearest_record(records: list, step: int):
    """The logged record at ``step``, else the last one before it (the first one if none is)."""
    before = [r for r in records if r.step <= step]
    return before[-1] if before else records[0]


def scrub(run: WatchedRun, step, layer, head) -> dict:
    """One head's attention map on the probe's first row at a logged step (the nearest at or before
    ``step``), its scores there, and the sample the model wrote at or before that step."""
    records = list(run.records)
    if not records:
        raise UserError("train.no_head_scores", "No head scores yet: the run logs its first ones at step 0.")
    n_layers, n_heads = records[0].induction.shape
    try:
        layer, head, step = int(layer), int(head), int(step)
    except (TypeError, ValueError):
        raise UserError("train.head_pick", "Pick a step and a head (layer and head as whole numbers).") from None
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise UserError(
            "train.head_range",
            "The model has {layers} layers of {heads} heads; layer {layer} head {head} is not one of them.",
            layers=n_layers,
            heads=n_heads,
            layer=layer,
            head=head,
        )
    record = nearest_record(records, step)
    samples = [s for s in run.samples if s[0] <= record.step] or list(run.samples)[:1]
    sample_step, sample_ids = samples[-1] if samples else (None, [])
    return {
        "step": record.step,
        "layer": layer,
        "head": head,
        "map": np.asarray(record.maps[layer, head], dtype=np.float32),
        "labels": probe_labels(run),
        "previous_token": float(record.previous_token[layer, head]),
        "induction": float(record.induction[layer, head]),
        "first_token": float(record.first_token[layer, head]),
        "in_context_gap": record.gap,
        "sample_step": sample_step,
        "sample": decoded(run.sample_prompt) + decoded(sample_ids) if samples else "",
    }
