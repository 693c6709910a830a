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
