"""Paths every test folder shares (a plain module: no fixtures, no gradio, no test of its own)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
SHARED = ROOT.parent / "shared"  # data beside the checkout, shared by every worktree
TINY_SHAKESPEARE = SHARED / "data" / "tinyshakespeare.txt"
ARTIFACTS = ROOT / "tests" / "artifacts"  # screenshots the browser tests leave for a person to look at
README = ROOT / "README.md"
