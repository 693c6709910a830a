"""Compiled libraries as untrusted files: built here, kept with a checksum, checked before every load.

The kernel cache folder outlives the process and may be shared (a home folder on NFS, a container
image, a copied ``~/.cache``): a file there may be truncated by a full disk, emptied, replaced by
something else, or built on another CPU. ``ctypes.CDLL`` on a truncated ELF file dies with SIGBUS
inside ``dlopen``, and a library built with ``-march=native`` elsewhere dies with SIGILL at its first
call, so nothing is loaded on trust:

- the cache name holds the CPU's identity (its ISA flags) besides the sources, compiler and flags, so
  a library built on one machine is never looked up on another;
- the build writes ``<name>.so.sum`` beside the library (its SHA-256, its size and the CPU identity);
- before loading, ``verify`` checks the checksum file, the size, the digest, the ELF header (a
  shared object for this machine's architecture, its header tables inside the file) and the
  functions it exports. A file that fails is removed and built again; a cached library that the
  loader still refuses is built again once.

Every failure is an exception the callers turn into a Status (``compiled_library``): nothing in the
cache can stop the app from starting. ``public_detail`` takes server paths out of what a page shows.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import torch

FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-fopenmp", "-std=c++17"]
BUILD_TIMEOUT_S = 120
SUM_SUFFIX = ".sum"

# ELF e_machine of the architectures Python reports (platform.machine()).
ELF_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183, "i386": 3, "i686": 3, "ppc64le": 21}
ET_DYN = 3


class LoadFailed(Exception):
    """A checked library that the loader refused (its message, the loader's or a missing symbol's)."""


class CacheRejected(Exception):
    """A cached library that failed its check; ``reason`` is a key the UI words (``kn_cache_`` + it)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def cache_dir() -> Path:
    root = os.environ.get("PLAYGROUND_KERNEL_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpt-playground" / "kernels"


def compiler() -> str | None:
    """The C++ compiler: ``$CXX`` if set, else the first of g++, c++, clang++ on the PATH."""
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def torch_openmp() -> Path | None:
    """The OpenMP runtime torch loaded (torch/lib/libgomp*.so*), linked by path so the kernel's
    threads are torch's own team and not a second pool spinning on the same cores."""
    lib = Path(torch.__file__).parent / "lib"
    found = sorted(lib.glob("libgomp*.so*"))
    return found[0] if found else None


@cache
def cpu_identity() -> str:
    """What ``-march=native`` compiles for: the architecture, the CPU's model and its ISA flags
    (``/proc/cpuinfo``'s ``flags``, ``Features`` on ARM), as one digest."""
    parts = [platform.machine()]
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text(errors="replace")
        for field in ("model name", "flags", "Features", "CPU part"):
            m = re.search(rf"^{field}\s*:\s*(.*)$", text, re.MULTILINE)
            if m:
                parts.append(f"{field}={' '.join(sorted(m.group(1).split())) if field != 'model name' else m.group(1)}")
    if len(parts) == 1:
        parts.append(platform.processor())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def library_path(source: Path, cxx: str, included: tuple[Path, ...] = ()) -> tuple[Path, list[str]]:
    """Where the build of ``source`` lives in the cache, and the link arguments it is built with. The
    name holds a hash of the source, the files it #includes, the compiler, its version, the flags,
    torch's OpenMP runtime and the CPU's identity: any change is a new build, and another machine
    sharing the folder never finds this one's library."""
    texts = [source.read_text(), *(p.read_text() for p in included)]
    openmp = torch_openmp()
    link = [str(openmp), f"-Wl,-rpath,{openmp.parent}"] if openmp else []
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    key = hashlib.sha256("\0".join([*texts, cxx, version, *FLAGS, *link, cpu_identity()]).encode()).hexdigest()[:16]
    return cache_dir() / f"{source.stem}-{key}.so", link


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def elf_problem(data: bytes, size: int) -> str | None:
    """Why the first bytes ``data`` of a file of ``size`` bytes are not a shared object this process
    can load (None if they look like one): the magic, 64-bit little-endian, a shared object, this
    machine's architecture, and program and section header tables that end inside the file."""
    if size == 0:
        return "empty"
    if len(data) < 64 or data[:4] != b"\x7fELF":
        return "not_elf"
    if data[4] != 2 or data[5] != 1:  # ELFCLASS64, ELFDATA2LSB: what the machines the app runs on load
        return "other_cpu"
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    want = ELF_MACHINES.get(platform.machine().lower())
    if e_type != ET_DYN or (want is not None and e_machine != want):
        return "other_cpu"
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 32)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, 54)
    if e_phoff + e_phentsize * e_phnum > size or e_shoff + e_shentsize * e_shnum > size:
        return "truncated"
    return None


def dynamic_symbols(path: Path) -> set[str]:
    """The names a shared object exports (its ``.dynsym`` table), read from the file without loading
    it: a library without the functions its caller binds is refused before ``dlopen`` (which would
    keep it mapped under its path, so a rebuild there could not be loaded in this process)."""
    data = path.read_bytes()
    e_shoff = struct.unpack_from("<Q", data, 40)[0]
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 58)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    names: set[str] = set()
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 11 or not entsize:  # SHT_DYNSYM
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, entsize):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", data, at)
            if st_name and st_shndx != 0 and (st_info & 0xF) == 2:  # defined here, a function
                end = data.index(b"\0", strtab + st_name)
                names.add(data[strtab + st_name : end].decode(errors="replace"))
    return names


def verify(path: Path, symbols: tuple[str, ...] = ()) -> None:
    """Raise ``CacheRejected`` unless ``path`` is the library its checksum file describes, whole, an
    ELF shared object for this machine, built for this CPU, exporting every name in ``symbols``."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(64)
    except OSError as e:
        raise CacheRejected("unreadable", e.strerror or "") from None
    problem = elf_problem(head, size)
    if problem is not None:
        raise CacheRejected(problem, f"{size:,} bytes")
    try:
        record = json.loads(Path(str(path) + SUM_SUFFIX).read_text())
        want_size, want_digest, cpu = int(record["size"]), str(record["sha256"]), str(record["cpu"])
    except (OSError, ValueError, KeyError, TypeError):
        raise CacheRejected("no_checksum") from None
    if cpu != cpu_identity():
        raise CacheRejected("other_cpu")
    if size != want_size:
        raise CacheRejected("truncated", f"{size:,} of {want_size:,} bytes")
    if _digest(path) != want_digest:
        raise CacheRejected("checksum")
    missing = _missing(path, symbols)
    if missing:
        raise CacheRejected("missing_symbols", ", ".join(missing))


def _missing(path: Path, symbols: tuple[str, ...]) -> list[str]:
    if not symbols:
        return []
    try:
        found = dynamic_symbols(path)
    except (OSError, struct.error, IndexError, ValueError):
        return list(symbols)
    return [name for name in symbols if name not in found]


def _remove(path: Path) -> None:
    for p in (path, Path(str(path) + SUM_SUFFIX)):
        with contextlib.suppress(OSError):
            p.unlink()


def _compile(source: Path, cxx: str, target: Path, link: list[str]) -> float:
    """Build ``source`` into ``target`` with its checksum file beside it; the seconds it took."""
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        done = subprocess.run(
            [cxx, *FLAGS, str(source), "-o", str(out), *link], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"exit status {done.returncode}")
        record = {"sha256": _digest(out), "size": out.stat().st_size, "cpu": cpu_identity()}
        summed = Path(tmp) / (target.name + SUM_SUFFIX)
        summed.write_text(json.dumps(record))
        # The checksum lands first, then the library (each atomically): a process that finds the
        # library finds the record of it; one that finds an older record with it rebuilds.
        os.replace(summed, Path(str(target) + SUM_SUFFIX))
        os.replace(out, target)
    return time.perf_counter() - t0


def build_library(
    source: Path, cxx: str, included: tuple[Path, ...] = (), symbols: tuple[str, ...] = ()
) -> tuple[Path, float, str]:
    """Compile ``source`` into the cache folder, or find it there checked (``verify``, with the
    ``symbols`` its caller binds): (its path, the seconds the build took, 0 when cached, and a note:
    the reason a cached file was rejected and rebuilt, "" if none)."""
    target, link = library_path(source, cxx, included)
    note = ""
    if target.exists():
        try:
            verify(target, symbols)
            return target, 0.0, ""
        except CacheRejected as e:
            note = e.reason
            _remove(target)
    return target, _compile(source, cxx, target, link), note


def build_and_load(
    source: Path, cxx: str, included: tuple[Path, ...], load: Callable[[Path], Any], symbols: tuple[str, ...] = ()
) -> tuple[Any, Path, float, str]:
    """``load(path)`` of the checked build of ``source`` (``symbols``: the names ``load`` binds):
    (what it returned, the path, the build's seconds, the note of ``build_library``). A cached
    library that passes its check but that the loader refuses (OSError: nothing stays mapped) is
    removed and built again once; a library that still will not load raises ``LoadFailed``, a
    failed build what ``build_library`` raises."""
    path, seconds, note = build_library(source, cxx, included, symbols)
    if seconds and _missing(path, symbols):
        raise LoadFailed(f"{path.name}: the build exports none of {', '.join(_missing(path, symbols))}")
    try:
        return load(path), path, seconds, note
    except (OSError, AttributeError) as e:
        if seconds or isinstance(e, AttributeError):  # built just now, or mapped already: no second try
            raise LoadFailed(str(e)) from None
    _remove(path)
    path, seconds, _ = build_library(source, cxx, included, symbols)
    try:
        return load(path), path, seconds, "unloadable"
    except (OSError, AttributeError) as e:
        raise LoadFailed(str(e)) from None


def public_detail(text: str) -> str:
    """``text`` (a compiler's or the loader's message) with server paths cut to their last part:
    the cache folder and the home directory are not a web page's to show."""
    return re.sub(r"(?:/[^\s/:'\"()]+)+/([^\s/:'\"()]+)", r"\1", text)[-300:]
