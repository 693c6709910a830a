"""How GPT-2 cuts text into tokens: ids, bytes, characters, and the BPE merges replayed.

How GPT-2 cuts text into tokens, for a learner: each token's id and bytes, the characters that
byte-fragment tokens build together, and the BPE merges of a word replayed from ``vocab.bpe``.

GPT-2's BPE works on bytes, not characters. A Chinese character is three UTF-8 bytes and an emoji
four, and a token may hold only some of them (从 is e4 bb 8e: one token for e4 bb, another for 8e).
Decoding such a token alone gives "�"; here the tokens are grouped under the characters they
build instead.

The merge replay is the original GPT-2 algorithm (openai/gpt-2 ``encoder.py``): start from the
word's bytes and, again and again, merge the adjacent pair that comes first in ``vocab.bpe``
(its line there is its rank) until no adjacent pair is in the file. tiktoken reaches the same
tokens by a faster route; the tests check that the two agree.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import regex
from tiktoken_ext.openai_public import r50k_pat_str

from playground.engine.tokenizer import ASSETS, GPT2Tokenizer, bytes_to_unicode, display_text, load_tokenizer
from playground.errors import UserError

MAX_REPLAY_BYTES = 256  # a "word" longer than this (one pre-token) is refused: the replay is O(n²) per merge
_PRETOKEN = regex.compile(r50k_pat_str)


class TokenizerViewError(UserError):
    """Input the tokenizer view cannot show; the message is written for the user."""


# ----------------------------------------------------------------------------------------------
# Bytes -> characters


@dataclass(frozen=True)
class Segment:
    """A run of bytes that is one character, a character still missing bytes at the end of the
    data (``complete`` False), or a byte that is not valid UTF-8 where it stands (``char`` None)."""

    start: int
    end: int
    char: str | None
    complete: bool = True


def _utf8_length(lead: int) -> int:
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0  # a continuation byte or an impossible lead byte


def utf8_segments(data: bytes) -> list[Segment]:
    """Cut bytes into characters the way a UTF-8 decoder does, keeping invalid bytes as their own
    segments (where ``bytes.decode(errors="replace")`` would print "�")."""
    out, i, n = [], 0, len(data)
    while i < n:
        length = _utf8_length(data[i])
        if length == 0:
            out.append(Segment(i, i + 1, None))
            i += 1
            continue
        j = i + 1
        while j < min(n, i + length) and 0x80 <= data[j] <= 0xBF:
            j += 1
        if j - i == length:
            try:
                out.append(Segment(i, j, data[i:j].decode("utf-8")))
            except UnicodeDecodeError:  # overlong forms, surrogates, > U+10FFFF
                out.extend(Segment(k, k + 1, None) for k in range(i, j))
            i = j
        elif j == n:  # the data ends inside the character: the next token may complete it
            out.append(Segment(i, j, None, complete=False))
            i = j
        else:
            out.extend(Segment(k, k + 1, None) for k in range(i, j))
            i = j
    return out


def visible_char(ch: str) -> str:
    """A character as a learner can see it: whitespace marked (␣ ↵), and invisible ones (the
    zero-width joiner inside 👩‍👧, the emoji variation selector) named by their code point."""
    if len(ch) == 1 and unicodedata.category(ch) in ("Cf", "Mn", "Zl", "Zp", "Cc", "Co", "Cn") and ch not in "\n\t\r":
        return f"⟨U+{ord(ch):04X}⟩"
    return display_text(ch)


def hex_bytes(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


# ----------------------------------------------------------------------------------------------
# A prompt's tokens, grouped by the characters they build


@dataclass(frozen=True)
class Fragment:
    """Bytes ``first``–``last`` (1-based) of a ``size``-byte character ``shown`` (kind "of"), of an
    unfinished character ("unfinished"), or bytes that are not valid UTF-8 where they stand ("invalid")."""

    first: int
    last: int
    size: int
    kind: str
    shown: str = ""

    def __str__(self) -> str:
        which = f"byte {self.first}" if self.first == self.last else f"bytes {self.first}–{self.last}"
        if self.kind == "of":
            return f"{which} of {self.size} of {self.shown}"
        if self.kind == "unfinished":
            return f"{which} of an unfinished character"
        return f"{which}: not valid UTF-8 here"


@dataclass
class TokenInfo:
    position: int
    id: int
    bytes: bytes
    text: str | None  # None when the bytes are not whole characters
    group: int
    note: str = ""  # for a fragment: which bytes of which character it holds
    display: str = ""  # whole characters as text (␣ for a space), the bytes of partial ones in hex
    parts: tuple = ()  # the note as data: whole characters (str) and Fragments, joined by " + "

    @property
    def is_fragment(self) -> bool:
        return self.text is None

    def as_dict(self) -> dict:
        return {
            "position": self.position,
            "id": self.id,
            "bytes": list(self.bytes),
            "text": self.text,
            "group": self.group,
            "fragment": self.is_fragment,
        }


@dataclass
class CharGroup:
    """Tokens that only make sense together: those sharing a multi-byte character. A token made
    of whole characters is a group of its own."""

    index: int
    positions: list[int]
    bytes: bytes
    text: str | None  # None when the bytes are not valid UTF-8 (or a character is left unfinished)
    complete: bool = True  # False when the bytes end inside a character (the next token may finish it)

    @property
    def display(self) -> str:
        if self.text is None:
            return "⟨" + hex_bytes(self.bytes) + "⟩"
        return "".join(visible_char(c) for c in self.text)

    def as_dict(self) -> dict:
        return {"index": self.index, "positions": self.positions, "bytes": list(self.bytes), "text": self.text}


@dataclass
class TokenView:
    tokens: list[TokenInfo] = field(default_factory=list)
    groups: list[CharGroup] = field(default_factory=list)

    def as_dict(self) -> dict:
        n_bytes = sum(len(t.bytes) for t in self.tokens)
        return {
            "n_tokens": len(self.tokens),
            "n_bytes": n_bytes,
            "tokens": [t.as_dict() for t in self.tokens],
            "groups": [g.as_dict() for g in self.groups],
        }


def _fragment(seg: Segment, lo: int, hi: int) -> Fragment:
    """'bytes 1–2 of 3 of 从' for the part [lo, hi) of a segment a token holds."""
    first, last, size = lo - seg.start + 1, hi - seg.start, seg.end - seg.start
    if seg.char is not None:
        shown = visible_char(seg.char)
        shown += "" if shown.startswith("⟨U+") else f" (U+{ord(seg.char):04X})"
        return Fragment(first, last, size, "of", shown)
    return Fragment(first, last, size, "invalid" if seg.complete else "unfinished")


def token_view(ids, tok: GPT2Tokenizer | None = None) -> TokenView:
    """Each token with its bytes, grouped under the characters its bytes help build."""
    tok = tok or load_tokenizer()
    raw = [tok.token_bytes(int(i)) for i in ids]
    data = b"".join(raw)
    segments = utf8_segments(data)
    starts, pos = [], 0
    for r in raw:
        starts.append(pos)
        pos += len(r)
    seg_at = {}  # byte offset -> segment
    for seg in segments:
        for k in range(seg.start, seg.end):
            seg_at[k] = seg
    boundaries = {seg.start for seg in segments} | {len(data)}
    view = TokenView()
    for p, (token_id, r, start) in enumerate(zip(ids, raw, starts)):
        end = start + len(r)
        whole = start in boundaries and end in boundaries
        if not view.groups or start in boundaries:
            view.groups.append(CharGroup(len(view.groups), [], b"", None))
        group = view.groups[-1]
        group.positions.append(p)
        group.bytes += r
        text: str | None = None
        notes: list[str | Fragment] = []
        shown: list[str] = []
        if whole and all(seg_at[k].char is not None for k in range(start, end)):
            text = r.decode("utf-8")
            shown = ["".join(visible_char(c) for c in text) if len(text) == 1 else display_text(text)]
        else:
            for seg in dict.fromkeys(seg_at[k] for k in range(start, end)):  # in order, once each
                lo, hi = max(seg.start, start), min(seg.end, end)
                if seg.char is not None and lo == seg.start and hi == seg.end:
                    notes.append(visible_char(seg.char))
                    shown.append(display_text(seg.char))
                else:
                    notes.append(_fragment(seg, lo, hi))
                    shown.append("⟨" + hex_bytes(data[lo:hi]) + "⟩")
        note = " + ".join(str(n) for n in notes)
        view.tokens.append(TokenInfo(p, int(token_id), r, text, group.index, note, "".join(shown), tuple(notes)))
    for g in view.groups:
        try:
            g.text = g.bytes.decode("utf-8")
        except UnicodeDecodeError:
            g.text = None
    if view.groups and segments and not segments[-1].complete:
        view.groups[-1].complete = False
    return view


def tokenize_view(text: str, tok: GPT2Tokenizer | None = None) -> TokenView:
    if not isinstance(text, str):
        raise TokenizerViewError(
            "tokenizer.text_not_str", "The text must be a string, got {kind}.", kind=type(text).__name__
        )
    tok = tok or load_tokenizer()
    return token_view(tok.encode(text), tok)


# ----------------------------------------------------------------------------------------------
# BPE merges, replayed from vocab.bpe


@functools.lru_cache(maxsize=4)
def merge_ranks(vocab_bpe: str | None = None) -> dict[tuple[bytes, bytes], int]:
    """(left bytes, right bytes) -> rank: the merge's line in vocab.bpe, counting from 0 after the
    version header. The token it makes has id 256 + rank in GPT-2's vocabulary."""
    path = Path(vocab_bpe) if vocab_bpe else ASSETS / "vocab.bpe"
    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    lines = path.read_text(encoding="utf-8").split("\n")
    if not lines or not lines[0].startswith("#version"):
        raise ValueError(f"{path} does not look like a GPT-2 vocab.bpe (no #version header)")
    ranks: dict[tuple[bytes, bytes], int] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        left, right = line.split(" ")
        ranks[(bytes(to_byte[c] for c in left), bytes(to_byte[c] for c in right))] = len(ranks)
    return ranks


@dataclass
class MergeStep:
    rank: int
    left: bytes
    right: bytes
    count: int  # how many places in the word this pair was merged at once
    parts: list[bytes]  # the word's pieces after this merge

    def as_dict(self, tok: GPT2Tokenizer) -> dict:
        merged = self.left + self.right
        return {
            "rank": self.rank,
            "left": list(self.left),
            "right": list(self.right),
            "count": self.count,
            "merged_id": tok.encoding.encode_single_token(merged),
            "parts": [list(p) for p in self.parts],
        }


@dataclass
class WordMerges:
    text: str
    parts0: list[bytes]  # the starting bytes
    steps: list[MergeStep]
    token_ids: list[int]

    @property
    def final(self) -> list[bytes]:
        return self.steps[-1].parts if self.steps else self.parts0

    def as_dict(self, tok: GPT2Tokenizer) -> dict:
        return {
            "text": self.text,
            "bytes": [p[0] for p in self.parts0],
            "steps": [s.as_dict(tok) for s in self.steps],
            "token_ids": self.token_ids,
        }


def pretokens(text: str) -> list[str]:
    """GPT-2 splits text into words (letters with their leading space, digits, punctuation runs,
    spaces) before BPE: merges never cross these borders."""
    return _PRETOKEN.findall(text)


def replay_word(word: str, tok: GPT2Tokenizer | None = None, ranks=None) -> WordMerges:
    """BPE of one pre-token, merge by merge, lowest rank first."""
    tok = tok or load_tokenizer()
    ranks = ranks if ranks is not None else merge_ranks()
    data = word.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8")
    if len(data) > MAX_REPLAY_BYTES:
        raise TokenizerViewError(
            "tokenizer.word_too_long",
            "That word is {n:,} bytes long; the merge replay shows words of up to {limit} bytes. Pick a shorter word.",
            n=len(data),
            limit=MAX_REPLAY_BYTES,
        )
    parts = [bytes([b]) for b in data]
    start, steps = list(parts), []
    while len(parts) > 1:
        pairs = {(a, b) for a, b in zip(parts, parts[1:])}
        best = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
        if best not in ranks:
            break
        merged, i, count = [], 0, 0
        while i < len(parts):  # every occurrence of the pair, left to right
            if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                merged.append(parts[i] + parts[i + 1])
                i += 2
                count += 1
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
        steps.append(MergeStep(ranks[best], best[0], best[1], count, list(parts)))
    ids = [tok.encoding.encode_single_token(p) for p in parts]
    return WordMerges(word, start, steps, ids)


def replay_text(text: str, tok: GPT2Tokenizer | None = None) -> list[WordMerges]:
    """The merges of every pre-token of ``text`` (a word, or a few)."""
    if not isinstance(text, str):
        raise TokenizerViewError(
            "tokenizer.word_not_str", "The word must be a string, got {kind}.", kind=type(text).__name__
        )
    if not text:
        raise TokenizerViewError("tokenizer.no_word", "Type or pick a word to see its merges.")
    tok = tok or load_tokenizer()
    words = pretokens(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    if len(words) > 16:
        raise TokenizerViewError(
            "tokenizer.too_many_words", "That is {n} words; the merge replay shows up to 16 at a time.", n=len(words)
        )
    return [replay_word(w, tok) for w in words]


def part_display(part: bytes) -> str:
    """A piece of a word during the replay: its text, or its bytes in hex when it is not whole
    characters."""
    try:
        return display_text(part.decode("utf-8"))
    except UnicodeDecodeError:
        return "⟨" + hex_bytes(part) + "⟩"
