"""The GPT-2 tokenizer, offline: tiktoken's encoding built from the BPE files in ``playground/assets/``.

``tiktoken.get_encoding("gpt2")`` downloads these same two files; building the encoding from the
bundled copies (checked against the same sha256 tiktoken uses) means a classroom with no network
still tokenizes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiktoken
from tiktoken_ext.openai_public import r50k_pat_str

from playground import assets
from playground.errors import UserError

ASSETS = assets.path()
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
END_OF_TEXT = "<|endoftext|>"

# Visible stand-ins for characters a chip or an axis label would otherwise swallow.
_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


@dataclass(frozen=True)
class TokenPiece:
    id: int
    text: str  # the token's own text, or "" when its bytes are only part of a UTF-8 character
    display: str  # a one-line form that shows spaces, newlines and raw bytes
    is_partial: bool  # True when the token is a fragment of a multi-byte character (CJK, emoji)


class GPT2Tokenizer:
    """A thin wrapper over a tiktoken ``Encoding`` that also gives display pieces."""

    def __init__(self, encoding: tiktoken.Encoding):
        self.encoding = encoding
        self.n_vocab = encoding.n_vocab
        self.eot_id = encoding.eot_token

    def encode(self, text: str) -> list[int]:
        """Text -> ids. ``<|endoftext|>`` typed by a user is ordinary text, and lone surrogates
        (which cannot be UTF-8 encoded) become U+FFFD instead of raising."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return self.encoding.encode(text, disallowed_special=())

    def decode(self, ids) -> str:
        return self.encoding.decode([int(i) for i in ids], errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        if not 0 <= int(token_id) < self.n_vocab:
            return b""
        return self.encoding.decode_single_token_bytes(int(token_id))

    def pieces(self, ids) -> list[TokenPiece]:
        return [self.piece(i) for i in ids]

    def piece(self, token_id: int) -> TokenPiece:
        token_id = int(token_id)
        if not 0 <= token_id < self.n_vocab:
            return TokenPiece(token_id, "", f"⟨id {token_id}⟩", True)
        raw = self.token_bytes(token_id)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # A byte-level BPE token can end mid-character: show its bytes rather than "�".
            return TokenPiece(token_id, "", "⟨" + " ".join(f"{b:02x}" for b in raw) + "⟩", True)
        return TokenPiece(token_id, text, display_text(text), False)


def display_text(text: str) -> str:
    """Make whitespace and control characters visible: " I" -> "␣I", "\\n" -> "↵"."""
    out = []
    for ch in text:
        if ch in _VISIBLE:
            out.append(_VISIBLE[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"⟨{ord(ch):02x}⟩")
        else:
            out.append(ch)
    return "".join(out) or "∅"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte (openai/gpt-2 encoder.py): vocab.bpe is written
    with these, e.g. "Ġ" for the space byte."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars)))


def mergeable_ranks(encoder_json: Path) -> dict[bytes, int]:
    """GPT-2's byte sequence -> rank table, as tiktoken wants it, read from encoder.json alone.

    In GPT-2's files every token's id *is* its merge rank (the 256 bytes first, then one token
    per line of vocab.bpe), which tiktoken's ``data_gym_to_mergeable_bpe_ranks`` re-derives from
    vocab.bpe and checks against encoder.json -- 0.4-0.6 s at every start of the app. The files'
    sha256 are checked before this is called, so the check would always pass; a test holds the
    two tables equal."""
    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    encoder = json.loads(encoder_json.read_text(encoding="utf-8"))
    encoder.pop(END_OF_TEXT, None)
    return {bytes(to_byte[c] for c in token): rank for token, rank in encoder.items()}


@functools.lru_cache(maxsize=1)
def load_tokenizer(assets_dir: str | None = None) -> GPT2Tokenizer:
    """The GPT-2 BPE from local files; raises FileNotFoundError / ValueError naming the bad file."""
    folder = Path(assets_dir) if assets_dir else ASSETS
    vocab_bpe, encoder_json = folder / "vocab.bpe", folder / "encoder.json"
    for path, expected in ((vocab_bpe, VOCAB_BPE_SHA256), (encoder_json, ENCODER_JSON_SHA256)):
        if not path.is_file():
            raise FileNotFoundError(f"GPT-2 BPE file missing: {path}")
        if _sha256(path) != expected:
            raise ValueError(f"{path} does not match the GPT-2 BPE file (sha256 mismatch)")
    ranks = mergeable_ranks(encoder_json)
    encoding = tiktoken.Encoding(
        name="gpt2",
        explicit_n_vocab=50257,
        pat_str=r50k_pat_str,
        mergeable_ranks=ranks,
        special_tokens={END_OF_TEXT: 50256},
    )
    return GPT2Tokenizer(encoding)


def tokenizer_of(model) -> Any:
    """The tokenizer whose words a model's ids mean: a checkpoint folder's own (``model.tokenizer``, a Llama,
    Qwen3 or Mistral folder's ``tokenizer.json``), else GPT-2's BPE. Every view that turns ids into text
    asks this, never ``load_tokenizer`` alone, so a folder's model shows its own tokens."""
    return getattr(model, "tokenizer", None) or load_tokenizer()


def has_own_tokenizer(model) -> bool:
    """Whether ``model``'s ids are not GPT-2's: the views built on GPT-2's byte-level BPE say so rather than guess."""
    return getattr(model, "tokenizer", None) is not None


def refuse_own_tokenizer(model, view: str) -> None:
    """A UserError saying why ``view`` ("compare" or "lessons") cannot read ``model``, when its ids are not GPT-2's."""
    if not has_own_tokenizer(model):
        return
    name, n = model.tokenizer.name, model.tokenizer.n_vocab
    if view == "lessons":
        raise UserError(
            "model.lessons_own_tokenizer",
            "The lessons' questions are written for GPT-2's tokenizer, and this model ({name}) has its own ({n:,} "
            "tokens): they would ask about the wrong tokens. Look at it in the Generate & attention and Inside tabs, "
            "or build a model on GPT-2's tokenizer for the lessons.",
            name=name,
            n=n,
        )
    raise UserError(
        "model.compare_own_tokenizer",
        "The Score & compare tab still reads text with GPT-2's tokenizer, and this model ({name}) has its own "
        "({n:,} tokens): GPT-2's ids would mean other words to it. Generate, the chips, the attention maps, the "
        "step view and the Inside tab's lens read its own tokenizer.",
        name=name,
        n=n,
    )
