"""The training command line: one process, or one process per device under ``torchrun``.

    python -m playground.training --config nano --data input.txt --steps 500 --out runs/nano
    torchrun --nproc_per_node=4 -m playground.training --config gpt2-small --data input.txt \
        --batch-size 32 --amp bf16 --out runs/small

Under torchrun every process trains on its slice of the same global batch (``--batch-size``, which
must divide by the number of processes) through DistributedDataParallel: NCCL between GPUs (one
GPU per process, ``cuda:LOCAL_RANK``), gloo between CPU processes. Rank 0 alone prints, writes
``log.jsonl`` and the checkpoints; ``--resume`` works with any number of processes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.presets import PRESETS
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import read_checkpoint_metadata
from playground.runtime.devices import CHOICES as DEVICE_CHOICES
from playground.runtime.devices import ENV_VAR as DEVICE_ENV_VAR
from playground.runtime.devices import DeviceError, describe_device, resolve_device
from playground.runtime.machine_memory import default_budget_bytes, format_bytes
from playground.training import induction_run
from playground.training.corpus import prepare_corpus, text_from_upload
from playground.training.head_watch import HeadWatch, probe_batch, probe_period, record_json
from playground.training.train_config import TrainConfig, check_training_memory, estimate_training_memory_bytes
from playground.training.trainer import Trainer, TrainEvent, build_model

HEADS_EVERY = 50
CLI_MAX_CORPUS_BYTES = 512 * 1024 * 1024  # the command line trusts its user more than the web app does
AMP_DTYPES = {"off": "float32", "bf16": "bfloat16"}


def parse_model_config(spec: str) -> GPTConfig:
    """A preset name, a JSON object of GPTConfig fields (``"preset"`` may name a base), or a path to
    a JSON file holding one."""
    if spec in PRESETS:
        return PRESETS[spec]
    text = spec
    if not spec.lstrip().startswith("{"):
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(
                "train.config_spec",
                "--config {spec!r} is neither a preset ({presets}) nor a JSON file.",
                spec=spec,
                presets=", ".join(PRESETS),
            )
        text = path.read_text()
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError("train.config_json", "--config is not valid JSON: {reason}", reason=e) from None
    if not isinstance(fields, dict):
        raise ConfigError("train.config_not_object", "--config JSON must be an object of GPTConfig fields.")
    base = PRESETS.get(fields.pop("preset", None) or "", GPTConfig())
    return GPTConfig.from_dict({**base.to_dict(), **fields})


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m playground.training",
        description="Train a GPT on a text file: in one process, or with DistributedDataParallel in each process "
        "torchrun starts (torchrun --nproc_per_node=N -m playground.training ...).",
    )
    p.add_argument("--config", default=None, help="preset name, JSON object, or JSON file (default nano)")
    p.add_argument("--data", required=True, help="a UTF-8 text file (the last 10%% is held out)")
    p.add_argument("--out", required=True, help="output folder: model.safetensors, model.optim.safetensors, log.jsonl")
    p.add_argument(
        "--resume", action="store_true", help="continue from OUT/model.safetensors (any number of processes)"
    )
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = {"float": float, "int": int}.get(str(f.type).split(" ")[0], str)
        if f.name == "block_size":
            kind = int
        help_text = f"default {getattr(defaults, f.name)!r}"
        if f.name == "batch_size":
            help_text += "; the global batch, split evenly among torchrun's processes"
        p.add_argument(flag, type=kind, default=None, help=help_text)
    p.add_argument(
        "--amp",
        choices=list(AMP_DTYPES),
        default=None,
        help="mixed precision: bf16 runs the forward under bfloat16 autocast (same as --dtype bfloat16)",
    )
    p.add_argument(
        "--device",
        default=None,
        help=f"{', '.join(DEVICE_CHOICES)} or cuda:N (default: ${DEVICE_ENV_VAR}, else auto); "
        f"under torchrun each process takes cuda:LOCAL_RANK",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--save-every", type=int, default=0, help="also checkpoint every N steps (0: only at the end)")
    p.add_argument(
        "--heads-every",
        type=int,
        default=HEADS_EVERY,
        help="measure every head's previous-token, induction and first-token scores and the in-context loss gap "
        "on a fixed probe every N steps, into log.jsonl and heads.json (0: never)",
    )
    p.add_argument(
        "--watch-induction",
        action="store_true",
        help="the Train tab's 'watch an induction head form' run: its tiny model, its mix of the text with "
        "synthetic repeats and its sampled softmax (--config, --steps etc. still override)",
    )
    return p


@dataclasses.dataclass(frozen=True)
class Launch:
    """Where this process trains: its rank among ``world_size`` processes and its device."""

    rank: int
    world_size: int
    local_world_size: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0


def start_processes(device_choice: str | None) -> Launch:
    """Join torchrun's process group (if launched by torchrun) on the right device and backend."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device = resolve_device(device_choice)
    if world_size == 1:
        return Launch(0, 1, 1, device)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise DeviceError(
                "device.rank_no_gpu",
                "Process {local_rank} on this node has no GPU of its own: {count} GPU(s) for --nproc_per_node "
                "processes.",
                local_rank=local_rank,
                count=torch.cuda.device_count(),
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    elif device.type == "cpu":
        backend = "gloo"
    else:
        raise DeviceError(
            "device.multi_process",
            "Training on several {device} processes is not supported; use --device cpu or CUDA GPUs.",
            device=device.type,
        )
    dist.init_process_group(backend=backend)
    return Launch(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_WORLD_SIZE", "1")), device)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        launch = start_processes(args.device)
    except (ValueError, RuntimeError) as e:  # DeviceError, or torch.distributed failing to join
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        return _train(args, launch)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _train(args, launch: Launch) -> int:
    say = print if launch.main else (lambda *a, **k: None)
    overrides = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if getattr(args, f.name) is not None
    }
    if args.amp is not None:
        overrides["dtype"] = AMP_DTYPES[args.amp]
    out = Path(args.out)
    model_path = out / "model.safetensors"
    try:
        text = text_from_upload(args.data, max_bytes=CLI_MAX_CORPUS_BYTES)
        if args.resume:
            if not model_path.is_file():
                raise WeightLoadError(
                    "train.nothing_to_resume", "Nothing to resume: {model_path} does not exist.", model_path=model_path
                )
            meta = read_checkpoint_metadata(model_path)
            tcfg = TrainConfig.from_dict({**json.loads(meta.get("train_config", "{}")), **overrides})
            cfg = GPTConfig.from_dict(json.loads(meta["config"]))
        elif args.watch_induction:
            tcfg = induction_run.train_config().replace(**overrides)
            cfg = parse_model_config(args.config) if args.config else induction_run.MODEL
        else:
            tcfg = TrainConfig(**overrides)
            cfg = parse_model_config(args.config or "nano")
        _check_memory(cfg, tcfg, launch)
        corpus = prepare_corpus(text, tcfg.block_size or cfg.context_length, name=Path(args.data).name)
        extras = induction_run.trainer_extras(corpus, tcfg, cfg) if args.watch_induction else {}
        if args.resume:
            trainer = Trainer.from_checkpoint(model_path, corpus.train_ids, corpus.val_ids, tcfg, device=launch.device)
            trainer.batches, trainer.softmax = extras.get("batches"), extras.get("softmax")
        else:
            model = build_model(cfg, tcfg.seed, device=launch.device)
            trainer = Trainer(model, corpus.train_ids, corpus.val_ids, tcfg, **extras)
        watch = None
        period = probe_period(cfg.context_length)
        if args.heads_every > 0 and launch.main and period:
            watch = HeadWatch(trainer.model, probe_batch(corpus.train_ids, period=period), args.heads_every)
    except (ValueError, OSError) as e:  # ConfigError, CorpusError, WeightLoadError are ValueErrors
        where = f"[rank {launch.rank}] " if launch.world_size > 1 else ""
        print(f"{where}error: {e}", file=sys.stderr)
        return 2
    say(corpus.describe())
    say(f"model: {cfg.to_json()}")
    say(f"training: {tcfg.to_json()}" + (f" (resuming at step {trainer.step_count})" if args.resume else ""))
    if launch.world_size > 1:
        say(
            f"{launch.world_size} processes ({dist.get_backend()}), {trainer.local_batch_size} of the "
            f"{tcfg.batch_size} windows of each batch per process, on {describe_device(launch.device)}"
        )
    else:
        say(f"device: {describe_device(launch.device)}")
    log = None
    if launch.main:
        out.mkdir(parents=True, exist_ok=True)
        log = (out / "log.jsonl").open("a")
    started = time.perf_counter()

    def report(ev: TrainEvent) -> None:
        if not launch.main or log is None:
            return
        log.write(json.dumps(dataclasses.asdict(ev)) + "\n")
        heads = watch(ev) if watch is not None else None
        if heads is not None:
            line = record_json(heads)
            log.write(json.dumps(line) + "\n")
            best = max(range(len(line["induction"])), key=lambda i: max(line["induction"][i]))
            print(
                f"step {ev.step:>6}/{ev.total_steps} | heads: previous-token {heads.previous_token.max():.2f}, "
                f"induction {heads.induction.max():.2f} (layer {best}), in-context gap {heads.gap:+.2f}",
                flush=True,
            )
        if ev.kind == "eval":
            print(f"step {ev.step:>6}/{ev.total_steps} | val loss {ev.val_loss:.4f}", flush=True)
        elif ev.kind == "step" and (ev.step % 10 == 0 or ev.step == 1):
            rate = trainer.tokens_seen / max(trainer.elapsed_s, 1e-9)
            print(
                f"step {ev.step:>6}/{ev.total_steps} | loss {ev.loss:.4f} | lr {ev.lr:.2e} | "
                f"{rate:,.0f} tok/s | {time.perf_counter() - started:,.0f} s",
                flush=True,
            )
        if ev.kind == "step" and args.save_every and ev.step % args.save_every == 0:
            trainer.save(model_path)

    try:
        done = trainer.run(report)
    except KeyboardInterrupt:
        if launch.main:
            print("interrupted: saving what was learned", file=sys.stderr)
        done = None
    finally:
        trainer.save(model_path)  # rank 0 only
        if log is not None:
            log.close()
        if watch is not None and watch.records:
            (out / "heads.json").write_text(json.dumps(watch.timeline()))
    say(
        f"saved {model_path} at step {trainer.step_count}"
        + (f", val loss {done.val_loss:.4f}" if done and done.val_loss is not None else "")
    )
    return 0


def _check_memory(cfg: GPTConfig, tcfg: TrainConfig, launch: Launch) -> None:
    """Each process holds the model, its gradients and AdamW state, and activations for its slice of
    the batch. On CPU the processes of one machine share its RAM; each GPU has its own memory."""
    local = dataclasses.replace(tcfg, batch_size=max(1, tcfg.batch_size // launch.world_size))
    budget = default_budget_bytes(launch.device)  # the GPU's memory when training on one
    sharing = launch.local_world_size if launch.device.type == "cpu" else 1
    if sharing == 1:
        check_training_memory(cfg, local, budget)
        return
    need = sharing * estimate_training_memory_bytes(cfg, local)
    if need > budget:
        raise ConfigError(
            "budget.train_processes",
            "{sharing} training processes on this machine need about {need} together, more than the memory "
            "budget of {budget}. Use fewer processes, or a smaller model or batch.",
            sharing=sharing,
            need=format_bytes(need),
            budget=format_bytes(budget),
        )


if __name__ == "__main__":
    sys.exit(main())
