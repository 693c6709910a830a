"""The Train tab's heads: every run logs its heads' scores, the curves are drawn live, the API returns
the timeline as JSON, and the scrubber draws a logged step's map and sample."""

import json

import numpy as np
import pytest

from playground.server.jobs import JOBS
from playground.ui.train import heads_view as view
from playground.ui.train import tab as train_tab

pytestmark = pytest.mark.usefixtures("training_on_every_core")

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60


def test_a_run_logs_its_heads_and_the_scrubber_reads_them():
    outs = list(train_tab.train_model({"job": None, "recipe": None}, "nano", "paste", None, TEXT, 20, 3e-3))
    last = train_tab.Trained(*outs[-1])
    assert "Finished after 20 steps" in last.msg
    assert last.train_state["job"] not in JOBS  # the job is gone; its heads are kept
    curves = last.heads_plot
    names = {t.name for t in curves.data}
    assert {f"L{layer} H{head}" for layer in range(2) for head in range(4)} <= names
    slider, pick, row = view.scrubber_for("nano", 20)  # set when Train is pressed
    assert row["visible"] is True  # the heads' row is hidden until a run starts
    assert slider["maximum"] == 20 and slider["step"] == 1
    assert [c[1] for c in pick["choices"]] == [f"{layer}.{head}" for layer in range(2) for head in range(4)]
    assert pick["value"] == "0.0"  # a head is picked, so the map shows without a pick

    timeline = view.timeline_api(last.train_state)
    json.dumps(timeline)
    every = timeline["every"]
    assert timeline["steps"] == [*range(0, 20, every), 20] if 20 % every else list(range(0, 21, every))
    assert np.asarray(timeline["induction"]).shape == (len(timeline["steps"]), 2, 4)
    assert timeline["done"] and timeline["total_steps"] == 20
    assert (
        "logged at every step" in curves.layout.title.text
        if every == 1
        else f"every {every} steps" in curves.layout.title.text
    )

    fig0, facts0 = view.scrub_view(last.train_state, 0, "1.2")
    fig1, facts1 = view.scrub_view(last.train_state, 20, "1.2")
    assert "data-step='0'" in facts0 and "data-step='20'" in facts1
    z0, z1 = np.asarray(fig0.data[0].z, dtype=float), np.asarray(fig1.data[0].z, dtype=float)
    assert z0.shape == z1.shape == (33, 33)  # the probe's first row: <|endoftext|> and 16 tokens said twice
    assert not np.allclose(np.nan_to_num(z0), np.nan_to_num(z1))
    assert "pg-heads-sample" in facts1  # what the model wrote at that step


def test_before_any_run_the_views_say_what_will_come():
    assert view.timeline_api({"job": None}) == {}
    fig, text = view.scrub_view({"job": None}, 0, None)
    assert text == "" and "Head scores appear here" in fig.layout.annotations[0].text
