"""Replay files as untrusted input: every size checked before reading, every field checked by name.

A replay file is JSON, or a run export (.json or .npz) carrying the record under "replay". An .npz is
a zip whose members declare their sizes twice (the zip entry and the .npy header): both are checked
against a bound, and the memory the record takes to parse is reserved in the budget, before a byte
of ``metadata.npy`` is read. A record asks for at most as many tokens as a Generate run may make
(``runs.MAX_NEW_TOKENS``), so a replay costs no more than a run.
"""

from __future__ import annotations

import json
import math
import numbers
import struct
import zipfile
from pathlib import Path

import numpy as np

from playground.errors import UserError
from playground.runtime.machine_memory import format_bytes
from playground.runtime.memory import BUDGET
from playground.server.export_formats import max_export_bytes
from playground.server.runs import MAX_NEW_TOKENS, MAX_PROMPT_CHARS
from playground.settings import SamplingSettings

FORMAT = "gpt-playground-replay"
VERSION = 1
MAX_REPLAY_JSON_BYTES = 50_000_000  # a replay record is a few KB; a full .json export with attention can be huge
# metadata.npy holds the JSON of a run export as one numpy unicode string (4 bytes a character).
MAX_METADATA_BYTES = 4 * MAX_REPLAY_JSON_BYTES
# Parsing JSON into Python objects takes a few times the text: reserved in the budget while it runs.
PARSE_FACTOR = 4
MAX_PROMPT_IDS = MAX_PROMPT_CHARS  # a token is at least one character of the prompt
# A run export has three members; zipfile builds an object per listed member before anything else,
# so a directory of millions of entries is refused from the end record first.
MAX_ZIP_MEMBERS = 16


class ReplayError(UserError):
    """A replay file that cannot be replayed here; the message says why and what to do."""


def read_record(path) -> dict:
    """A replay record from a replay file or a full run export (.json or .npz), sizes checked first."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError("replay.missing", "The replay file is missing; upload it again.")
    if zipfile.is_zipfile(path):
        text = _npz_metadata(path)
    else:
        size = path.stat().st_size
        if size > MAX_REPLAY_JSON_BYTES:
            raise ReplayError(
                "replay.too_big",
                "This file is {mb:,.0f} MB; a replay file is a few KB. Export the run's replay file (or a .npz "
                "export) and load that.",
                mb=size / 1000000.0,
            )
        with BUDGET.reserve(2 * size, "reading a replay file", "replay"):  # the bytes and their text
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                raise ReplayError(
                    "replay.not_json", "This file is not a replay file (it is not JSON: {reason}).", reason=e
                ) from None
    with BUDGET.reserve(len(text) * (1 + PARSE_FACTOR), "reading a replay file", "replay"):  # the text and its objects
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as e:
            raise ReplayError(
                "replay.not_json", "This file is not a replay file (it is not JSON: {reason}).", reason=e
            ) from None
        except RecursionError:
            raise ReplayError(
                "replay.nested", "This file nests its JSON too deeply to be a replay file of this app."
            ) from None
    return check_record(meta.get("replay", meta) if isinstance(meta, dict) else meta)


def _npz_metadata(path: Path) -> str:
    """The JSON text in an .npz export's ``metadata.npy``, after checking every member's declared
    size (zip entry) and the metadata's .npy header (a 0-d unicode string of a bounded size)."""
    limit = max_export_bytes()
    members = _zip_member_count(path)
    if members > MAX_ZIP_MEMBERS:
        raise ReplayError(
            "replay.npz_members",
            "This .npz lists {n:,} members; a run export has {most} or fewer. It is not read.",
            n=members,
            most=MAX_ZIP_MEMBERS,
        )
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            for info in infos:
                if info.file_size > limit:
                    raise _member_too_big(info.filename, info.file_size, limit)
            meta_info = next((i for i in infos if i.filename == "metadata.npy"), None)
            if meta_info is None:
                raise ReplayError("replay.npz", "This .npz is not a run export of this app ({reason}).", reason="")
            if meta_info.file_size > MAX_METADATA_BYTES:
                raise _member_too_big("metadata.npy", meta_info.file_size, MAX_METADATA_BYTES)
            with zf.open(meta_info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, _fortran, dtype = read_header(member, max_header_size=10_000)
                declared = math.prod(shape) * dtype.itemsize
                if dtype.kind != "U" or shape != ():
                    raise ReplayError(
                        "replay.npz_metadata",
                        "This .npz's metadata.npy is not a run export's (it declares {dtype} of shape {shape}, "
                        "not one string).",
                        dtype=str(dtype),
                        shape=str(shape),
                    )
                if declared > MAX_METADATA_BYTES:
                    raise _member_too_big("metadata.npy", declared, MAX_METADATA_BYTES)
                with BUDGET.reserve(2 * declared, "reading a replay file", "replay"):
                    raw = member.read(declared + 1)
                    if len(raw) != declared:
                        raise ReplayError(
                            "replay.npz_short",
                            "This .npz's metadata.npy holds {got:,} bytes where its header declares {declared:,}.",
                            got=len(raw),
                            declared=declared,
                        )
                    return str(np.frombuffer(raw, dtype=dtype)[0])
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, UserError):
            raise
        raise ReplayError("replay.npz", "This .npz is not a run export of this app ({reason}).", reason=e) from None


def _zip_member_count(path: Path) -> int:
    """How many members a zip's end-of-directory record lists (read from the file's last 64 KB; a
    zip64 file says 0xFFFF there, which is more than a run export has)."""
    with open(path, "rb") as f:
        end = f.seek(0, 2)
        f.seek(max(0, end - (22 + 0xFFFF)))  # the record, after a comment of at most 64 KB
        tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return 0  # no record: zipfile's own refusal follows
    return struct.unpack("<H", tail[at + 10 : at + 12])[0]


def _member_too_big(name: str, nbytes: int, limit: int) -> ReplayError:
    return ReplayError(
        "replay.npz_member_big",
        "This .npz declares its member {member} as {size}; a run export's is at most {limit}. It is not read.",
        member=name[:80],
        size=format_bytes(nbytes),
        limit=format_bytes(limit),
    )


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_record(record) -> dict:
    """``record`` if it is a replay record this app can replay, else ReplayError naming the field."""
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ReplayError(
            "replay.no_record",
            "This file is not a replay file or run export of GPT Playground (no replay record in it).",
        )
    if record.get("version") != VERSION:
        raise ReplayError(
            "replay.version",
            "This replay file is version {version!r}; this app reads version {supported}.",
            version=record.get("version"),
            supported=VERSION,
        )
    need = ("recipe", "weights_sha256", "prompt_ids", "settings", "seed", "token_ids", "probs")
    missing = [k for k in need if k not in record]
    if missing:
        raise ReplayError("replay.lacks", "The replay record lacks {fields}.", fields=", ".join(missing))
    ids, tokens, probs = record["prompt_ids"], record["token_ids"], record["probs"]
    if not (isinstance(ids, list) and ids and all(_is_whole(i) and i >= 0 for i in ids)):
        raise ReplayError("replay.prompt_ids", "The replay record's prompt_ids must be a non-empty list of token ids.")
    if len(ids) > MAX_PROMPT_IDS:
        raise ReplayError(
            "replay.prompt_long",
            "The replay record's prompt has {n:,} tokens; a run's prompt has at most {limit:,}.",
            n=len(ids),
            limit=MAX_PROMPT_IDS,
        )
    if not (isinstance(tokens, list) and tokens and all(_is_whole(i) and i >= 0 for i in tokens)):
        raise ReplayError("replay.no_tokens", "The replay record has no generated tokens to compare with.")
    if len(tokens) > MAX_NEW_TOKENS:
        raise ReplayError(
            "replay.too_many_tokens",
            "The replay record lists {n:,} generated tokens; a run makes at most {limit}, and so does a replay.",
            n=len(tokens),
            limit=MAX_NEW_TOKENS,
        )
    if not (isinstance(probs, list) and len(probs) == len(tokens)):
        raise ReplayError(
            "replay.probs_count",
            "The replay record's probs must list one probability for each of its {n:,} generated tokens.",
            n=len(tokens),
        )
    if not all(_is_number(p) and 0 <= p <= 1 for p in probs):
        raise ReplayError("replay.probs_range", "The replay record's probs must be numbers between 0 and 1.")
    if not isinstance(record["weights_sha256"], str):
        raise ReplayError("replay.sha", "The replay record's weights_sha256 must be a sha256 in hex.")
    if not isinstance(record["recipe"], dict):
        raise ReplayError("replay.recipe", "The replay record's recipe must be an object naming the model.")
    check_settings(record["settings"], record["seed"])
    return record


def check_settings(settings, seed) -> SamplingSettings:
    """The record's sampling settings and seed, typed by the app's one parser (the same ranges Generate
    takes), refused as a ReplayError naming the record's field."""
    try:
        return SamplingSettings.from_record(settings, seed)
    except UserError as e:
        raise ReplayError(e.key, e.template, **e.fields) from None
