"""The Train tab's heads through gradio_client against the running app: a run trained through ``/train``,
its timeline from ``/train_heads`` (steps × layers × heads, JSON) and a logged map from
``/train_heads_map``, checked against the same run trained again in this process (same seed) and
against every head's scores recomputed from its trained model's attention with plain indexing."""

import base64
import json

import numpy as np
import pytest
import torch

from playground import PRESETS
from playground.server.jobs import TrainingJob

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("training_on_every_core")]

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60
STEPS, LR, BATCH = 20, 3e-3, 8


def plain_scores(model, probe: torch.Tensor):
    """[layers, heads] previous-token, induction and first-token scores of ``model`` on ``probe``, read
    off its attention maps by index (the probe: <|endoftext|>, a run of tokens, the run again)."""
    model.eval()
    with torch.no_grad():
        _, trace = model(probe, return_attention=True)
    maps = [m.float().numpy() for m in trace.all_layers()]  # each (rows, heads, T, T)
    T, period = probe.shape[1], (probe.shape[1] - 1) // 2
    t, q = np.arange(1, T), np.arange(period + 1, T)
    prev = np.stack([m[:, :, t, t - 1].mean(axis=(0, 2)) for m in maps])
    first = np.stack([m[:, :, 1:, 0].mean(axis=(0, 2)) for m in maps])
    induction = np.stack([m[:, :, q, q - period + 1].mean(axis=(0, 2)) for m in maps])
    return prev, induction, first, maps


def unpacked(values) -> np.ndarray:
    """A figure's array as sent: a list, or plotly's packed form ({"dtype", "bdata", "shape"})."""
    if isinstance(values, dict):
        flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        return flat.reshape([int(n) for n in str(values.get("shape", len(flat))).split(",")]).astype(float)
    return np.asarray(values, dtype=float)


def test_the_heads_api_returns_the_runs_timeline_and_maps(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    assert client.predict(api_name="/train_heads") == {}  # before any run: nothing, said as an empty timeline
    out = client.predict("nano", "paste", None, TEXT, STEPS, LR, BATCH, api_name="/train")
    assert "Finished after 20 steps" in json.dumps(out, ensure_ascii=False)
    got = client.predict(api_name="/train_heads")
    cfg = PRESETS["nano"]
    steps = got["steps"]
    assert got["done"] and got["total_steps"] == STEPS and steps[0] == 0 and steps[-1] == STEPS
    for key in ("previous_token", "induction", "first_token"):
        assert np.asarray(got[key]).shape == (len(steps), cfg.n_layers, cfg.n_heads), key

    # The same run trained again here: same seed, text and settings, so the same logs.
    job = TrainingJob(cfg, TEXT, "pasted text", steps=STEPS, lr=LR, batch_size=BATCH).start()
    assert job.done.wait(300) and job.error is None
    again = job.watch.timeline()
    assert again["steps"] == steps and again["probe"]["ids"] == got["probe"]["ids"]
    for key in ("previous_token", "induction", "first_token", "in_context_gap"):
        np.testing.assert_allclose(got[key], again[key], atol=2e-3, err_msg=key)
    # ... and its last log recomputed from the trained model's attention, by index.
    probe = torch.tensor(got["probe"]["ids"])
    prev, induction, first, maps = plain_scores(job.trainer.model, probe)
    np.testing.assert_allclose(got["previous_token"][-1], prev, atol=2e-3)
    np.testing.assert_allclose(got["induction"][-1], induction, atol=2e-3)
    np.testing.assert_allclose(got["first_token"][-1], first, atol=2e-3)

    # The scrubber's map at the last step: the probe's first row, as the trained model attends.
    plot, facts = client.predict(STEPS, "1.2", api_name="/train_heads_map")
    figure = json.loads(plot["plot"]) if isinstance(plot, dict) and "plot" in plot else plot
    z = unpacked(figure["data"][0]["z"])
    np.testing.assert_allclose(np.nan_to_num(z), np.tril(maps[1][0, 2]), atol=2e-3)
    assert f"data-step='{STEPS}'" in facts and "data-head='1.2'" in facts
