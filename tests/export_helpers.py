"""Exports and uploads in a private work dir: what tests/unit/test_files.py,
tests/integration/test_big_export.py and tests/app/test_export_serving.py share (not a test module)."""

import json

import torch

from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from playground.server import files
from playground.server.recipes import random_recipe
from playground.server.runs import start_run

NANO = PRESETS["nano"]


def private_dirs(tmp_path, monkeypatch):
    """A private work dir and Gradio cache for one test (the budget never sees /tmp/gradio)."""
    monkeypatch.setenv("PLAYGROUND_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.delenv("PLAYGROUND_EXPORT_DIR", raising=False)
    monkeypatch.delenv("PLAYGROUND_MAX_EXPORT_MB", raising=False)
    monkeypatch.delenv("PLAYGROUND_DISK_BUDGET_GB", raising=False)
    monkeypatch.setattr(files, "_PROTECTORS", [])
    return tmp_path


def strict_json(text):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def nano_model(seed=0):
    torch.manual_seed(seed)
    return GPTModel(NANO).eval()


def small_run(model, n_new=4, prompt="To be, or not to be, that is the question"):
    recipe = random_recipe(model.cfg, seed=0)
    run, gen = start_run(model, recipe, prompt, max_new_tokens=n_new, temperature=1.0, top_k=None, top_p=None, seed=1)
    run.steps.extend(gen)
    return run
