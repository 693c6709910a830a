"""The lesson on heads forming: questions asked of a recorded training run, not of the session's model.

A 700-step run takes over a minute here, too long for a page to wait, so these questions read the
"watch an induction head form" run recorded once with its fixed seed (``induction_run.recorded``,
written by tools/heads_timeline.py, checked against a fresh run by
tests/integration/test_heads_timeline.py). Every answer and every number the texts quote is read from
that timeline; the model and prompt a lesson step is given are not used. Each step's view is the
Train tab's head curves (``head_curves``), and its "Show me" opens the Train tab's heads view.
"""

from __future__ import annotations

import numpy as np

from playground.server.lesson_kit import Question
from playground.training import induction_run

RECORDED = "lesson_answer_recorded"  # the reveal says the answer is the recorded run's, not the model's now
PANELS = ("previous_token", "induction", "first_token", "in_context_gap")


def _recorded() -> tuple[dict, dict]:
    rec = induction_run.recorded()
    return rec, rec["timeline"]


def _best(scores) -> tuple[int, int, float]:
    """(layer, head, score) of the highest score in a [layer][head] list."""
    a = np.asarray(scores, dtype=float)
    layer, head = (int(x) for x in np.unravel_index(int(np.argmax(a)), a.shape))
    return layer, head, float(a[layer, head])


def curves_view(tl: dict, run: dict, context: tuple[str, ...], mark: tuple[int, int]) -> dict:
    """The timeline as the Train tab draws it; ``context``: the panels shown before the guess."""
    keys = ("layers", "heads", "steps", *PANELS, "phase_change")
    return {"kind": "head_curves", "timeline": {k: tl[k] for k in keys}, "run": run, "context": list(context)} | {
        "mark": list(mark)
    }


def train_target(tl: dict, head: tuple[int, int]) -> dict:
    """The Train tab's heads view of the recorded run, at its phase change (its last log without one)."""
    phase = tl["phase_change"]
    at = phase["step"] if phase else tl["steps"][-1]
    return {"tab": "train", "heads_step": at, "head": f"{head[0]}.{head[1]}"}


def _common_fields(rec: dict, tl: dict) -> dict:
    run = rec["run"]
    layer, head, score = _best(tl["induction"][-1])
    pl, ph, prev = _best(tl["previous_token"][-1])
    return {
        "steps": f"{run['steps']:,}",
        "seed": run["seed"],
        "seconds": f"{run['seconds']:.0f}",
        "layers": tl["layers"],
        "heads": tl["heads"],
        "head": f"{layer}.{head}",
        "score": f"{score:.2f}",
        "prev_head": f"{pl}.{ph}",
        "prev_layer": pl,
        "prev": f"{prev:.2f}",
    }


def induction_layer(model, ids, labels, params) -> Question:
    """Which layer does the induction head form in? (The head with the highest induction score at the
    run's last log.) Before the guess the previous-token, first-token and gap panels show."""
    rec, tl = _recorded()
    layer, head, _ = _best(tl["induction"][-1])
    layers = range(int(tl["layers"]))
    choices = [(str(i), f"layer {i}") for i in layers]
    said = {str(i): ("lesson_layer", {"layer": i}) for i in layers}
    view = curves_view(tl, rec["run"], ("previous_token", "first_token", "in_context_gap"), (layer, head))
    fields = _common_fields(rec, tl) | {"layer": layer}
    return Question(
        choices, str(layer), view, fields, target=train_target(tl, (layer, head)), said=said, answer_from=RECORDED
    )


def step_choices(answer: int, steps: list[int], n: int = 4) -> list[int]:
    """The answer and ``n - 1`` logged steps spread over the run, each at least an eighth of the run
    away from the answer (a guess near it is not a different answer), smallest first."""
    total, every = steps[-1], (steps[1] - steps[0]) if len(steps) > 1 else 1
    grid = sorted({round(total * k / 8 / every) * every for k in range(1, 8)})
    far = [s for s in grid if abs(s - answer) >= total / 8 and s in steps]
    picked = [far[int(i)] for i in np.linspace(0, len(far) - 1, min(n - 1, len(far)))] if far else []
    return sorted({answer, *picked})


def phase_step(model, ids, labels, params) -> Question:
    """Near which step does the phase change come: the logged step that ends the largest rise of the
    induction head's score (``head_watch.phase_change``), where the in-context loss drops with it.
    Before the guess only the previous-token panel shows."""
    rec, tl = _recorded()
    phase = tl["phase_change"]
    steps = list(tl["steps"])
    at = steps.index(phase["step"])
    layer, head = phase["layer"], phase["head"]
    choices = [(str(s), f"{s:,}") for s in step_choices(phase["step"], steps)]
    view = curves_view(tl, rec["run"], ("previous_token",), (layer, head))
    gap = tl["in_context_gap"]
    fields = _common_fields(rec, tl) | {
        "head": f"{layer}.{head}",
        "step": f"{phase['step']:,}",
        "before": f"{steps[at - 1]:,}",
        "rise": f"{phase['rise']:.2f}",
        "from": f"{tl['induction'][at - 1][layer][head]:.2f}",
        "to": f"{tl['induction'][at][layer][head]:.2f}",
        "gap_before": f"{gap[at - 1]:+.2f}",
        "gap_after": f"{gap[at]:+.2f}",
        "gap_end": f"{gap[-1]:+.2f}",
    }
    return Question(
        choices, str(phase["step"]), view, fields, target=train_target(tl, (layer, head)), answer_from=RECORDED
    )


def repeat_loss(model, ids, labels, params) -> Question:
    """Once the induction head has formed, is the loss on the probe's repeated half below or above the
    loss on its first half? (The in-context gap at the last log, late minus early.) Before the guess
    every head's scores show, not the gap."""
    rec, tl = _recorded()
    gap = float(tl["in_context_gap"][-1])
    layer, head, _ = _best(tl["induction"][-1])
    view = curves_view(tl, rec["run"], ("previous_token", "induction", "first_token"), (layer, head))
    fields = _common_fields(rec, tl) | {
        "gap": f"{gap:+.2f}",
        "early": f"{tl['early_loss'][-1]:.2f}",
        "late": f"{tl['late_loss'][-1]:.2f}",
        "gap_start": f"{tl['in_context_gap'][0]:+.2f}",
    }
    choices = [("below", "below"), ("above", "above")]
    answer = "below" if gap < 0 else "above"
    return Question(choices, answer, view, fields, True, target=train_target(tl, (layer, head)), answer_from=RECORDED)
