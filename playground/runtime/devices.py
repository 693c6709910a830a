"""Which device runs the models: ``PLAYGROUND_DEVICE=auto|cpu|cuda|mps`` (``cuda:N`` picks a GPU).

``auto`` (the default) takes CUDA if a GPU is usable, then Apple's MPS, then the CPU. An explicit
choice that this machine cannot honour is an error that says why, never a silent fall-back to the
CPU: a teacher who asked for the GPU should learn at once that the Space has none.

The app, the library's loaders (``load_checkpoint``, ``load_pretrained``) and training all call
``default_device()``, which resolves the variable once per process (``default_device.cache_clear()``
re-reads it). Models are always *initialised* on the CPU from a seeded ``torch.Generator`` and then
moved, so a seed gives the same weights on every device.

On a ZeroGPU Space (``SPACES_ZERO_GPU=true``, set by Hugging Face) the app's process has no GPU of its own:
CUDA exists only inside a function decorated with ``spaces.GPU``, which runs in a worker process (and the
``spaces`` package makes ``torch.cuda.is_available()`` say True everywhere). There ``auto`` is the CPU and
an explicit ``cuda`` is refused with that reason; the GPU work moves its model in (``server.gpu``).
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch

from playground.errors import UserError

ENV_VAR = "PLAYGROUND_DEVICE"
CHOICES = ("auto", "cpu", "cuda", "mps")
ZERO_GPU_VAR = "SPACES_ZERO_GPU"  # what Hugging Face sets on a ZeroGPU Space (the ``spaces`` package reads it too)


class DeviceError(UserError):
    """A device was asked for that this machine does not have; the message says what to do."""


def cuda_available() -> bool:
    return torch.cuda.is_available()


def mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def on_zero_gpu() -> bool:
    """Whether this process is a ZeroGPU Space's app (read as the ``spaces`` package reads it)."""
    return os.environ.get(ZERO_GPU_VAR, "").strip().lower() in ("1", "t", "true")


def resolve_device(choice: str | torch.device | None = None) -> torch.device:
    """The device ``choice`` names (default: ``$PLAYGROUND_DEVICE``, else "auto"), checked against
    what this machine has. Probes the hardware on every call; ``default_device()`` caches."""
    if isinstance(choice, torch.device):
        choice = str(choice)
    raw = (choice if choice is not None else os.environ.get(ENV_VAR, "")).strip().lower() or "auto"
    kind, _, index = raw.partition(":")
    if kind not in CHOICES or (index and (kind != "cuda" or not index.isdigit())):
        where = f"{ENV_VAR}={raw!r}" if choice is None else f"device {raw!r}"
        raise DeviceError(
            "device.unknown",
            "{where} is not a device: use one of {choices} (or cuda:N for GPU N).",
            where=where,
            choices=", ".join(CHOICES),
        )
    if on_zero_gpu() and kind in ("auto", "cuda"):
        if kind == "cuda":
            raise DeviceError(
                "device.zero_gpu",
                "{raw} was asked for on a ZeroGPU Space, where CUDA exists only inside the app's GPU work "
                "(which moves its model to the GPU and back itself). Set {env}=auto (the CPU between GPU "
                "work) or cpu.",
                raw=raw,
                env=ENV_VAR,
            )
        return torch.device("cpu")
    if kind == "auto":
        if cuda_available():
            return torch.device("cuda")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if kind == "cuda":
        if not cuda_available():
            build = "a CPU-only build of PyTorch" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
            raise DeviceError(
                "device.no_cuda",
                "CUDA was asked for ({raw}) but no usable GPU was found (PyTorch {torch}, {build}). Check "
                "nvidia-smi and that the CUDA build of torch is installed, or set {env}=auto or cpu.",
                raw=raw,
                torch=torch.__version__,
                build=build,
                env=ENV_VAR,
            )
        if index and int(index) >= torch.cuda.device_count():
            raise DeviceError(
                "device.no_such_gpu",
                "{raw} does not exist: this machine has {count} GPU(s), numbered from 0.",
                raw=raw,
                count=torch.cuda.device_count(),
            )
        return torch.device(raw)
    if kind == "mps":
        if not mps_available():
            raise DeviceError(
                "device.no_mps",
                "MPS (Apple GPU) was asked for but is not available here. Set {env}=auto or cpu.",
                env=ENV_VAR,
            )
        return torch.device("mps")
    return torch.device("cpu")


@functools.cache
def default_device() -> torch.device:
    """``resolve_device()`` of the environment, resolved once per process."""
    return resolve_device()


def describe_device(device: torch.device | str) -> str:
    """ "CPU", "CUDA GPU 0 (NVIDIA A10G)", "Apple GPU (MPS)": for the summary line and logs."""
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        try:
            name = torch.cuda.get_device_name(index)
        except Exception:  # a probe failing must never break a summary line
            name = "unknown"
        return f"CUDA GPU {index} ({name})"
    if device.type == "mps":
        return "Apple GPU (MPS)"
    return device.type.upper()


def device_memory_bytes(device: torch.device | str) -> int | None:
    """Total memory of an accelerator (bytes), or None for the CPU (and for MPS, whose memory is
    the machine's RAM)."""
    device = torch.device(device)
    if device.type == "cuda":
        _free, total = torch.cuda.mem_get_info(device)
        return int(total)
    return None


def autocast(device: torch.device | str, dtype: str):
    """bfloat16 autocast on ``device`` for ``dtype == "bfloat16"``, else a no-op context."""
    if dtype != "bfloat16":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
