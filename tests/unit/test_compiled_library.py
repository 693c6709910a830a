"""compiled_library.Library: a module's compiled library tried once, its decision kept, forgotten on request."""

from __future__ import annotations

from pathlib import Path

from playground.runtime import compiled_library
from playground.runtime.compiled_library import Library


def test_a_switched_off_library_is_not_built_and_says_why(monkeypatch, tmp_path):
    calls = []
    lib = Library(tmp_path / "none.cpp", (), ("PG_TEST_SWITCH",), lambda path: calls.append(path))
    monkeypatch.setenv("PG_TEST_SWITCH", "off")
    assert lib.switched_off()
    assert lib.status().reason == "not_tried"
    assert lib.available() is False
    assert (lib.status().reason, lib.loaded, calls) == ("off", None, [])


def test_the_decision_is_made_once_then_read(monkeypatch, tmp_path):
    tries = []

    def load_once(source, included, switches, load, symbols):
        tries.append(source)
        return compiled_library.Status(True, "ready"), f"loaded {Path(source).name}"

    monkeypatch.setattr(compiled_library, "load_once", load_once)
    lib = Library(tmp_path / "step.cpp", (), ("PG_TEST_SWITCH",), lambda path: None, ("pg_step",))
    assert lib.available() and lib.available()
    assert (len(tries), lib.loaded, lib.status().reason) == (1, "loaded step.cpp", "ready")
    lib.forget()
    assert (lib.status().reason, lib.loaded) == ("not_tried", None)
    assert lib.available()
    assert len(tries) == 2


def test_a_failure_is_a_status_and_nothing_loaded(monkeypatch, tmp_path):
    monkeypatch.setattr(
        compiled_library, "load_once", lambda *a: (compiled_library.Status(False, "build_failed", "g++: error"), None)
    )
    lib = Library(tmp_path / "bad.cpp", (), ("PG_TEST_SWITCH",), lambda path: None)
    assert lib.available() is False
    assert (lib.status().reason, lib.status().detail, lib.loaded) == ("build_failed", "g++: error", None)


def _quoted_includes(path: Path) -> set[Path]:
    """Every file ``path`` reaches through ``#include "..."``, followed file by file."""
    found: set[Path] = set()
    todo = [path]
    while todo:
        for line in todo.pop().read_text().splitlines():
            if line.startswith('#include "'):
                child = path.with_name(line.split('"')[1])
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def test_each_librarys_cache_key_follows_every_file_its_source_includes():
    # A file left out of ``included`` would let an edit there load a stale build from the cache.
    from playground.runtime import native_row_summary, native_sampler, native_step

    for module in (native_step, native_sampler, native_row_summary):
        library = module._LIBRARY
        assert set(library.included) == _quoted_includes(library.source), module.__name__
