"""This machine's kernel decisions on disk: measured once per machine and model shape, read at every start.

``kernels.choose`` measures a decision once per process. A server that keeps its decisions
(``kernels.keep_decisions()``, which the app calls at start) reads them from one JSON file per machine
instead: the file's name holds a hash of what makes a decision true here -- the CPU's model name and
ISA flags, the architecture and the torch version -- so a cache folder shared between machines (an NFS
home, a CI cache) gives each machine its own. A file that cannot be read is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch

from playground.runtime import library_cache


def cpu_identity() -> str:
    """The compiled kernels' CPU identity (``library_cache``: architecture, model, ISA flags) and torch's version."""
    return f"{library_cache.cpu_identity()}|torch {torch.__version__}"


def identity_hash() -> str:
    return hashlib.sha256(cpu_identity().encode()).hexdigest()[:16]


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples the decisions' fields hold (shapes)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


class DecisionStore:
    """Decisions by the ``repr`` of their key, in one JSON file written whole at each new decision."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / f"decisions-{identity_hash()}.json"
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("decisions"), dict):
                self._entries = {k: v for k, v in data["decisions"].items() if isinstance(v, dict)}
        except (OSError, ValueError):
            pass  # none yet, or unreadable: measured again and rewritten

    def get(self, key: tuple) -> dict | None:
        """The stored fields of the decision under ``key``, or None."""
        with self._lock:
            entry = self._entries.get(repr(key))
        if entry is None or not isinstance(entry.get("winner"), str):
            return None
        return {**entry, "seconds": dict(entry.get("seconds") or {}), "fields": _tuples(entry.get("fields") or {})}

    def put(self, key: tuple, fields: dict) -> None:
        with self._lock:
            self._entries[repr(key)] = fields
            body = json.dumps({"identity": cpu_identity(), "decisions": self._entries}, indent=1, default=list)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".decisions-")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(body)
                os.replace(tmp, self.path)  # whole or not at all: a reader never sees half a file
            except OSError:
                pass  # a read-only cache folder: the decisions live in this process only

    def __len__(self) -> int:
        return len(self._entries)
