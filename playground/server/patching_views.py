"""Activation and path patching for the page and the API: typed text in, labelled grids out.

The Inside tab's patching view and the ``/activation_patching`` and ``/path_patching`` endpoints call
these: the prompts and the two tokens are text, read here with the GPT-2 tokenizer (a prompt pair of
different lengths is refused with both lengths and how to fix it); the grid comes from
``playground.inside.patching`` with its positions labelled by the clean prompt's tokens, while the
view holds its memory in the budget. On a ZeroGPU Space a model big enough for the GPU (``gpu.uses_gpu_slots``)
has its grid computed in a GPU slot (``gpu_grid_steps``), checked here first and stopped from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from playground.engine.tokenizer import load_tokenizer, tokenizer_of
from playground.errors import UserError
from playground.inside import patching, patching_paths
from playground.inside.interventions import StopRequested
from playground.inside.view_checks import resolve_target
from playground.runtime.memory import BUDGET
from playground.server.gpu import gpu_work, moved_in, to_cpu, uses_gpu_slots

MAX_PROMPT_CHARS = 1000  # read only after this check: the token limit (patching_pairs.MAX_TOKENS) is far below it
TARGETS = (*patching.TARGETS, "path")

# Pairs that show something on GPT-2 and on the bundled Shakespeare model: a repeated phrase whose first
# word changes (induction: the bundled model's clean and corrupted logit differences are 3.7 and −1.1), two
# names swapped (indirect object), and the speakers of a greeting swapped.
SUGGESTED_PAIRS = (
    {
        "name": "induction",
        "clean": "The cat sat on the mat. The dog ran to the park. The cat",
        "corrupted": "The cat sat on the mat. The dog ran to the park. The dog",
        "answer": " sat",
        "wrong": " ran",
    },
    {
        "name": "names",
        "clean": "When Mary and John went to the store, John gave a drink to",
        "corrupted": "When Mary and John went to the store, Mary gave a drink to",
        "answer": " Mary",
        "wrong": " John",
    },
    {
        "name": "romeo",
        "clean": "ROMEO: Good morrow, Juliet.\nJULIET: Good morrow,",
        "corrupted": "JULIET: Good morrow, Romeo.\nROMEO: Good morrow,",
        "answer": " Romeo",
        "wrong": " Juliet",
    },
)


def _prompt(text, name: str, tok=None) -> list[int]:
    if not isinstance(text, str) or not text:
        raise UserError("inside.patch_prompt_missing", "Type the {name} prompt.", name=name)
    if len(text) > MAX_PROMPT_CHARS:
        raise UserError(
            "inside.patch_prompt_long",
            "The {name} prompt is {n:,} characters; patching takes at most {limit:,}.",
            name=name,
            n=len(text),
            limit=MAX_PROMPT_CHARS,
        )
    return (tok or load_tokenizer()).encode(text)


def read_pair(model, clean, corrupted, answer, wrong) -> patching.PatchPair:
    """The typed prompts and tokens as a checked pair (UserError naming what to change)."""
    tok = tokenizer_of(model)  # a checkpoint folder's own tokenizer, else GPT-2's
    clean_ids, corrupted_ids = _prompt(clean, "clean", tok), _prompt(corrupted, "corrupted", tok)
    if len(clean_ids) != len(corrupted_ids):
        show = lambda ids: " | ".join(tok.piece(t).display for t in ids)
        raise patching.PatchingError(
            "inside.patch_lengths_shown",
            "The clean prompt is {clean} tokens and the corrupted prompt {corrupted} tokens: patching copies "
            "position by position, so both must have the same number of tokens. Swap words for words of the "
            "same token count (e.g. one single-token name for another). Clean: {clean_tokens}. "
            "Corrupted: {corrupted_tokens}.",
            clean=len(clean_ids),
            corrupted=len(corrupted_ids),
            clean_tokens=show(clean_ids),
            corrupted_tokens=show(corrupted_ids),
        )
    return patching.check_pair(model, clean_ids, corrupted_ids, resolve_target(tok, answer), resolve_target(tok, wrong))


def position_labels(ids: list[int], corrupted: list[int], tok=None) -> list[str]:
    """ "3·␣John" for each position; "3·␣John/␣Mary" where the two prompts differ."""
    tok = tok or load_tokenizer()
    out = []
    for p, (a, b) in enumerate(zip(ids, corrupted)):
        shown = tok.piece(a).display if a == b else f"{tok.piece(a).display}/{tok.piece(b).display}"
        out.append(f"{p}·{shown}")
    return out


def patching_bytes(cfg, T: int) -> int:
    """What a patching view holds at most: two runs' captures (residual streams, head and MLP outputs,
    the corrupted run's q, k, v), one batch's activations, and the attribution's graph."""
    d, L = cfg.emb_dim, cfg.n_layers
    captures = 2 * 3 * (L + 1) * T * d + 3 * L * T * d
    batch = patching.BATCH_TOKENS * d * 20 + patching.BATCH_TOKENS * 2 * cfg.n_heads * T  # MLP, q/k/v, scores
    graph = L * T * d * 30
    return 4 * (captures + batch + graph)


def patching_steps(
    model,
    clean,
    corrupted,
    answer,
    wrong,
    target,
    layer=None,
    sender=None,
    receiver=None,
    via="k",
    stop: Callable[[], bool] | None = None,
) -> Iterator[dict]:
    """The grid as it fills (``patching.patching_steps`` or ``patching_paths.path_patching_steps`` for
    target "path"), each with the tokens and the position labels; StopRequested when ``stop()``."""
    if target not in TARGETS:
        raise patching.PatchingError(
            "inside.patch_target",
            "The patching target must be one of {choices}; got {value!r}.",
            choices=", ".join(TARGETS),
            value=target,
        )
    pair = read_pair(model, clean, corrupted, answer, wrong)
    tok = tokenizer_of(model)
    T = len(pair.clean)
    labels = position_labels(pair.clean, pair.corrupted, tok)
    extra = {
        "tokens": [tok.piece(t).display for t in pair.clean],
        "corrupted_tokens": [tok.piece(t).display for t in pair.corrupted],
        "answer": tok.piece(pair.answer).display,
        "wrong": tok.piece(pair.wrong).display,
        "answer_id": pair.answer,
        "wrong_id": pair.wrong,
    }
    with BUDGET.reserve(patching_bytes(model.cfg, T), f"activation patching of {T} tokens", "lens"):
        if uses_gpu_slots(model):
            steps = _from_slot(gpu_grid_steps(model, pair, target, layer, sender, receiver, via), stop)
        else:
            steps = _grid_steps(model, pair, target, layer, sender, receiver, via, stop)
        for d in steps:
            if d.get("column_kind") == "position":
                d = {**d, "columns": labels}
            yield {**d, **extra}


def _grid_steps(model, pair, target, layer, sender, receiver, via, stop) -> Iterator[dict]:
    if target == "path":
        return patching_paths.path_patching_steps(model, pair, sender, receiver, via, stop)
    return patching.patching_steps(model, pair, target, layer, stop)


@gpu_work(duration=30)
def gpu_grid_steps(model, pair, target, layer, sender, receiver, via) -> Iterator[dict | Exception]:
    """The grid as it fills, in a GPU slot: the model moved in, each grid out as CPU data. An error comes out
    as the last item (``spaces`` would keep only its class name), a refusal with its key."""
    with moved_in(model):
        try:
            for d in _grid_steps(model, pair, target, layer, sender, receiver, via, None):
                yield to_cpu(d)
        except Exception as e:
            yield e


def _from_slot(steps: Iterator, stop: Callable[[], bool] | None) -> Iterator[dict]:
    """A slot's grids, Stop asked between them (a ``stop`` callable does not cross into the worker): closing
    the slot's generator stops the worker after the batch in flight."""
    try:
        for d in steps:
            if isinstance(d, Exception):
                raise d
            yield d
            if stop is not None and stop():
                raise StopRequested
    finally:
        steps.close()  # type: ignore[attr-defined]


def activation_patching(model, clean, corrupted, answer, wrong, target, layer=None, **path) -> dict:
    """The finished grid (the last of ``patching_steps``)."""
    *_, last = patching_steps(model, clean, corrupted, answer, wrong, target, layer, **path)
    return last
