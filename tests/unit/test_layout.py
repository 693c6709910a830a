"""The package's shape: docs/layout.md's module block is the tree as it is, and every module says its one job
in the first line of its docstring."""

import ast
import importlib.util

from tests.helpers import ROOT

spec = importlib.util.spec_from_file_location("layout", ROOT / "tools" / "layout.py")
layout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layout)


def test_the_layout_lists_every_module_with_its_one_line_job():
    block = layout.block()
    assert len(block.splitlines()) > len(list((ROOT / "playground").rglob("*.py")))  # every module has a row
    assert layout.written_block() == block, "run `python tools/layout.py --write`"


def test_every_module_opens_with_one_line_saying_its_job():
    for path in [ROOT / "app.py", *sorted((ROOT / "playground").rglob("*.py"))]:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path.relative_to(ROOT)} has no docstring"
        lines = doc.strip().splitlines()
        assert len(lines) == 1 or not lines[1].strip(), f"{path.relative_to(ROOT)}: the first line runs on"
        assert len(lines[0]) <= 110, f"{path.relative_to(ROOT)}: the first line is {len(lines[0])} characters"
