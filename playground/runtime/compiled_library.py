"""One compiled library built, cached and loaded once per process; what became of it, never an exception.

``native_step`` (the decode step), ``native_sampler`` (the rows' samplers) and ``native_row_summary`` (the
sampler's row summary) each compile one C++ file the way ``native_gemv`` compiles its kernels (the machine's
compiler, cached by a hash of the sources, flags and CPU, checked before it is loaded: ``library_cache``).
``load_once`` does the part they share: switched off by an environment variable, no compiler, a failed build
or load, each said as a ``Status`` a UI words in its own language; callers then keep their plain path.
``Library`` holds one such library for a module: tried once, its decision read without a lock after.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.runtime import library_cache

OFF = ("off", "0", "no")


@dataclass(frozen=True)
class Status:
    """What became of a compiled library in this process: as data a UI words in its own language."""

    available: bool
    reason: str  # "ready", "off", "no_compiler", "build_failed", "load_failed", "not_tried"
    detail: str = ""
    build_seconds: float = 0.0  # 0 when the cached library was loaded
    cache_note: str = ""  # why a cached library was rejected and built again ("truncated", ...), "" if none


NOT_TRIED = Status(False, "not_tried")


def switched_off(*variables: str) -> bool:
    """Whether any of these environment variables says off ("off", "0", "no")."""
    return any(os.environ.get(v, "").strip().lower() in OFF for v in variables)


def load_once(
    source: Path,
    included: tuple[Path, ...],
    switches: tuple[str, ...],
    load: Callable[[Path], Any],
    symbols: tuple[str, ...] = (),
) -> tuple[Status, Any]:
    """Build ``source`` (or find it in the cache, checked) and ``load(path)`` it: (its status, what
    ``load`` returned, None unless ready). ``symbols``: the functions ``load`` binds (a cached library
    without them is rebuilt); ``load`` raises OSError or AttributeError when it cannot bind them."""
    if switched_off(*switches):
        return Status(False, "off"), None
    cxx = library_cache.compiler()
    if cxx is None:
        return Status(False, "no_compiler"), None
    try:
        loaded, _, seconds, note = library_cache.build_and_load(source, cxx, included, load, symbols)
    except library_cache.LoadFailed as e:
        return Status(False, "load_failed", library_cache.public_detail(str(e))), None
    except Exception as e:  # a failed build, or anything else: the caller's plain path stays, said
        return Status(False, "build_failed", library_cache.public_detail(str(e))), None
    return Status(True, "ready", "", seconds, note), loaded


class Library:
    """One compiled library of a module, built or loaded the first time ``available()`` asks: ``loaded``
    is what the module's ``load`` returned (None until then, or when it failed), ``status()`` what became
    of it. Once decided, ``available()`` reads the decision without the lock (it runs on every token). A
    module binds the four methods as its own functions (``available = _LIBRARY.available``, ...)."""

    def __init__(
        self,
        source: Path,
        included: tuple[Path, ...],
        switches: tuple[str, ...],
        load: Callable[[Path], Any],
        symbols: tuple[str, ...] = (),
    ):
        self.source, self.included, self.switches, self.symbols = source, included, switches, symbols
        self._load = load
        self._lock = threading.Lock()
        self._status: Status = NOT_TRIED
        self.loaded: Any = None

    def available(self) -> bool:
        """True if the library can be called; never raises (a failure is a ``Status`` with its reason)."""
        if self._status.reason != "not_tried":
            return self._status.available
        with self._lock:
            if self._status.reason == "not_tried":
                self._status, self.loaded = load_once(
                    self.source, self.included, self.switches, self._load, self.symbols
                )
            return self._status.available

    def status(self) -> Status:
        return self._status

    def switched_off(self) -> bool:
        return switched_off(*self.switches)

    def forget(self) -> None:
        """Back to not tried (tests): the next ``available`` builds or loads again."""
        with self._lock:
            self._status, self.loaded = NOT_TRIED, None
