"""The machine's memory and the process's: RAM and GPU sizes, the default budget, resident size, trim.

The memory budget's default size (``PLAYGROUND_MEMORY_BUDGET_GB``, else a share of the RAM or of the
GPU the models live on), the process's resident size it is measured against, and the glibc calls
that hand freed memory back to the operating system (playground.runtime.memory keeps the account).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

import psutil

from playground.errors import UserError
from playground.formats import format_bytes  # noqa: F401  (re-exported)
from playground.runtime.devices import default_device, device_memory_bytes

GiB = 2**30
RAM_SHARE = 0.6
DEVICE_SHARE = 0.85  # of a CUDA GPU's memory, when the models live there
BASELINE_BYTES = 1 * GiB


@functools.cache
def physical_ram_bytes() -> int:
    """The machine's RAM, read once: the budget asks for it at every reservation (a learner's run takes several)
    and reading /proc/meminfo costs tens of µs under the interpreter lock."""
    try:
        return int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or unsupported: the POSIX figure, then a guess
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 8 * GiB


def default_budget_bytes(device=None) -> int:
    """``PLAYGROUND_MEMORY_BUDGET_GB`` (GiB) if set, else 60% of physical RAM minus 1 GiB, or 85% of
    the GPU's memory for models on a CUDA ``device`` (default: where the app puts its models)."""
    env = os.environ.get("PLAYGROUND_MEMORY_BUDGET_GB")
    if env:
        try:
            return int(float(env) * GiB)
        except ValueError:
            raise UserError(
                "budget.env_not_number", "PLAYGROUND_MEMORY_BUDGET_GB must be a number, got {value!r}.", value=env
            ) from None
    accelerator = accelerator_bytes(device)
    if accelerator is not None:
        return int(accelerator * DEVICE_SHARE)
    return max(GiB // 2, int(physical_ram_bytes() * RAM_SHARE) - BASELINE_BYTES)


def accelerator_bytes(device=None) -> int | None:
    """Total memory of the GPU the models live on (``device``, default: the app's), or None when they
    live in RAM (CPU, and Apple's MPS, whose GPU shares the machine's RAM)."""
    return _device_total(str(device) if device is not None else str(default_device()))


@functools.cache
def _device_total(device) -> int | None:
    return device_memory_bytes(device)


# ----------------------------------------------------------------------------------------------
# Giving freed memory back to the OS (glibc only; a no-op elsewhere)

_libc = None
if os.name == "posix":
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _libc.malloc_trim  # noqa: B018 -- glibc has it, musl and macOS do not
    except (OSError, AttributeError):
        _libc = None

M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20


def map_large_blocks() -> bool:
    """Give blocks of 1 MiB and more (every weight matrix) their own mapping, returned to the OS the
    moment they are freed: glibc's default threshold rises to 32 MiB after the first big free and
    puts later tensors on the heap, where a freed model leaves holes only a trim returns. A setting
    of the whole process, so the server's entry point makes it (app.py), not an import. True if set."""
    if _libc is None:
        return False
    return bool(_libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trim() -> bool:
    """Return free heap pages to the OS; True if glibc released something."""
    if _libc is None:
        return False
    return bool(_libc.malloc_trim(0))


def resident_bytes() -> int:
    """This process's resident set size (0 where psutil cannot tell)."""
    try:
        return int(psutil.Process().memory_info().rss)
    except Exception:  # psutil unsupported here: only the holdings are counted
        return 0
