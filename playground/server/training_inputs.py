"""What the Train tab trains on and how long it will take.

The corpora, the time estimates, the overfitting check, and the recorded "watch an induction head form" run."""

from __future__ import annotations

from playground.training import estimate, induction_run
from playground.training.corpus import (
    load_bundled_corpus,
    load_tiny_shakespeare,
    prepare_corpus,
    text_from_paste,
    text_from_upload,
)
from playground.training.estimate import format_duration
from playground.training.losses import overfitting

__all__ = [
    "estimate",
    "format_duration",
    "induction_run",
    "load_bundled_corpus",
    "load_tiny_shakespeare",
    "overfitting",
    "prepare_corpus",
    "text_from_paste",
    "text_from_upload",
]
