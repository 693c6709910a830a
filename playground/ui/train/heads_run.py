"""The Train tab's "watch an induction head form" run: the Train handler with that run's model, text and mix.

Its settings are induction_run's (playground.training): the nano model on the bundled fables, 80% of
the rows synthetic repeats, a sampled softmax, and the heads logged every few steps. The tab's own
model, corpus and numbers are left as they are; the run streams the same outputs as Train.
"""

from __future__ import annotations

import gradio as gr

from playground.server.training_inputs import induction_run

from .tab import train_model

MODEL = "nano"


def watch_heads(train_state, state=None, request: gr.Request = None):
    """Train the induction-head run and stream its loss, heads, samples and messages."""
    tcfg = induction_run.train_config()
    yield from train_model(
        train_state,
        MODEL,
        induction_run.CORPUS,
        None,
        None,
        tcfg.steps,
        tcfg.lr,
        tcfg.batch_size,
        state=state,
        request=request,
        watch_induction=True,
    )
