"""Prints docs/layout.md's module block: every module of the package with the first line of its docstring.

``python tools/layout.py`` writes the block to stdout; ``--write`` puts it into docs/layout.md; ``--check``
exits 1 when docs/layout.md differs (tests/unit/test_layout.py runs the same comparison).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 34  # the description column


def first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def package_rows(folder: Path, depth: int) -> list[tuple[str, str]]:
    """The package's own line, its modules, then its sub-packages, each indented under it."""
    rel = folder.relative_to(ROOT)
    rows = [("  " * depth + (rel.name if depth else str(rel)) + "/", first_line(folder / "__init__.py"))]
    for path in sorted(folder.glob("*.py")):
        if path.name != "__init__.py":
            rows.append(("  " * (depth + 1) + path.name, first_line(path)))
    for sub in sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file()):
        rows += package_rows(sub, depth + 1)
    return rows


def block() -> str:
    rows = [("app.py", first_line(ROOT / "app.py")), *package_rows(ROOT / "playground", 0)]
    rows.append(("bench/", first_line(ROOT / "bench" / "__init__.py")))
    rows.append(
        (
            "tools/",
            "Scripts: README's screenshot, this Layout block, the browser page walk, Chromium flags, the bundled model's recipe (bundled/).",
        )
    )
    return "\n".join(f"{name:<{WIDTH}}{text}".rstrip() for name, text in rows) + "\n"


LAYOUT = ROOT / "docs" / "layout.md"


def written_block() -> str:
    """The block of docs/layout.md that lists the modules (the one starting with app.py)."""
    blocks = LAYOUT.read_text(encoding="utf-8").split("```\n")[1::2]
    return next((b for b in blocks if b.startswith("app.py")), "")


if __name__ == "__main__":
    if "--check" in sys.argv:
        sys.exit(0 if written_block() == block() else 1)
    if "--write" in sys.argv:
        LAYOUT.write_text(LAYOUT.read_text(encoding="utf-8").replace(written_block(), block(), 1), encoding="utf-8")
    else:
        sys.stdout.write(block())
