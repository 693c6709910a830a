"""The files the app ships with, found through ``importlib.resources`` (installed or in a checkout).

The GPT-2 BPE files (``encoder.json``, ``vocab.bpe``), the bundled
model (``bundled/``: its weights, config and measured facts), the lessons (``lessons/``) and the
public-domain training texts (``corpus/``). How the bundled model is made lives in
``tools/bundled/`` of the repository."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def path(*parts: str) -> Path:
    """A file or folder of the shipped data as a filesystem path (the package is installed unzipped:
    safetensors and tiktoken read files by name)."""
    where = resources.files(__name__)
    for part in parts:
        where = where.joinpath(part)
    return Path(str(where))
