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

ASSETS = Path(__file__).resolve().parent.parent / "playground" / "assets"
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


def convert(hf_dir: Path, out_root: Path) -> dict:
    """Convert the Hugging Face folder (model + tokenizer) once per compute type -> its folder."""
    from ctranslate2.converters import TransformersConverter

    save_tokenizer(hf_dir)
    folders = {}
    for ct in COMPUTE_TYPES:
        out = out_root / f"ct2-{ct}"
        TransformersConverter(str(hf_dir)).convert(str(out), quantization=ct, force=True)
        folders[ct] = out
    return folders


def load(folder: Path, compute_type: str, threads: int):
    import ctranslate2

    return ctranslate2.Generator(
        str(folder), device="cpu", compute_type=compute_type, intra_threads=threads, inter_threads=1
    )


def id_to_token() -> list[str]:
    vocab = json.loads((ASSETS / "encoder.json").read_text(encoding="utf-8"))
    tokens = [""] * len(vocab)
    for tok, i in vocab.items():
        tokens[i] = tok
    return tokens


def run_loaded(
    folder: Path, compute_type: str, threads: int, prompt_tokens: list[str], n_new: int, vocab: dict[str, int]
):
    """Load the converted model, warm it up, time one generation, and free it again -> (timestamps
    of the new tokens, their ids).

    A live ctranslate2.Generator slows every other peer in the process (measured: our int8 decode
    45 -> 26 tok/s while one exists, back to 45 once it is freed; no CPU time is spent meanwhile,
    so it is not spinning threads we could wait out), so it lives only for its own measurement."""
    generator = load(folder, compute_type, threads)
    try:
        run(generator, prompt_tokens, min(8, n_new), vocab)  # warm-up: its allocator and kernels
        return run(generator, prompt_tokens, n_new, vocab)
    finally:
        del generator


def run(generator, prompt_tokens: list[str], n_new: int, vocab: dict[str, int]):
    """-> (timestamps of the new tokens, their ids). The callback fires as each token is chosen."""
    times = []

    def clock(step):
        times.append(time.perf_counter())
        return False  # keep going

    out = generator.generate_batch(
        [prompt_tokens],
        max_length=n_new,
        min_length=n_new,
        sampling_topk=1,
        beam_size=1,
        include_prompt_in_result=False,
        callback=clock,
    )
    ids = [vocab[t] for t in out[0].sequences[0]]
    return times, ids
