"""AdamW's state beside a checkpoint: every parameter's moments in a second safetensors file, keyed by its name.

``Trainer.save`` writes the model with ``save_checkpoint`` and its optimizer's moments here, next to it
(``optimizer_path``); ``Trainer.load_state`` reads them back into a trainer of the same model.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from playground.engine.weight_layout import WeightLoadError


def optimizer_path(model_path) -> Path:
    model_path = Path(model_path)
    return model_path.with_name(model_path.stem + ".optim.safetensors")


def save_moments(model: torch.nn.Module, optimizer: torch.optim.Optimizer, path, step: int, betas) -> None:
    """``optimizer_path(path)``: the moments of every parameter ``optimizer`` holds state for, with the
    step and the betas in the header; written to a temporary file first, then put in place."""
    names = {id(p): name for name, p in model.named_parameters()}
    tensors = {}
    for p, state in optimizer.state.items():
        for key, value in state.items():  # step, exp_avg, exp_avg_sq
            tensors[f"{names[id(p)]}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    opt_path = optimizer_path(path)
    tmp = opt_path.with_name(opt_path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"step": str(step), "betas": json.dumps(betas)})
    tmp.replace(opt_path)


def load_moments(model: torch.nn.Module, optimizer: torch.optim.Optimizer, path) -> None:
    """The moments saved beside ``path`` into ``optimizer``'s state, on each parameter's device; refused
    unless they are exactly those of ``model``'s parameters."""
    moments = load_file(str(optimizer_path(path)))
    params = dict(model.named_parameters())
    expected = {f"{name}.{key}" for name in params for key in ("step", "exp_avg", "exp_avg_sq")}
    if set(moments) != expected:
        raise WeightLoadError(
            "train.resume_optimizer",
            "{name} does not match this model's parameters.",
            name=optimizer_path(path).name,
        )
    for name, p in params.items():
        optimizer.state[p] = {
            "step": moments[f"{name}.step"].float(),
            "exp_avg": moments[f"{name}.exp_avg"].to(p.device),
            "exp_avg_sq": moments[f"{name}.exp_avg_sq"].to(p.device),
        }
