"""Work on a ZeroGPU Space's GPU: ``gpu_work`` is ``spaces.GPU``, a no-op elsewhere, or the identity.

``gpu_work`` is ``spaces.GPU`` where the ``spaces`` package is installed (which returns the function itself
outside a ZeroGPU Space) and the identity where it is not. On a ZeroGPU Space (``runtime.devices.on_zero_gpu``)
CUDA exists only while a decorated function runs, and that function runs in a worker process forked from
the app: its arguments go in and its results come back by pickle, and nothing it changes reaches the app. So the app keeps every model on the CPU (``auto`` is the
CPU there) and a piece of GPU work moves its own copy of the model in (``moved_in``), does the work, and
hands back plain data and CPU tensors (``to_cpu``). Everywhere else the same functions run in the caller's
thread on the model where it is, and nothing moves.

``spaces.GPU`` must wrap a function when its module is imported, before the app launches (ZeroGPU reports
the decorated functions at start), so the work is decorated where it is defined (``gpu_runs.gpu_generation``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

from playground.runtime.devices import on_zero_gpu

MIN_PARAMS_VAR = "PLAYGROUND_GPU_MIN_PARAMS"
# Models below this many parameters stay on the CPU even on ZeroGPU: a room of 30 on the bundled model made
# about 1,000 tok/s on 2 cores (docs/benchmarks.md), while every GPU call waits for a slot and spends the
# visitor's GPU quota. GPT-2 small (124M) and larger take a GPU slot per run (docs/operations.md).
DEFAULT_MIN_PARAMS = 50_000_000

_APP_PID = os.getpid()  # a ZeroGPU worker is forked from the app after this module is imported


@functools.cache
def spaces_package() -> Any | None:
    """The ``spaces`` package, or None where it is not installed (a plain CPU or GPU machine)."""
    try:
        return importlib.import_module("spaces")
    except ImportError:
        return None


def gpu_work(fn: Callable | None = None, *, duration: int | Callable[..., int] | None = None) -> Any:
    """``spaces.GPU(fn, duration=...)`` where ``spaces`` is installed, else ``fn`` itself. Outside a ZeroGPU
    Space ``spaces.GPU`` returns ``fn`` unchanged, so the decorated work runs in the caller's thread.
    ``duration`` (seconds, or a function of the same arguments as ``fn``) is the slot ZeroGPU reserves:
    a visitor whose quota left is below it is refused, and shorter slots are served first."""

    def wrap(f: Callable) -> Callable:
        spaces = spaces_package()
        return f if spaces is None else spaces.GPU(f, duration=duration)

    return wrap(fn) if fn is not None else wrap


def min_params() -> int:
    raw = os.environ.get(MIN_PARAMS_VAR, "").strip()
    return int(raw) if raw.isdigit() else DEFAULT_MIN_PARAMS


def uses_gpu_slots(model) -> bool:
    """Whether ``model``'s runs take a GPU slot: on a ZeroGPU Space with ``spaces`` installed, for a model of
    at least ``PLAYGROUND_GPU_MIN_PARAMS`` parameters (default 50 M). Everything else decodes on the CPU."""
    if not on_zero_gpu() or spaces_package() is None:
        return False
    return sum(p.numel() for p in model.parameters()) >= min_params()


def in_gpu_worker() -> bool:
    """Inside a ZeroGPU worker: a process forked from the app, where the GPU is real while the work runs."""
    return on_zero_gpu() and os.getpid() != _APP_PID


@contextlib.contextmanager
def moved_in(model) -> Iterator[torch.device]:
    """The device the work runs on: CUDA inside a ZeroGPU worker (its copy of ``model`` moved there), else
    where ``model`` already is (nothing moves: the app's model is shared by every session)."""
    if in_gpu_worker() and torch.cuda.is_available():
        model.to("cuda")
        yield torch.device("cuda")
    else:
        yield next(model.parameters()).device


def to_cpu(value):
    """``value`` with every tensor in it on the CPU (through lists, tuples, dicts and dataclasses), so it
    pickles back to the app without CUDA."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, list):
        return [to_cpu(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = copy.copy(value)
        for f in dataclasses.fields(value):
            setattr(out, f.name, to_cpu(getattr(value, f.name)))
        return out
    return value
