"""What became of the decode path's speed work on this machine, for the Model tab to say.

The compiled one-row kernel's and the compiled step's status, and every kernel decision made, with the
figures it was made on."""

from __future__ import annotations

from playground.runtime import kernels, native_gemv, native_step


def one_row_kernel():
    """The compiled one-row kernel's status (``native_gemv.Status``: available, reason, compiler, ...)."""
    return native_gemv.status()


def compiled_step():
    """The compiled decode step's status (a ``compiled_library.Status``)."""
    return native_step.status()


def kernel_decisions() -> list:
    """Every kernel or layout decision this process made (``kernels.Choice``: kind, winner, seconds)."""
    return kernels.measured()
