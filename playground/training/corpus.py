"""Training text in, token ids out: an uploaded file, pasted text, or Tiny Shakespeare.

Everything a user hands us is treated as untrusted: an upload is only ever read from the temporary
path Gradio itself created, is size-limited before it is read, and is decoded with replacement
characters instead of raising; binary files and empty text are refused with a message that can be
shown as it is. Tiny Shakespeare comes from a local copy when there is one, else from the cache,
else from its public URL, and is always checked against its known sha256.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

from playground import assets
from playground.engine.tokenizer import load_tokenizer
from playground.errors import UserError

MAX_CORPUS_BYTES = 20 * 1024 * 1024  # 20 MiB: a few million tokens, minutes to tokenise at most
VAL_FRACTION = 0.1  # the last tenth of the tokens is held out for the validation loss

TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINY_SHAKESPEARE_BYTES = 1_115_394
TINY_SHAKESPEARE_FILENAME = "tinyshakespeare.txt"
REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_TINY_SHAKESPEARE = REPO_ROOT.parent / "shared" / "data" / TINY_SHAKESPEARE_FILENAME
# Aesop's fables, nursery rhymes and five Tang poems, all public domain (playground/assets/corpus/README.md
# names the sources): small enough to ship, so a lesson's training run needs no network.
# The bundled public-domain texts (playground/assets/corpus/README.md says where each comes from).
BUNDLED_CORPORA = {
    "austen": assets.path("corpus", "pride_and_prejudice.txt"),  # 155,887 tokens: the default lesson
    "aesop": assets.path("corpus", "fables_and_rhymes.txt"),  # 3,678 tokens: learned by heart, overfits
}
# Texts whose line breaks are the e-text's typesetting (a break every ~70 characters), not the
# author's: their lines are joined within a paragraph. Kept, a newline is one token in twelve and
# the default lesson's model writes mostly newlines; joined, it writes words (docs/benchmarks.md).
# The rhymes' line breaks are the verse's own.
HARD_WRAPPED = frozenset({"austen"})

# More than this share of replacement or control characters and the "text" is not text (a
# Latin-1 file still passes, with its accents shown as U+FFFD).
_MAX_GARBAGE_FRACTION = 0.25  # Latin-1 French is ~5%; random bytes are over 50%
_ALLOWED_CONTROLS = {"\n", "\r", "\t", "\f", "\v"}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str can hold them; UTF-8 cannot encode them


class CorpusError(UserError):
    """A training text that cannot be used; the message is written to be shown to a user as it is."""


# ----------------------------------------------------------------------------------------------
# Text from the user


def text_from_upload(file, max_bytes: int = MAX_CORPUS_BYTES) -> str:
    """The text of an uploaded file: the temporary path Gradio gives (str / PathLike), or an object
    carrying it as ``.path`` or ``.name``. The size is checked before anything is read."""
    if file is None:
        raise CorpusError(
            "corpus.no_file", "No file was uploaded. Choose a .txt file, paste text, or pick Tiny Shakespeare."
        )
    raw_path = file
    if not isinstance(file, (str, os.PathLike)):  # a Path's own .name is only its last component
        raw_path = getattr(file, "path", None) or getattr(file, "name", None)
    if not isinstance(raw_path, (str, os.PathLike)):
        raise CorpusError("corpus.unreadable_upload", "Cannot read the upload (got {kind}).", kind=type(file).__name__)
    path = Path(raw_path)
    if not path.is_file():
        raise CorpusError("corpus.upload_gone", "The uploaded file is no longer available; upload it again.")
    size = path.stat().st_size
    if size > max_bytes:
        raise CorpusError(
            "corpus.file_too_big",
            "The file is {size}; the limit for a training text is {limit}. Upload a shorter text.",
            size=_size(size),
            limit=_size(max_bytes),
        )
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)  # the file may have grown since stat(); never read past the limit
    if len(data) > max_bytes:
        raise CorpusError(
            "corpus.file_over_limit",
            "The file is larger than the {limit} limit for a training text.",
            limit=_size(max_bytes),
        )
    return text_from_bytes(data, name=path.name if _looks_like_user_name(path.name) else "the file")


def text_from_bytes(data: bytes, name: str = "the file") -> str:
    """UTF-8 decoding that never raises on bad bytes, but refuses binary data and empty text."""
    if b"\x00" in data[: 1 << 20]:
        raise CorpusError(
            "corpus.binary",
            "{name} looks like a binary file (it contains NUL bytes); upload plain UTF-8 text.",
            name=name,
        )
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")  # drop a byte-order mark
    return _checked_text(text, name)


def text_from_paste(text, max_bytes: int = MAX_CORPUS_BYTES) -> str:
    """Pasted text, with lone surrogates (which cannot be UTF-8 encoded) replaced by U+FFFD."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise CorpusError("corpus.paste_not_str", "Pasted text must be a string, got {kind}.", kind=type(text).__name__)
    text = _LONE_SURROGATE.sub("\ufffd", text)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise CorpusError(
            "corpus.paste_too_big",
            "The pasted text is {size}; the limit is {limit}.",
            size=_size(size),
            limit=_size(max_bytes),
        )
    if not text.strip():
        raise CorpusError(
            "corpus.paste_empty", "The pasted text is empty (or only whitespace); a training text needs some words."
        )
    return text


def _checked_text(text: str, name: str) -> str:
    if not text.strip():
        raise CorpusError(
            "corpus.file_empty", "{name} is empty (or only whitespace); a training text needs some words.", name=name
        )
    sample = text[:200_000]
    garbage = sum(1 for ch in sample if ch == "\ufffd" or (ord(ch) < 32 and ch not in _ALLOWED_CONTROLS))
    if garbage > _MAX_GARBAGE_FRACTION * len(sample):
        raise CorpusError(
            "corpus.not_utf8",
            "{name} does not look like UTF-8 text ({share:.0%} of its characters are undecodable bytes or "
            "control codes). Save it as UTF-8 plain text and try again.",
            name=name,
            share=garbage / len(sample),
        )
    return text


def _size(n: int) -> str:
    # Binary units, as the limit is set (20 MB = 20 * 2**20 bytes).
    if n < 2**20:
        return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} bytes"
    return f"{n / 2**20:.1f}".removesuffix(".0") + " MB"


def _looks_like_user_name(name: str) -> bool:
    # Only ever echo a short, printable file name back to the user.
    return 0 < len(name) <= 80 and name.isprintable()


def load_bundled_corpus(name: str = "austen") -> str:
    """A bundled public-domain training text (works offline): ``"austen"`` (Pride and Prejudice,
    the default) or ``"aesop"`` (fables and nursery rhymes)."""
    path = BUNDLED_CORPORA[name]
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CorpusError(
            "corpus.bundled_missing",
            "The bundled training text is missing ({path}): {reason}. Reinstall the app, or upload or paste a text.",
            path=path,
            reason=e.strerror,
        ) from None
    return join_wrapped_lines(text) if name in HARD_WRAPPED else text


def join_wrapped_lines(text: str) -> str:
    """``text`` with each line break inside a paragraph (between two non-blank lines) made a space;
    blank lines, and so paragraphs, headings and chapters, stay."""
    return re.sub(r"(?<=\S)[ \t]*\n(?=[ \t]*\S)", " ", text)


# ----------------------------------------------------------------------------------------------
# Tiny Shakespeare: local copy -> cache -> public URL, always sha256-checked


def cache_dir() -> Path:
    """``PLAYGROUND_CACHE_DIR`` if set, else ``~/.cache/gpt-playground``."""
    env = os.environ.get("PLAYGROUND_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gpt-playground"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch_url(url: str, timeout: float, max_bytes: int) -> bytes:
    """GET ``url`` (the one network call in this module; tests replace it)."""
    request = urllib.request.Request(url, headers={"User-Agent": "gpt-playground"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read(max_bytes + 1)


def _verified(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if _sha256(data) == TINY_SHAKESPEARE_SHA256 else None


def tiny_shakespeare_path(
    *,
    download: bool = True,
    cache: str | os.PathLike | None = None,
    local_path: str | os.PathLike | None = None,
    timeout: float = 30.0,
) -> Path:
    """A verified copy of Tiny Shakespeare on disk, fetched once and cached after.

    Looks in ``local_path`` (default ``../shared/data/tinyshakespeare.txt``), then the cache, then
    downloads from the public URL when ``download`` is true. Raises CorpusError when none works.
    """
    local = Path(local_path) if local_path is not None else LOCAL_TINY_SHAKESPEARE
    if local.is_file() and _verified(local) is not None:
        return local
    folder = Path(cache) if cache is not None else cache_dir()
    cached = folder / TINY_SHAKESPEARE_FILENAME
    if cached.is_file() and _verified(cached) is not None:
        return cached
    if not download:
        raise CorpusError(
            "corpus.shakespeare_offline_cache",
            "Tiny Shakespeare is not in the cache ({folder}) and downloading is turned off.",
            folder=folder,
        )
    try:
        data = _fetch_url(TINY_SHAKESPEARE_URL, timeout, 4 * TINY_SHAKESPEARE_BYTES)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        reason = getattr(e, "reason", None) or e
        raise CorpusError(
            "corpus.shakespeare_offline",
            "Cannot download Tiny Shakespeare: the network is not reachable ({reason}) and no copy is cached "
            "in {folder}. Connect once, or upload a .txt file or paste some text instead.",
            reason=reason,
            folder=folder,
        ) from None
    if _sha256(data) != TINY_SHAKESPEARE_SHA256:
        raise CorpusError(
            "corpus.shakespeare_sha",
            "The downloaded Tiny Shakespeare ({n:,} bytes) does not match its known sha256; it was not saved. "
            "Try again later, or upload a .txt file.",
            n=len(data),
        )
    folder.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(cached.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, cached)  # never leave a half-written file under the real name
    return cached


def load_tiny_shakespeare(**kwargs) -> str:
    """The text of Tiny Shakespeare (see ``tiny_shakespeare_path`` for where it comes from)."""
    return tiny_shakespeare_path(**kwargs).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# Tokens and the train / validation split


@dataclass
class Corpus:
    """A tokenised text split into a training part and the held-out last tenth."""

    train_ids: torch.Tensor  # (N_train,) int64
    val_ids: torch.Tensor  # (N_val,) int64
    n_chars: int
    name: str = "text"

    @property
    def n_tokens(self) -> int:
        return len(self.train_ids) + len(self.val_ids)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.n_chars:,} characters, {self.n_tokens:,} tokens "
            f"({len(self.train_ids):,} for training, {len(self.val_ids):,} held out)"
        )


def split_ids(ids, val_fraction: float = VAL_FRACTION) -> tuple[torch.Tensor, torch.Tensor]:
    """The first (1 - val_fraction) of the tokens for training, the rest held out."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    n_train = len(ids) - int(round(len(ids) * val_fraction))
    return ids[:n_train].clone(), ids[n_train:].clone()


def min_corpus_tokens(block_size: int, val_fraction: float = VAL_FRACTION) -> int:
    """Fewest tokens for which both splits hold one training example (block_size + 1 tokens)."""
    need = block_size + 1
    n = max(2 * need, math.floor((need - 0.5) / min(val_fraction, 1 - val_fraction)))
    while int(round(n * val_fraction)) < need or n - int(round(n * val_fraction)) < need:
        n += 1  # a step or two at most: the held-out count is rounded
    return n


def check_corpus_length(train_ids, val_ids, block_size: int, val_fraction: float = VAL_FRACTION) -> None:
    """CorpusError unless each split holds at least block_size + 1 tokens (one input + its targets)."""
    need = block_size + 1
    if len(train_ids) < need or len(val_ids) < need:
        total = len(train_ids) + len(val_ids)
        raise CorpusError(
            "corpus.too_short",
            "The text is too short: {total:,} tokens, of which {held_out:,} are held out for validation. With "
            "a context of {block_size} tokens each part needs at least {need:,} tokens, so the text needs "
            "about {need_total:,} tokens in all. Use a longer text or a smaller context.",
            total=total,
            held_out=len(val_ids),
            block_size=block_size,
            need=need,
            need_total=min_corpus_tokens(block_size, val_fraction),
        )


def prepare_corpus(text: str, block_size: int, *, val_fraction: float = VAL_FRACTION, name: str = "text") -> Corpus:
    """Tokenise ``text`` with the GPT-2 BPE and split it; CorpusError if it is too short to train on."""
    if not isinstance(text, str) or not text.strip():
        raise CorpusError("corpus.empty", "The training text is empty.")
    ids = load_tokenizer().encode(text)
    train_ids, val_ids = split_ids(ids, val_fraction)
    check_corpus_length(train_ids, val_ids, block_size, val_fraction)
    return Corpus(train_ids, val_ids, n_chars=len(text), name=name)
