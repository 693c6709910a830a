"""Nothing in the compiled-kernel cache can stop the app: truncated, empty, symbol-less and foreign-CPU
libraries under the cache names are set aside (checksum, size, ELF header), built again, and said in
the kernel notes without a server path. Each start runs in a child process, so a SIGBUS inside
``dlopen`` (what a truncated library did) fails the test instead of killing pytest."""

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from playground.runtime import library_cache
from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(library_cache.compiler() is None, reason="no C++ compiler here")

# Start the app's decode machinery as a server does: each compiled library, a generation, the notes.
CHILD = textwrap.dedent(
    """
    import json
    from playground.runtime import native_gemv, native_row_summary, native_step
    from playground.engine.model import GPTModel
    from playground.engine.config import GPTConfig
    from playground.engine.sampling import generate
    from playground.ui.model.kernels_box import decode_path_text

    ready = [native_gemv.available(), native_step.available(), native_row_summary.available()]
    model = GPTModel(GPTConfig(vocab_size=50257, context_length=32, emb_dim=32, n_heads=2, n_layers=1)).eval()
    steps = list(generate(model, [1, 2, 3], max_new_tokens=4, temperature=0))
    notes = [m.status().cache_note for m in (native_gemv, native_step, native_row_summary)]
    print(json.dumps({"ready": ready, "tokens": len(steps), "notes": notes,
                      "text": decode_path_text("en") + decode_path_text("zh-CN")}))
    """
)


def run_child(cache: Path) -> dict:
    env = {**os.environ, "PLAYGROUND_KERNEL_CACHE": str(cache), "GRADIO_ANALYTICS_ENABLED": "False"}
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the start died (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A cache holding the three libraries, built once for the module."""
    cache = tmp_path_factory.mktemp("kernels")
    out = run_child(cache)
    assert out["ready"] == [True, True, True] and out["notes"] == ["", "", ""]
    return cache


def libraries(cache: Path) -> list[Path]:
    found = sorted(cache.glob("*.so"))
    assert len(found) == 3
    return found


def truncate(lib: Path) -> None:
    data = lib.read_bytes()
    lib.write_bytes(data[: len(data) // 3])


def empty(lib: Path) -> None:
    lib.write_bytes(b"")


def symbol_less(lib: Path) -> None:
    """A loadable shared object with none of the expected symbols, with a checksum file that matches
    it (as if a build of some other source had landed under this name)."""
    src = lib.with_suffix(".c")
    src.write_text("int pg_nothing_here(void) { return 1; }\n")
    subprocess.run([library_cache.compiler(), "-x", "c++", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    src.unlink()
    record = {"sha256": library_cache._digest(lib), "size": lib.stat().st_size, "cpu": library_cache.cpu_identity()}
    Path(str(lib) + library_cache.SUM_SUFFIX).write_text(json.dumps(record))


def foreign_cpu(lib: Path) -> None:
    """The same library as built by another machine sharing the folder: its checksum file names
    another CPU, and its header another architecture."""
    data = bytearray(lib.read_bytes())
    data[18:20] = struct.pack("<H", 183 if data[18:20] != struct.pack("<H", 183) else 62)
    lib.write_bytes(bytes(data))
    record = {"sha256": library_cache._digest(lib), "size": len(data), "cpu": "another-cpu"}
    Path(str(lib) + library_cache.SUM_SUFFIX).write_text(json.dumps(record))


@pytest.mark.parametrize(
    "spoil, note",
    [(truncate, "truncated"), (empty, "empty"), (symbol_less, "missing_symbols"), (foreign_cpu, "other_cpu")],
)
def test_a_spoilt_cache_is_rebuilt_and_said_without_a_path(built, tmp_path, spoil, note):
    cache = tmp_path / "kernels"
    cache.mkdir()
    for lib in libraries(built):
        for f in (lib, Path(str(lib) + library_cache.SUM_SUFFIX)):
            (cache / f.name).write_bytes(f.read_bytes())
    for lib in libraries(cache):
        spoil(lib)
    out = run_child(cache)
    assert out["tokens"] == 4
    assert out["ready"] == [True, True, True], out
    assert out["notes"] == [note] * 3
    assert "built again" in out["text"] and "重新编译" in out["text"]
    for private in (str(tmp_path), str(cache), str(Path.home())):
        assert private not in out["text"]
    for lib in libraries(cache):  # the rebuilt files pass their check: the next start loads them as they are
        library_cache.verify(lib)


def test_public_detail_cuts_paths():
    said = library_cache.public_detail("/home/me/.cache/gpt-playground/kernels/x-1.so: cannot open shared object")
    assert said == "x-1.so: cannot open shared object"


def test_the_elf_check_refuses_what_dlopen_would_die_on(built):
    lib = libraries(built)[0]
    data = lib.read_bytes()
    assert library_cache.elf_problem(data[:64], len(data)) is None
    assert library_cache.elf_problem(data[:64], len(data) // 3) == "truncated"
    assert library_cache.elf_problem(b"", 0) == "empty"
    assert library_cache.elf_problem(b"MZ" + bytes(62), 64) == "not_elf"
