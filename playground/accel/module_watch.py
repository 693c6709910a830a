"""Whether a model's modules may have changed since last looked at, without walking them on every token.

A plan that reads a model's tensors in place (``native_decode``) is valid while the model holds those
tensors and no torch hook listens. Walking the model's ~150 modules to find out costs ~0.2 ms on GPT-2
small, on every token. Every module, parameter or buffer registered anywhere in the process (a module
replaced in place, as ``quantize_int8`` does; a parameter assigned) counts one here, through torch's
global registration hooks; a ``ModelWatch`` remembers the count when its model was last walked: while the
count stands still and the tensors are at their addresses, nothing in the model was swapped.
"""

from __future__ import annotations

import torch
import torch.nn as nn

_REGISTRATIONS = [0]
_DATA_PTR = torch.Tensor.data_ptr


def _count_registration(*_args) -> None:
    _REGISTRATIONS[0] += 1


_INSTALLED: list = []  # the hooks' handles, once a watch exists


def _install() -> None:
    """Count registrations from the first watch on: a process that accelerates nothing has no global hooks."""
    if not _INSTALLED:
        for register in (
            torch.nn.modules.module.register_module_module_registration_hook,
            torch.nn.modules.module.register_module_parameter_registration_hook,
            torch.nn.modules.module.register_module_buffer_registration_hook,
        ):
            _INSTALLED.append(register(_count_registration))


def uninstall() -> None:
    """Remove the global hooks (tests; watches made before then see every later check as a change)."""
    while _INSTALLED:
        _INSTALLED.pop().remove()
    _REGISTRATIONS[0] += 1


def has_hooks(modules) -> bool:
    """Whether any of ``modules`` has a forward or forward-pre hook."""
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


class ModelWatch:
    """One model's hook dicts (read in place: registering a hook fills one), the tensors a plan reads with their
    addresses, and the registration count when the model was last walked and found to hold those tensors.
    Holds no reference to the model itself."""

    def __init__(self, model: nn.Module, tensors):
        _install()
        modules = list(model.modules())
        self.modules = modules[1:]  # the model's own hooks are in hook_dicts; a plan must not hold the model
        self.hook_dicts = tuple(d for m in modules for d in (m._forward_hooks, m._forward_pre_hooks))
        self.tensors = [t for t in tensors if t is not None]
        self.addresses = [t.data_ptr() for t in self.tensors]
        self.count = -1

    def mark(self) -> None:
        """The model was walked just now and holds the plan's tensors."""
        self.count = _REGISTRATIONS[0]

    def unchanged(self) -> bool:
        """Nothing registered anywhere since ``mark`` and every tensor still at its address (a ``.data``
        assignment or a conversion moves it)."""
        return (
            bool(_INSTALLED)
            and self.count == _REGISTRATIONS[0]
            and list(map(_DATA_PTR, self.tensors)) == self.addresses
        )

    def hooked(self) -> bool:
        return any(self.hook_dicts)
