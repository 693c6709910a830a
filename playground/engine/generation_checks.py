"""What a generation checks before its first step: its sampling settings, typed once, and its prompt's ids.

The settings' rules belong to ``playground.settings.SamplingSettings``; a prompt is a non-empty list of
ids inside the model's vocabulary. Each refusal is a ``UserError`` (a ValueError) whose message a UI can
show as it is.
"""

from __future__ import annotations

from playground.errors import UserError
from playground.settings import SamplingSettings


def checked_settings(temperature, top_k, top_p, seed, max_new_tokens) -> SamplingSettings:
    """A generation's settings as typed values; its number of new tokens must be given."""
    if max_new_tokens is None:
        raise UserError("generate.max_new_none", "The number of new tokens must be a whole number, got None.")
    return SamplingSettings(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        max_new_tokens=max_new_tokens,
    )


def checked_prompt(prompt_ids, vocab_size: int) -> list[int]:
    """The prompt's ids as ints, refused when there are none or one is outside the vocabulary."""
    ids = [int(i) for i in prompt_ids]
    if not ids:
        raise UserError("generate.prompt_empty", "The prompt is empty: type some text to continue.")
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise UserError(
            "generate.token_outside",
            "Token id {token_id} is outside the vocabulary (0..{last}).",
            token_id=bad[0],
            last=vocab_size - 1,
        )
    return ids
