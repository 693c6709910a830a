"""The recorded run the lesson on heads forming reads (playground/assets/timelines/induction_run.json,
written by tools/heads_timeline.py) is the default induction run: trained again here with its fixed seed
on one thread, it logs the same steps and the same scores, and the lesson's answers (the induction
head's layer, the phase change's step, the sign of the in-context gap) come out the same."""

from __future__ import annotations

import numpy as np
import pytest

from playground.training import induction_run

pytestmark = pytest.mark.slow

# A float summed in another order on another CPU can move a score a little and, near a jump, move the
# phase change by a log: the scores are compared within this, the phase change within one log.
SCORE_TOLERANCE = 0.05


def test_the_recorded_timeline_is_the_run_trained_again():
    shipped = induction_run.recorded()
    again = induction_run.record(threads=shipped["run"]["threads"])
    a, b = shipped["timeline"], again["timeline"]
    assert a["steps"] == b["steps"] and a["probe"] == b["probe"]
    for key in ("previous_token", "induction", "first_token"):
        np.testing.assert_allclose(a[key], b[key], atol=SCORE_TOLERANCE, err_msg=key)
    np.testing.assert_allclose(a["in_context_gap"], b["in_context_gap"], atol=0.2)
    pa, pb = a["phase_change"], b["phase_change"]
    assert (pa["layer"], pa["head"]) == (pb["layer"], pb["head"])
    assert abs(pa["step"] - pb["step"]) <= induction_run.WATCH_EVERY
    last_a, last_b = np.asarray(a["induction"][-1]), np.asarray(b["induction"][-1])
    assert np.unravel_index(last_a.argmax(), last_a.shape) == np.unravel_index(last_b.argmax(), last_b.shape)
    assert (a["in_context_gap"][-1] < 0) == (b["in_context_gap"][-1] < 0)
