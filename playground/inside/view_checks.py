"""What every view of the inside checks before it computes: its ids, positions, layers, target, memory.

LensError names what is wrong, for the user; ``reserve_logits`` holds the view's logits in the
memory budget while it computes.
"""

from __future__ import annotations

from playground.errors import UserError
from playground.runtime.memory import BUDGET

LONGEST_TOKEN_CHARS = 66  # GPT-2's longest token (id 38093, a space and 65 "=")
MAX_TARGET_CHARS = 2 * LONGEST_TOKEN_CHARS  # room for "\\n" typed as two characters


class LensError(UserError):
    """A request the lenses cannot answer (bad position, target, layer...); for the user."""


def window_error(first, stop, T: int) -> LensError:
    return LensError(
        "inside.lens_window",
        "The lens window must lie in positions 0–{last}, got {first!r}–{stop!r}.",
        last=T - 1,
        first=first,
        stop=stop,
    )


def check_ids(ids) -> list[int]:
    ids = [int(i) for i in ids]
    if not ids:
        raise LensError("inside.no_tokens", "Generate first: there are no tokens to look at.")
    return ids


def check_position(position, T: int, name: str = "Position") -> int:
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < T:
        raise LensError(
            "inside.position_range",
            "{name} must be a whole number from 0 to {last}, got {value!r}.",
            name=name,
            last=T - 1,
            value=position,
        )
    return position


def check_layer(layer, n: int, name: str = "Layer") -> int:
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise LensError(
            "inside.layer_range",
            "{name} must be a whole number from 0 to {last}, got {value!r}.",
            name=name,
            last=n - 1,
            value=layer,
        )
    return layer


def check_target(model, target_id) -> int:
    V = model.cfg.vocab_size
    if isinstance(target_id, bool) or not isinstance(target_id, int) or not 0 <= target_id < V:
        raise LensError(
            "inside.target_id_range",
            "The target token id must be a whole number from 0 to {last:,}, got {value!r}.",
            last=V - 1,
            value=target_id,
        )
    return target_id


def target_or_next(model, ids: list[int], position: int, target_id) -> int:
    """The token whose logit is explained: the one that came next, unless one is given."""
    if target_id is None:
        if position + 1 >= len(ids):
            raise LensError("inside.last_no_next", "The last position has no next token: type a target token.")
        target_id = ids[position + 1]
    return check_target(model, target_id)


def resolve_target(tokenizer, text: str) -> int:
    """The single token ``text`` encodes to; LensError when it is empty or more than one token. A
    text longer than any token is refused before the tokenizer sees it."""
    if not isinstance(text, str) or text == "":
        raise LensError("inside.target_missing", "Type the target token (for example ' the' or '\\n').")
    if len(text) > MAX_TARGET_CHARS:
        raise LensError(
            "inside.target_long",
            "The target must be exactly one token; this text is {n:,} characters, and the longest GPT-2 token "
            "is {longest}.",
            n=len(text),
            longest=LONGEST_TOKEN_CHARS,
        )
    text = text.replace("\\n", "\n")
    ids = tokenizer.encode(text)
    if len(ids) != 1:
        pieces = " + ".join(repr(tokenizer.decode([i])) for i in ids)
        raise LensError(
            "inside.target_not_one",
            "The target must be exactly one token; {text!r} is {n} tokens ({pieces}). A leading space is part "
            "of the token: ' the' is one token, 'the ' is two.",
            text=text,
            n=len(ids),
            pieces=pieces,
        )
    return ids[0]


def capture_bytes(cfg, tokens: int) -> int:
    """What a capturing forward of ``tokens`` keeps (the residual stream of every layer, each layer's head
    outputs and MLP outputs: 3·(L+1)·T·d float32) and what one layer holds while it runs: its attention
    scores and weights (2·heads·T²) and its feed-forward's hidden rows before and after the activation."""
    layer = 2 * cfg.n_heads * tokens * tokens * 4 + 2 * tokens * cfg.ff_dim * 4
    return 3 * (cfg.n_layers + 1) * tokens * cfg.emb_dim * 4 + layer


def reserve_logits(model, rows: int, what: str, captured_tokens: int = 0):
    """Held in the memory budget while a view computes: a few copies of ``rows`` float32 logit
    rows (softmax, log-softmax), and what a capturing forward of ``captured_tokens`` keeps
    (``capture_bytes``)."""
    cfg = model.cfg
    return BUDGET.reserve(4 * rows * cfg.vocab_size * 4 + capture_bytes(cfg, captured_tokens), what, "lens")
