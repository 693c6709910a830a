"""Replay and share a run: a small record that reproduces it, and the check that it did.

A replay record names the model (its recipe, and a sha256 of its weights so "the same model" means
the same numbers), the prompt's token ids, the sampling settings and the seed the run used, and
what the run produced (token ids, their probabilities and the sampler's uniform draws), with the
torch version and machine it ran on. ``replay`` generates again from it and reports "identical", or
the first step that differs and the likely reason (other weights, another torch, another machine).

Records are JSON. A full run export (exports.export_run, .json or .npz) carries one under "replay",
so either file can be loaded back. No pickle is ever read (.npz members load with
``allow_pickle=False``).
"""

from __future__ import annotations

import hashlib
import json
import platform
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from playground.engine.hf_hub import HUB_MODELS
from playground.engine.model import GPTModel
from playground.engine.sampling import generate
from playground.engine.tokenizer import load_tokenizer
from playground.errors import UserError
from playground.server.files import is_inside, work_dir
from playground.server.model_cache import CACHE
from playground.server.recipes import describe_recipe

FORMAT = "gpt-playground-replay"
VERSION = 1
MAX_REPLAY_JSON_BYTES = 50_000_000  # a replay record is a few KB; a full .json export with attention can be huge


class ReplayError(UserError):
    """A replay file that cannot be replayed here; the message says why and what to do."""


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
        "prompt": load_tokenizer().decode(run.prompt_ids),
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


def read_record(path) -> dict:
    """A replay record from a replay file or a full run export (.json or .npz)."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError("replay.missing", "The replay file is missing; upload it again.")
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf, zf.open("metadata.npy") as member:
                meta = json.loads(str(np.lib.format.read_array(member, allow_pickle=False)))
        except (KeyError, ValueError, OSError, zipfile.BadZipFile) as e:
            raise ReplayError("replay.npz", "This .npz is not a run export of this app ({reason}).", reason=e) from None
    else:
        size = path.stat().st_size
        if size > MAX_REPLAY_JSON_BYTES:
            raise ReplayError(
                "replay.too_big",
                "This file is {mb:,.0f} MB; a replay file is a few KB. Export the run's replay file (or a .npz "
                "export) and load that.",
                mb=size / 1000000.0,
            )
        try:
            meta = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ReplayError(
                "replay.not_json", "This file is not a replay file (it is not JSON: {reason}).", reason=e
            ) from None
    return check_record(meta.get("replay", meta) if isinstance(meta, dict) else meta)


def check_record(record) -> dict:
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ReplayError(
            "replay.no_record",
            "This file is not a replay file or run export of GPT Playground (no replay record in it).",
        )
    if record.get("version") != VERSION:
        raise ReplayError(
            "replay.version",
            "This replay file is version {version!r}; this app reads version {supported}.",
            version=record.get("version"),
            supported=VERSION,
        )
    need = ("recipe", "weights_sha256", "prompt_ids", "settings", "seed", "token_ids", "probs")
    missing = [k for k in need if k not in record]
    if missing:
        raise ReplayError("replay.lacks", "The replay record lacks {fields}.", fields=", ".join(missing))
    ids, tokens = record["prompt_ids"], record["token_ids"]
    if not (isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids)):
        raise ReplayError("replay.prompt_ids", "The replay record's prompt_ids must be a non-empty list of token ids.")
    if not (isinstance(tokens, list) and tokens and all(isinstance(i, int) for i in tokens)):
        raise ReplayError("replay.no_tokens", "The replay record has no generated tokens to compare with.")
    if not isinstance(record["seed"], int):
        raise ReplayError("replay.seed", "The replay record's seed must be a whole number.")
    return record


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


def replay(record: dict, model: GPTModel, *, step_lock=None) -> ReplayReport:
    """Generate again with ``model`` and compare with the record, step by step. ``step_lock`` (a
    context manager) is held around each decode step only, so a long replay interleaves with
    other users' generations instead of holding the CPU for its whole length."""
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
    s = record["settings"]
    gen = generate(
        model,
        record["prompt_ids"],
        max_new_tokens=len(record["token_ids"]),
        temperature=float(s.get("temperature") or 0.0),
        top_k=s.get("top_k") or None,
        top_p=s.get("top_p"),
        seed=record["seed"],
    )
    reasons = []
    here = weights_sha256(model)
    if here != record["weights_sha256"]:
        reasons.append(
            f"other weights: the run used sha256 {record['weights_sha256'][:16]}…, this model is "
            f"{here[:16]}… ({record.get('model', '?')} was asked for)"
        )
    if record.get("torch") and record["torch"] != torch.__version__:
        reasons.append(f"other torch: recorded with {record['torch']}, replayed with {torch.__version__}")
    if record.get("machine") and record["machine"] != machine():
        reasons.append(f"other machine: recorded on {record['machine']}, replayed on {machine()}")
    first = None
    ids, probs = [], []
    steps = iter(gen)
    for want_id, want_p in zip(record["token_ids"], record["probs"]):
        if step_lock is not None:
            with step_lock:
                step = next(steps)
        else:
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
