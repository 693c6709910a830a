"""A training run's samples: what the model writes from one prompt and seed, before, at each logged step, after.

Every sample of a run continues the same prompt with the same seed and settings, so the only thing
that differs between them is the weights: the "before" sample is exactly what ``generate()`` writes
with the run's initial weights, the last one what the trained model writes (tests/unit/test_train_samples.py).
"""

from __future__ import annotations

from typing import Any

import torch

from playground.engine.sampling import generate
from playground.engine.tokenizer import load_tokenizer

SAMPLE_TOKENS = 40
SAMPLE_SEED = 42
SAMPLE_SETTINGS: dict[str, Any] = {"temperature": 0.8, "top_k": 40}  # the Generate tab's defaults
# A prompt in each bundled corpus's own words; any other text is prompted with its held-out part's
# first tokens (the run never trains on those).
PROMPTS = {
    "Pride and Prejudice": "Elizabeth",
    "Aesop's fables & nursery rhymes": "The Fox",
    "Tiny Shakespeare": "ROMEO:\n",
}
OWN_PROMPT_TOKENS = 4


def sample_prompt_ids(corpus) -> list[int]:
    """The prompt every sample of a run on ``corpus`` (a prepared Corpus) continues."""
    text = PROMPTS.get(corpus.name)
    if text is not None:
        return load_tokenizer().encode(text)
    return [int(i) for i in corpus.val_ids[:OWN_PROMPT_TOKENS]]


def write_sample(model, prompt_ids: list[int]) -> list[int]:
    """The token ids ``model`` writes after ``prompt_ids`` (seeded, so only the weights change them).
    A model in training is put in eval mode while it writes (no dropout) and given back as it was;
    sampling draws from its own generator, so the run's own random draws are untouched."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            steps = generate(model, prompt_ids, max_new_tokens=SAMPLE_TOKENS, seed=SAMPLE_SEED, **SAMPLE_SETTINGS)
            return [int(step.token_id) for step in steps]
    finally:
        model.train(was_training)


def decoded(ids: list[int]) -> str:
    """A sample's (or a prompt's) text."""
    return load_tokenizer().decode(ids)
