"""Paths every test folder shares (a plain module: no fixtures, no gradio, no test of its own)."""

import contextlib
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
SHARED = ROOT.parent / "shared"  # data beside the checkout, shared by every worktree
TINY_SHAKESPEARE = SHARED / "data" / "tinyshakespeare.txt"
ARTIFACTS = ROOT / "tests" / "artifacts"  # screenshots the browser tests leave for a person to look at
README = ROOT / "README.md"
DOCS = ROOT / "docs"  # what README links to: the reference, examples that tests run


def build_fields(cfg) -> list:
    """A config (GPTConfig or a dict of changes to the nano preset) as /build_model's field arguments,
    in the Model tab's field order (the API's)."""
    from playground import PRESETS
    from playground.ui.model_switch import FIELDS  # imported here: this module stays free of gradio

    nano = {k: getattr(PRESETS["nano"], k) for k in FIELDS}  # every field, the switches at GPT-2's values too
    values = {k: getattr(cfg, k) for k in FIELDS} if hasattr(cfg, "to_dict") else {**nano, **cfg}
    return [values[k] for k in FIELDS]


def plain_text(html: str) -> str:
    """What a reader sees of a Markdown/HTML value: its tags dropped (the header wraps its figures in spans
    that a lesson masks while it asks for them)."""
    return re.sub(r"<[^>]+>", "", html)


def os_threads_named(name: str) -> int:
    """The process's threads the OS names ``name`` (Linux's /proc): a thread takes the name of the thread that
    started it, so a named thread's OpenMP workers count with it."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/comm") as f:
            count += f.read().strip() == name
    return count
