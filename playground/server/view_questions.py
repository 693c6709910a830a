"""A question on the teacher's view for a classroom vote: which head of a layer does what, answered by the run.

"Which head of layer L attends most to the previous token?" (or to the first token, or "is the induction
head?"): the choices are the layer's heads, and the answer is the head whose score is highest on the
teacher's last run, computed from that run's captured attention on the teacher's model exactly as the
Inside overview computes it (``attention_views.view_data``'s overviews: ``head_stats`` and
``induction_scores`` over the run's last context window, kept while its trace lives). A question with no
clear answer is refused with a message, never answered by a pick: two heads within ``TIE_MARGIN`` of the
top score, a layer whose scores are undefined (a one-token run), or an induction question on a run whose
tokens never repeat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from playground.errors import UserError
from playground.server.attention_views import OVERVIEW_METRICS, view_data, window
from playground.server.decode_loop import LOOP
from playground.server.room_checks import MAX_CHOICES
from playground.settings import parse_whole

# The question kinds (what the API sends) and the overview each one reads.
KINDS = {"previous-token": "overview-previous", "first-token": "overview-first", "induction": "overview-induction"}
# Two heads closer than this (a tenth of a percent of a query's attention) share the top: no one answer.
TIE_MARGIN = 1e-3


class ViewQuestionError(UserError):
    """A question on the view that has no answer on this run: the message says why."""


@dataclass(frozen=True)
class ViewQuestion:
    """One question's numbers: its kind and layer, each head's score on the run, the answering head, the
    runner-up's margin, and (for induction) how many positions repeat an earlier token."""

    kind: str
    layer: int
    scores: np.ndarray  # (n_heads,) float64
    head: int
    margin: float
    repeating: int = 0

    @property
    def choices(self) -> list[str]:
        """The heads as the room's choice ids ("h0", "h1", ...)."""
        return [f"h{h}" for h in range(len(self.scores))]

    @property
    def answer(self) -> str:
        return f"h{self.head}"


def asked_layer(model, layer) -> int:
    """``layer`` as one of ``model``'s layers whose heads a room's vote can take as its choices."""
    layer = parse_whole(layer, "Layer", 0, model.cfg.n_layers - 1)
    if model.cfg.n_heads > MAX_CHOICES:
        raise ViewQuestionError(
            "view_question.too_many_heads",
            "Each layer of this model has {n} heads; a room's vote takes at most {cap} choices.",
            n=model.cfg.n_heads,
            cap=MAX_CHOICES,
        )
    return layer


def ask(model, run, kind, layer) -> ViewQuestion:
    """The question of ``kind`` (one of ``KINDS``) on layer ``layer`` of ``run``'s attention on ``model``
    (the model that made the run), answered; a ``ViewQuestionError`` when it has no clear answer."""
    if kind not in KINDS:
        raise ViewQuestionError(
            "view_question.bad_kind", "{kind!r} is not a question kind: one of {kinds}.", kind=kind, kinds=list(KINDS)
        )
    if run is None:
        raise ViewQuestionError("view_question.no_run", "Generate first: the question is asked of your last run.")
    if LOOP.running(run.id):
        raise ViewQuestionError("view_question.running", "Wait for the run to finish: its attention is still growing.")
    layer = asked_layer(model, layer)
    w = window(model, run)
    data = view_data(model, w, KINDS[kind], layer, 0, w.end)
    scores = np.asarray(data.matrix[layer], dtype=np.float64)
    if kind == "induction" and data.repeating == 0:
        raise ViewQuestionError(
            "view_question.no_repeat",
            "No token of this run repeats an earlier one, so no head can show induction: generate from a prompt "
            "that says something twice.",
        )
    if scores.size < 2 or not np.isfinite(scores).all():
        raise ViewQuestionError(
            "view_question.undefined",
            "The heads of layer {layer} have no {metric} score on this run (it needs at least 2 tokens).",
            layer=layer,
            metric=OVERVIEW_METRICS[KINDS[kind]],
        )
    order = np.argsort(-scores, kind="stable")
    top, second = int(order[0]), int(order[1])
    margin = float(scores[top] - scores[second])
    if margin < TIE_MARGIN:
        raise ViewQuestionError(
            "view_question.tie",
            "Heads {a} and {b} of layer {layer} score within {margin} of each other ({sa:.4f} and {sb:.4f}): the "
            "question has no one answer on this run. Pick another layer or question.",
            a=top,
            b=second,
            layer=layer,
            margin=TIE_MARGIN,
            sa=float(scores[top]),
            sb=float(scores[second]),
        )
    return ViewQuestion(kind, layer, scores, top, margin, data.repeating)
