"""Replay and share a run: a small record that reproduces it, and the check that it did.

A replay record names the model (its recipe, and a sha256 of its weights so "the same model" means
the same numbers), the prompt's token ids, the sampling settings and the seed the run used, and
what the run produced (token ids, their probabilities and the sampler's uniform draws), with the
torch version and machine it ran on. ``replay`` generates again from it and reports "identical", or
the first step that differs and the likely reason (other weights, another torch, another machine).

Records are JSON. A full run export (exports.export_run, .json or .npz) carries one under "replay",
so either file can be loaded back; ``replay_files`` reads them as untrusted input (sizes checked
before reading, no pickle ever, every field checked by name).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path

import torch

from playground.engine.hf_hub import HUB_MODELS
from playground.engine.model import GPTModel
from playground.engine.sampling import generate
from playground.engine.tokenizer import tokenizer_of
from playground.runtime.memory import BUDGET
from playground.server.decode_loop import LOOP
from playground.server.files import is_inside, work_dir
from playground.server.model_cache import CACHE
from playground.server.recipes import describe_recipe
from playground.server.replay_files import FORMAT, VERSION, ReplayError, check_record, check_settings
from playground.server.replay_files import read_record as read_record  # the files' entry point, kept here
from playground.server.runs import generation_bytes
from playground.whole_numbers import MAX_SEED, MIN_SEED


def weights_sha256(model: GPTModel) -> str:
    """sha256 over the state dict in name order: each name, dtype, shape and the raw bytes. Cached
    on the model until any tensor changes (an in-place update bumps its version)."""
    state = model.state_dict()
    key = tuple((name, t.data_ptr(), t._version, t.dtype) for name, t in sorted(state.items()))
    cached = model.__dict__.get("_weights_sha256")
    if cached is not None and cached[0] == key:
        return cached[1]
    digest = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{str(t.dtype).replace('torch.', '')}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    value = digest.hexdigest()
    model.__dict__["_weights_sha256"] = (key, value)
    return value


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {platform.processor() or 'cpu'}"


def replay_record(run, model: GPTModel) -> dict:
    """Everything needed to reproduce ``run`` (a runs.Run made with ``model``)."""

    steps = run.steps
    settings = run.settings
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": describe_recipe(run.recipe),
        "recipe": run.recipe,
        "weights_sha256": weights_sha256(model),
        "config": model.cfg.to_dict(),
        "prompt": tokenizer_of(model).decode(run.prompt_ids),
        "prompt_ids": list(run.prompt_ids),
        "prompt_tokens_cropped": run.n_cropped,
        "settings": {
            "temperature": settings.get("temperature"),
            "top_k": settings.get("top_k"),
            "top_p": settings.get("top_p"),
            "max_new_tokens": settings.get("max_new_tokens"),
        },
        "seed": settings.get("seed_used", settings.get("seed")),
        "token_ids": [s.token_id for s in steps],
        "probs": [s.prob for s in steps],
        "u": [s.u for s in steps],
        "stopped": bool(run.stopped),
        "torch": torch.__version__,
        "machine": machine(),
    }


def write_record(record: dict, folder: Path) -> Path:
    """The record as ``run-<hash>.replay.json`` in ``folder`` (the same record is written once)."""
    data = json.dumps(record, sort_keys=True, ensure_ascii=False, allow_nan=False).encode()
    path = Path(folder) / f"run-{hashlib.sha256(data).hexdigest()[:16]}.replay.json"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


@dataclass
class ReplayReport:
    identical: bool
    steps: int  # steps compared
    first_difference: dict | None  # {"step", "recorded_token", "replayed_token", "recorded_prob", "replayed_prob"}
    reasons: list[str]  # what differs between the recording and here (weights, torch, machine)
    replayed_ids: list[int] = field(default_factory=list)
    replayed_probs: list[float] = field(default_factory=list)

    def message(self) -> str:
        if self.identical:
            return f"Identical: all {self.steps} steps gave the same tokens with bit-identical probabilities." + (
                f" ({'; '.join(self.reasons)}.)" if self.reasons else ""
            )
        d = self.first_difference
        assert d is not None  # not identical: a step differed
        why = (
            "; ".join(self.reasons)
            if self.reasons
            else ("same weights, torch and machine: the arithmetic itself differed (e.g. another thread count)")
        )
        kind = "token" if d["recorded_token"] != d["replayed_token"] else "probability (same token)"
        return (
            f"Differs from step {d['step']} on ({kind}: recorded id {d['recorded_token']} p={d['recorded_prob']!r}, "
            f"replayed id {d['replayed_token']} p={d['replayed_prob']!r}). Why: {why}."
        )

    def to_dict(self) -> dict:
        return {
            "identical": self.identical,
            "steps": self.steps,
            "first_difference": self.first_difference,
            "reasons": self.reasons,
            "message": self.message(),
            "replayed_token_ids": self.replayed_ids,
        }


def cannot_load(record: dict, detail: Exception) -> ReplayError:
    """The refusal for a record whose weights this server cannot load; ``detail`` says why (a
    ``UserError`` is said in the page's language along with the sentence around it)."""
    return ReplayError(
        "replay.needs_model",
        "This run was made with {model} (weights sha256 {sha}…); this server cannot load those weights "
        "({detail}). Load that model in the Model tab (for an uploaded or trained model: upload its "
        ".safetensors checkpoint), then replay again.",
        model=record.get("model", "another model"),
        sha=record["weights_sha256"][:16],
        detail=detail,
    )


def replay(record: dict, model: GPTModel, *, shared: bool = False) -> ReplayReport:
    """Generate again with ``model`` and compare with the record, step by step. ``shared``: the steps
    are made by the server's decode loop beside every other learner's run (a long replay never holds
    the CPU for its whole length); else in the calling thread."""
    record = check_record(record)
    cfg = model.cfg
    if max(record["prompt_ids"] + record["token_ids"]) >= cfg.vocab_size:
        raise cannot_load(
            record,
            ReplayError(
                "replay.vocab",
                "its tokens do not fit this model's vocabulary of {vocab_size:,}",
                vocab_size=cfg.vocab_size,
            ),
        )
    sampling = check_settings(record["settings"], record["seed"])  # typed: the record was checked above
    need = generation_bytes(model, len(record["prompt_ids"]))
    what = f"a replay of {len(record['token_ids']):,} tokens"
    BUDGET.check(need, what)
    gen = generate(
        model,
        record["prompt_ids"],
        max_new_tokens=len(record["token_ids"]),
        temperature=sampling.temperature,
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        seed=sampling.seed,
    )
    BUDGET.register(gen, need, what, "generation")
    reasons = []
    here = weights_sha256(model)
    if here != record["weights_sha256"]:
        reasons.append(
            f"other weights: the run used sha256 {record['weights_sha256'][:16]}…, this model is "
            f"{here[:16]}… ({_excerpt(record.get('model', '?'))} was asked for)"
        )
    if record.get("torch") and record["torch"] != torch.__version__:
        reasons.append(f"other torch: recorded with {_excerpt(record['torch'])}, replayed with {torch.__version__}")
    if record.get("machine") and record["machine"] != machine():
        reasons.append(f"other machine: recorded on {_excerpt(record['machine'])}, replayed on {machine()}")
    first = None
    ids, probs = [], []
    stream = LOOP.steps(gen) if shared else None  # closed at the end: the run leaves the loop
    steps = stream if stream is not None else iter(gen)
    with contextlib.closing(stream) if stream is not None else contextlib.nullcontext():
        for want_id, want_p in zip(record["token_ids"], record["probs"]):
            step = next(steps)
            ids.append(step.token_id)
            probs.append(step.prob)
            if first is None and (step.token_id != want_id or step.prob != want_p):
                first = {
                    "step": step.index,
                    "recorded_token": want_id,
                    "replayed_token": step.token_id,
                    "recorded_prob": want_p,
                    "replayed_prob": step.prob,
                }
            if first is not None and step.token_id != want_id:
                break  # after a different token the two runs continue from different texts
    return ReplayReport(first is None, len(ids), first, reasons, ids, probs)


def _excerpt(value, limit: int = 80) -> str:
    """A value from the file as the report shows it: at most ``limit`` characters."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def model_for(record: dict, current: tuple | None = None) -> tuple[GPTModel, dict]:
    """(model, recipe) to replay ``record`` with: the session's ``current`` (model, recipe) when its
    weights are the recorded ones (e.g. the same checkpoint uploaded again), else the recorded recipe
    built through the shared cache (and the memory budget). A recipe naming a file outside this
    server's own folders, or weights it cannot get, is refused with a message naming the weights."""
    record = check_record(record)
    if current is not None and weights_sha256(current[0]) == record["weights_sha256"]:
        return current
    recipe = record["recipe"]
    kind = recipe.get("kind") if isinstance(recipe, dict) else None
    if kind not in ("random", "bundled", "hub", "file") or recipe.get("dtype", "float32") not in (
        "float32",
        "bfloat16",
    ):
        raise cannot_load(record, ReplayError("replay.unknown_model", "the file names no model this app knows"))
    seed = recipe.get("seed")
    exact_seed = isinstance(seed, int) and not isinstance(seed, bool) and MIN_SEED <= seed <= MAX_SEED
    if kind == "random" and not (isinstance(recipe.get("config"), dict) and exact_seed):
        # The recipe's seed names its weights: 2.7 or a float past 2⁵³ is not truncated into another model.
        raise cannot_load(
            record,
            ReplayError(
                "replay.random_recipe",
                "its random weights need a config object and a whole seed from 0 to 2⁶³ − 1, got seed {seed!r}",
                seed=seed,
            ),
        )
    if kind == "hub" and recipe.get("repo") not in HUB_MODELS.values():
        raise cannot_load(
            record,
            ReplayError(
                "replay.unknown_hub", "{repo!r} is not one of the hub models it offers", repo=recipe.get("repo")
            ),
        )
    if kind == "file":
        path = Path(str(recipe.get("path", "")))
        # Only checkpoints this server wrote or received (never an arbitrary path from a file).
        if not (is_inside(path, work_dir()) and path.is_file()):
            raise cannot_load(
                record,
                ReplayError(
                    "replay.checkpoint_missing",
                    "the checkpoint {label!r} is not on this server",
                    label=recipe.get("label", "file"),
                ),
            )
    try:
        return CACHE.get(recipe), recipe
    except MemoryError:
        raise
    except Exception as e:  # a config it refuses, weights it cannot download, ...
        raise cannot_load(record, e) from None
