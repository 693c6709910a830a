"""The server's memory budget and device, as the app's start and its sessions use them.

The budget every model, run and view reserves from, whom a reservation is made for, and the device chosen."""

from __future__ import annotations

from playground.runtime.devices import DeviceError, default_device
from playground.runtime.holdings import acting_for
from playground.runtime.machine_memory import map_large_blocks
from playground.runtime.memory import BUDGET

__all__ = ["BUDGET", "DeviceError", "acting_for", "default_device", "map_large_blocks"]
