"""A run and its generated steps as JSON, one serializer for the API's run data and the run export alike.

``run_record`` is what both write of a run (the export adds its attention, config and replay record), so
both say a token the same way. ``token`` is the form the page shows on the token's chip (``TokenPiece.display``: "␣the", "↵", a byte
fragment as "⟨e2 80⟩"), which tells a leading space, a newline and a fragment of a character apart;
``text`` is the token's own text as ``decode`` gives it (a fragment as "�"), for joining tokens back
into the run's text.
"""

from __future__ import annotations

from playground.engine.tokenizer import GPT2Tokenizer
from playground.server.recipes import describe_recipe


def token_record(tok: GPT2Tokenizer, token_id: int) -> dict:
    """The token's id, its displayed form and its decoded text."""
    return {"token_id": int(token_id), "token": tok.piece(token_id).display, "text": tok.decode([token_id])}


def step_record(tok: GPT2Tokenizer, step) -> dict:
    """An ``engine.sampling.GenerationStep`` as the API and the export write it."""
    return token_record(tok, step.token_id) | {
        "prob": step.prob,
        "raw_prob": step.raw_prob,
        "rank": step.rank,
        "entropy_bits": step.entropy,
        "top": [[i, p] for i, p in step.top],
    }


def run_record(run, tok: GPT2Tokenizer) -> dict:
    """A ``runs.Run`` as the API and the export write it: its model, settings, prompt and every step.
    ``token_ids`` and ``tokens`` are the whole sequence (prompt and generated), ``text`` the generated text."""
    return {
        "model": describe_recipe(run.recipe),
        "settings": run.settings,
        "prompt_ids": run.prompt_ids,
        "prompt_tokens_cropped": run.n_cropped,
        "token_ids": run.token_ids,
        "tokens": [p.display for p in tok.pieces(run.token_ids)],
        "text": tok.decode([s.token_id for s in run.steps]),
        "stopped": bool(run.stopped),
        "steps": [{"index": s.index} | step_record(tok, s) for s in run.steps],
    }
