"""A classroom room's code: 6 characters from an alphabet without look-alikes, drawn at random, read as typed.

The code is what a teacher's screen shows and students type: anyone with it may follow the room and vote
(the teacher's key, not the code, drives it: ``rooms``). A code typed in lower case, with spaces or a dash,
is the same code. Pure Python.
"""

from __future__ import annotations

import secrets
from typing import Any

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a projector and typed without doubt
CODE_LENGTH = 6  # 31**6 ≈ 887 million codes


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: Any) -> str | None:
    """A code as typed (lower case, spaces, a dash) in its canonical form, or None when it cannot be one."""
    if not isinstance(code, str):
        return None
    text = code.strip().upper().replace(" ", "").replace("-", "")
    if len(text) != CODE_LENGTH or any(ch not in ALPHABET for ch in text):
        return None
    return text
