"""CTranslate2 as a decode peer: the same random GPT-2 small weights, converted with its own
``TransformersConverter``, decoded greedily in float32 and int8.

CTranslate2 reads token *strings*; its converter needs a tokenizer saved next to the weights, which
is built offline from the bundled BPE files (``GPT2Tokenizer(vocab=..., merges=...)``: the
``vocab_file=`` keywords silently give a one-token vocabulary in transformers 5).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
COMPUTE_TYPES = ("float32", "int8")


def available() -> str | None:
    """None if CTranslate2 can be used, else why not."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return "ctranslate2 is not installed (pip install -r requirements-dev.txt)"
    return None


def save_tokenizer(hf_dir: Path) -> None:
    from transformers import GPT2Tokenizer

    vocab = json.loads((ASSETS / "encoder.json").read_text(encoding="utf-8"))
    lines = (ASSETS / "vocab.bpe").read_text(encoding="utf-8").splitlines()[1:]
    merges = [tuple(line.split()) for line in lines if line.strip()]
    GPT2Tokenizer(vocab=vocab, merges=merges).save_pretrained(hf_dir)


def convert(hf_dir: Path, out_root: Path, threads: int) -> dict:
    """Convert the Hugging Face folder (model + tokenizer) once per compute type -> Generators."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    save_tokenizer(hf_dir)
    generators = {}
    for ct in COMPUTE_TYPES:
        out = out_root / f"ct2-{ct}"
        TransformersConverter(str(hf_dir)).convert(str(out), quantization=ct, force=True)
        generators[ct] = ctranslate2.Generator(str(out), device="cpu", compute_type=ct,
                                               intra_threads=threads, inter_threads=1)
    return generators


def id_to_token() -> list[str]:
    vocab = json.loads((ASSETS / "encoder.json").read_text(encoding="utf-8"))
    tokens = [""] * len(vocab)
    for tok, i in vocab.items():
        tokens[i] = tok
    return tokens


def run(generator, prompt_tokens: list[str], n_new: int, vocab: dict[str, int]):
    """-> (timestamps of the new tokens, their ids). The callback fires as each token is chosen."""
    times = []

    def clock(step):
        times.append(time.perf_counter())
        return False  # keep going

    out = generator.generate_batch(
        [prompt_tokens], max_length=n_new, min_length=n_new, sampling_topk=1, beam_size=1,
        include_prompt_in_result=False, callback=clock)
    ids = [vocab[t] for t in out[0].sequences[0]]
    return times, ids
