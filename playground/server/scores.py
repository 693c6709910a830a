"""The Compare tab's numbers: a text scored token by token, two scorings compared, a receipt explained."""

from __future__ import annotations

from playground.engine.receipts import explain, receipt
from playground.inside.scoring import compare_scores, decode_upload, score_text

__all__ = ["compare_scores", "decode_upload", "explain", "receipt", "score_text"]
