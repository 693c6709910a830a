"""Tokens as the pages show them: GPT-2's BPE or a checkpoint's own tokenizer.

A token's display text, the prompt's chips, and the Tokenizer tab's replay of the BPE merges."""

from __future__ import annotations

from playground.engine.tokenizer import display_text, load_tokenizer, refuse_own_tokenizer, tokenizer_of
from playground.inside.bpe import (
    MAX_REPLAY_BYTES,
    TokenizerViewError,
    hex_bytes,
    part_display,
    pretokens,
    replay_text,
    replay_word,
    token_view,
    tokenize_view,
)

__all__ = [
    "MAX_REPLAY_BYTES",
    "TokenizerViewError",
    "display_text",
    "gpt2_tokenizer",
    "hex_bytes",
    "part_display",
    "pretokens",
    "refuse_own_tokenizer",
    "replay_text",
    "replay_word",
    "token_view",
    "tokenize_view",
    "tokenizer_of",
]


def gpt2_tokenizer():
    """GPT-2's BPE tokenizer (loaded once; the bundled files need no network)."""
    return load_tokenizer()
