"""Training: AdamW, linear warm-up then cosine decay, gradient clipping, held-out validation loss.

``Trainer`` is built to be driven step by step (a UI thread calls ``step()`` / ``evaluate()``, or
``run()`` with a callback and a stop flag), and every random choice is a function of the seed and
the step number, so the same seed gives the same losses and a resumed run continues exactly where
the saved one stopped. Checkpoints are safetensors only: the model with ``save_checkpoint`` and,
next to it, the optimizer's moments as a second safetensors file (``optimizer_state``).

Run inside a ``torch.distributed`` process group (``torchrun``), the same ``Trainer`` trains with
DistributedDataParallel: every rank draws the same global batch of ``batch_size`` windows and
trains on its own slice of it, DDP averages the gradients, so N processes follow the curve of one
process with the same global batch (up to float rounding; dropout masks differ per rank). Only
rank 0 writes checkpoints. A checkpoint holds the global step and nothing rank-specific, so a run
can resume on a different number of processes.

The command line lives in cli.py:

    python -m playground.training --config "nano" --data input.txt --steps 500 --out runs/nano
    torchrun --nproc_per_node=4 -m playground.training --data input.txt --steps 500 --out runs/nano
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.memory_check import check_fits
from playground.engine.model import GPTModel
from playground.engine.sizes import check_build_size
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import load_checkpoint, read_checkpoint_metadata, save_checkpoint
from playground.runtime.devices import autocast, default_device, resolve_device
from playground.runtime.memory import BUDGET
from playground.training import chunked_loss
from playground.training.corpus import CorpusError, check_corpus_length
from playground.training.losses import evaluate_loss, evaluation_starts, loss_sums
from playground.training.optimizer_state import load_moments, save_moments
from playground.training.sampled_softmax import SampledSoftmax
from playground.training.train_config import TrainConfig, lr_at

ADAMW_BETAS = (0.9, 0.95)  # nanoGPT / GPT-3: a shorter second-moment memory than Adam's 0.999


def _step_seed(seed: int, step: int) -> int:
    # A different, reproducible stream for every step: resuming at step k needs no saved RNG state.
    return (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + 1) % (2**63)


def build_model(cfg: GPTConfig, seed: int = 1337, memory_budget: int | None = None, device=None) -> GPTModel:
    """A freshly initialised model whose weights depend only on ``seed`` (drawn on the CPU from a
    generator of its own: torch's global one, which other users' sampling may use, is never
    touched), then moved to ``device`` (default: ``PLAYGROUND_DEVICE``, see playground.runtime.devices).

    Refused before anything is allocated: a config over ``memory_budget`` bytes (default: the
    process-wide budget, and what is free in it now) or over the build size caps."""
    check_fits(cfg, "float32", BUDGET if memory_budget is None else memory_budget)
    check_build_size(cfg)
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(seed))
    return model.to(resolve_device(device) if device is not None else default_device())


# ----------------------------------------------------------------------------------------------
# The trainer


@dataclass(frozen=True)
class TrainEvent:
    """What ``Trainer.run`` reports: kind is "step", "eval" or "done"."""

    kind: str
    step: int  # updates done so far
    total_steps: int
    loss: float | None = None  # training loss of the batch of this step
    lr: float | None = None
    val_loss: float | None = None
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    stopped: bool = False  # on "done": True when should_stop() ended the run early

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps)


class Trainer:
    """Trains ``model`` in place on ``train_ids`` and reports the loss on ``val_ids``.

    ``step()`` does one update and returns dict(step, loss, lr, grad_norm); ``evaluate()`` returns
    the validation loss on fixed windows; ``run()`` loops to ``tcfg.steps``. ``step_count`` is the
    number of updates done, including those of a resumed checkpoint.

    Created inside an initialised ``torch.distributed`` process group, it trains the model wrapped
    in DistributedDataParallel: ``tcfg.batch_size`` is the *global* batch (it must divide evenly
    among the ranks), each rank runs its slice of it, the reported loss, gradient norm, tokens and
    validation loss are those of the whole batch, and ``save`` writes on rank 0 only. Every rank
    must call ``step``/``evaluate``/``run`` in the same order (they are collective).
    """

    def __init__(
        self,
        model: GPTModel,
        train_ids,
        val_ids,
        tcfg: TrainConfig | None = None,
        *,
        batches: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]] | None = None,
        softmax: SampledSoftmax | None = None,
    ):
        self.tcfg = tcfg or TrainConfig()
        # ``batches(batch_size, seed)``: the global batch of a step when the windows of the text are
        # not the data (a mix with synthetic repeats: repeats.RepeatBatches); ``softmax``: a loss over
        # part of the vocabulary (sampled_softmax). Neither is saved in a checkpoint: a resumed run is
        # given them again.
        self.batches, self.softmax = batches, softmax
        self.model = model
        self.block_size = self.tcfg.block_size or model.cfg.context_length
        if self.block_size > model.cfg.context_length:
            raise ConfigError(
                "train.block_size",
                "block_size ({block_size}) exceeds the model's context_length ({context_length}).",
                block_size=self.block_size,
                context_length=model.cfg.context_length,
            )
        if model.dtype != torch.float32:
            model.float()  # AdamW needs float32 master weights; half-precision updates underflow
        device = model.device
        self.rank, self.world_size = (dist.get_rank(), dist.get_world_size()) if _distributed() else (0, 1)
        if self.tcfg.batch_size % self.world_size:
            raise ConfigError(
                "train.batch_split",
                "The batch of {batch_size} windows cannot be split evenly among {world_size} processes: make "
                "batch_size a multiple of the number of processes.",
                batch_size=self.tcfg.batch_size,
                world_size=self.world_size,
            )
        self.local_batch_size = self.tcfg.batch_size // self.world_size
        # The output head inside the loss (chunked_loss): a float32 step on the CPU over the whole vocabulary,
        # where the batch's logits are most of the step's memory traffic. Anything else: F.cross_entropy.
        self.head_in_loss = self.softmax is None and chunked_loss.takes(model, self.tcfg.dtype)
        self.train_ids = torch.as_tensor(train_ids, dtype=torch.long).flatten().to(device)
        self.val_ids = torch.as_tensor(val_ids, dtype=torch.long).flatten().to(device)
        check_corpus_length(self.train_ids, self.val_ids, self.block_size)
        for name, ids in (("training", self.train_ids), ("validation", self.val_ids)):
            if int(ids.min()) < 0 or int(ids.max()) >= model.cfg.vocab_size:
                raise CorpusError(
                    "train.ids_outside",
                    "The {name} tokens contain ids outside the vocabulary of {vocab_size}.",
                    name=name,
                    vocab_size=model.cfg.vocab_size,
                )
        self.optimizer = self._make_optimizer()
        # What the forward/backward of a step runs: DDP averages the gradients across ranks during
        # backward (and broadcast rank 0's weights when it was made, so every rank starts equal).
        self.train_model: torch.nn.Module = model  # DDP's wrapper under torchrun
        if self.world_size > 1:
            # Each process measures its own fastest decode layout (playground.runtime.kernels), so two ranks
            # can hold the same weight with different strides, which DDP refuses; the layout only
            # matters for one-row decoding, so train on plain contiguous weights everywhere.
            with torch.no_grad():
                for p in model.parameters():
                    if not p.is_contiguous():
                        p.data = p.data.contiguous()
            self.train_model = DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
        self.step_count = 0
        self.tokens_seen = 0
        self.elapsed_s = 0.0  # training time, summed over sessions of a resumed run
        self.history: list[dict] = []  # one dict(step, loss, lr, grad_norm) per update
        self.val_history: list[tuple[int, float]] = []  # (step, val_loss)

    def _make_optimizer(self) -> torch.optim.AdamW:
        # Weight decay on matrices (incl. the embedding) only: decaying biases and LayerNorm gains
        # towards 0 just fights the normalisation.
        decay: list[torch.nn.Parameter] = []
        no_decay: list[torch.nn.Parameter] = []
        for _name, p in self.model.named_parameters():  # a tied weight is listed once
            (decay if p.dim() >= 2 else no_decay).append(p)
        groups = [
            {"params": decay, "weight_decay": self.tcfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=self.tcfg.lr, betas=self.betas, eps=1e-8)

    @property
    def betas(self) -> tuple[float, float]:
        return (ADAMW_BETAS[0], self.tcfg.beta2)

    def get_batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets (batch_size / world_size, block_size) for update ``step``: this rank's
        consecutive slice of the global batch of random windows, whose positions depend only on
        (seed, step) -- not on the number of processes, so a resumed run continues the same data."""
        if self.batches is not None:
            x, y = self.batches(self.tcfg.batch_size, _step_seed(self.tcfg.seed, step))
            rows = slice(self.rank * self.local_batch_size, (self.rank + 1) * self.local_batch_size)
            device = self.train_ids.device
            return x[rows, : self.block_size].to(device), y[rows, : self.block_size].to(device)
        gen = torch.Generator().manual_seed(_step_seed(self.tcfg.seed, step))
        starts = torch.randint(len(self.train_ids) - self.block_size, (self.tcfg.batch_size,), generator=gen)
        starts = starts.view(self.world_size, self.local_batch_size)[self.rank]
        offsets = torch.arange(self.block_size + 1)
        window = self.train_ids[(starts[:, None] + offsets).to(self.train_ids.device)]  # (B, block_size + 1)
        return window[:, :-1], window[:, 1:]

    @contextlib.contextmanager
    def _dropout_rng(self, step: int):
        """Dropout draws from the global RNG (of the model's device): fork it so that the masks
        depend on (seed, rank, step) only and the caller's random state is left as it was."""
        if self.model.cfg.drop_rate == 0:
            yield
            return
        device = self.model.device
        if device.type == "cpu":
            forked = torch.random.fork_rng(devices=[])
        else:  # a GPU's dropout draws from that device's generator
            forked = torch.random.fork_rng(devices=[device.index or 0], device_type=device.type)
        with forked:
            torch.manual_seed(_step_seed(self.tcfg.seed + 1 + self.rank, step))
            yield

    def step(self) -> dict:
        started = time.perf_counter()
        step = self.step_count
        lr = lr_at(step, self.tcfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.get_batch(step)
        self.model.train()
        if self.softmax is not None:  # the output rows of this step: the known tokens and a fresh draw
            gen = torch.Generator().manual_seed(_step_seed(self.tcfg.seed + 2, step))
            output_rows = self.softmax.rows(gen).to(x.device)
            with self._dropout_rng(step), autocast(self.model.device, self.tcfg.dtype):
                logits = self.train_model(x, output_rows=output_rows)  # (B, T, known + drawn)
            loss = self.softmax.loss(logits, y)
        elif self.head_in_loss:
            with self._dropout_rng(step):
                hidden = self.train_model(x, return_hidden=True)  # (B, T, emb_dim): the head is the loss's
            loss = chunked_loss.linear_cross_entropy(hidden.flatten(0, 1), self.model.out_head.weight, y.flatten())
        else:
            with self._dropout_rng(step), autocast(self.model.device, self.tcfg.dtype):
                logits = self.train_model(x)  # (B, T, vocab)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
        # The whole batch's loss (the mean of the ranks' equal slices), known to every rank, so that
        # all of them stop together on a diverged run instead of waiting for each other.
        batch_loss = float(self._all_sum(loss.detach().clone())) / self.world_size
        if not math.isfinite(batch_loss):
            raise FloatingPointError(
                f"The loss became {batch_loss} at step {step + 1}: training diverged. Lower the learning rate."
            )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = None
        if self.tcfg.grad_clip > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tcfg.grad_clip))
        self.optimizer.step()
        self.step_count += 1
        self.tokens_seen += x.numel() * self.world_size  # every rank ran an equal slice
        self.elapsed_s += time.perf_counter() - started
        record = {"step": self.step_count, "loss": batch_loss, "lr": lr, "grad_norm": grad_norm}
        self.history.append(record)
        return record

    def evaluate(self, n_windows: int | None = None) -> float:
        """Validation loss on fixed, evenly spaced windows (eval_batches × batch_size of them)."""
        n = n_windows or self.tcfg.eval_batches * self.tcfg.batch_size
        if self.world_size == 1:
            val = evaluate_loss(self.model, self.val_ids, self.block_size, n, self.tcfg.batch_size, self.tcfg.dtype)
        else:  # every rank scores every world_size-th window; the sums are added up across ranks
            starts = evaluation_starts(len(self.val_ids), self.block_size, n)[self.rank :: self.world_size]
            total, count = loss_sums(
                self.model, self.val_ids, starts, self.block_size, self.local_batch_size, self.tcfg.dtype
            )
            sums = self._all_sum(torch.tensor([total, count], dtype=torch.float64))
            val = float(sums[0] / sums[1])
        self.val_history.append((self.step_count, val))
        return val

    def _all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks (itself when training in one process)."""
        if self.world_size == 1:
            return tensor
        tensor = tensor.to(self.model.device)  # NCCL reduces GPU tensors only
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.cpu()

    def run(
        self,
        callback: Callable[[TrainEvent], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> TrainEvent:
        """Train up to ``tcfg.steps`` updates. ``callback`` gets a TrainEvent after every step, every
        evaluation and at the end; when ``should_stop()`` turns true the loop ends after the current
        step, with everything learned so far kept in the model. Returns the "done" event."""
        notify = callback or (lambda event: None)
        stop = should_stop or (lambda: False)
        total = self.tcfg.steps

        def event(kind, **kw) -> TrainEvent:
            return TrainEvent(
                kind, self.step_count, total, tokens_seen=self.tokens_seen, elapsed_s=self.elapsed_s, **kw
            )

        if self.step_count == 0 and not self.val_history:  # the curve's starting point
            notify(event("eval", val_loss=self.evaluate()))
        stopped = False
        while self.step_count < total:
            if stop():
                stopped = True
                break
            record = self.step()
            notify(event("step", loss=record["loss"], lr=record["lr"]))
            if self.step_count % self.tcfg.eval_interval == 0 or self.step_count == total:
                notify(event("eval", val_loss=self.evaluate()))
        last_val = self.val_history[-1][1] if self.val_history else None
        last_loss = self.history[-1]["loss"] if self.history else None
        done = event("done", loss=last_loss, val_loss=last_val, stopped=stopped)
        notify(done)
        return done

    def snapshot_model(self) -> GPTModel:
        """A copy of the model in eval mode, safe to hand to Generate while training continues."""
        return copy.deepcopy(self.model).eval()

    # -- checkpoints ------------------------------------------------------------------------------

    def save(self, path) -> Path:
        """``path`` (model, float32, with config, step and train config in the header) and
        ``optimizer_path(path)`` (the AdamW moments, keyed by parameter name). Under
        torch.distributed only rank 0 writes (every rank holds the same weights and moments)."""
        path = Path(path)
        if self.rank != 0:
            return path
        meta = {
            "step": self.step_count,
            "tokens_seen": self.tokens_seen,
            "elapsed_s": round(self.elapsed_s, 3),
            "train_config": self.tcfg.to_dict(),
            "val_history": self.val_history,
            "processes": self.world_size,  # of the last session; resuming may use any number
        }
        save_checkpoint(self.model, path, metadata=meta)
        save_moments(self.model, self.optimizer, path, self.step_count, self.betas)
        return path

    def load_state(self, path) -> None:
        """Continue from a checkpoint written by ``save``: the weights, the AdamW moments and the step
        count. The model's config must be the checkpoint's."""
        path = Path(path)
        saved = load_checkpoint(path, device=self.model.device, max_bytes=None)
        if saved.cfg != self.model.cfg:
            raise WeightLoadError(
                "train.resume_config",
                "The checkpoint was trained with a different model config; it cannot be resumed here.",
            )
        self.model.load_state_dict(saved.state_dict())
        meta = saved.checkpoint_metadata
        load_moments(self.model, self.optimizer, path)
        self.step_count = int(meta.get("step", 0))
        self.tokens_seen = int(meta.get("tokens_seen", 0))
        self.elapsed_s = float(meta.get("elapsed_s", 0.0))
        self.val_history = [tuple(v) for v in json.loads(meta.get("val_history", "[]"))]

    @classmethod
    def from_checkpoint(cls, path, train_ids, val_ids, tcfg: TrainConfig | None = None, *, device=None) -> Trainer:
        """A trainer that resumes ``path`` on ``device`` (default: ``PLAYGROUND_DEVICE``); ``tcfg``
        defaults to the train config stored in it."""
        meta = read_checkpoint_metadata(path)
        if tcfg is None:
            tcfg = TrainConfig.from_dict(json.loads(meta.get("train_config", "{}")))
        model = load_checkpoint(path, max_bytes=None, device=device)
        trainer = cls(model, train_ids, val_ids, tcfg)
        trainer.load_state(path)
        return trainer


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()
