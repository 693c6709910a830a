"""The default induction run, trained once for the session: its tests (the heads form, the timeline
equals transformers' on saved checkpoints, the recorded timeline is this run) share one 700-step run."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def induction_trained(tmp_path_factory):
    """The default run as the Train tab trains it (with the recorded run's thread count, one), with
    checkpoints in GPT-2's layout at two logged steps: the last log before the phase change could be,
    and the run's end. Returns (the run, the checkpoints' folder, the two steps)."""
    from playground.engine.hf_gpt2 import gpt2_config_dict
    from playground.engine.weights import save_checkpoint
    from playground.training import induction_run

    folder = tmp_path_factory.mktemp("induction")
    tcfg = induction_run.train_config()
    every = induction_run.WATCH_EVERY
    saved_at = (tcfg.steps // 3 // every * every, tcfg.steps)

    def on_log(record, trainer):
        if record.step in saved_at:
            step_folder = folder / f"step{record.step}"
            step_folder.mkdir()
            save_checkpoint(trainer.model, step_folder / "model.safetensors", layout="gpt2")
            (step_folder / "config.json").write_text(json.dumps(gpt2_config_dict(trainer.model.cfg)))

    run = induction_run.train(threads=induction_run.recorded()["run"]["threads"], on_log=on_log)
    return run, folder, saved_at
