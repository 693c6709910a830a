"""A checkpoint folder's own tokenizer (``tokenizer.json``, through the ``tokenizers`` library).

Llama and Qwen3 checkpoints come with their own vocabulary; their ids mean nothing to GPT-2's BPE. This
gives them the GPT2Tokenizer interface the rest of the playground reads (encode, decode, pieces), so
chips and axis labels show the folder's tokens. GPT-2 models keep tiktoken.
"""

from __future__ import annotations

from pathlib import Path

from playground.engine.tokenizer import TokenPiece, display_text
from playground.engine.weight_layout import WeightLoadError


class FolderTokenizer:
    """encode / decode / token_bytes / pieces over a ``tokenizers.Tokenizer``."""

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer  # at use: only a folder's model needs it

        path = Path(path)
        try:
            self.tokenizer = Tokenizer.from_file(str(path))
        except Exception as e:  # the library raises its own Exception subclass for a malformed file
            raise WeightLoadError(
                "weights.tokenizer_json",
                "{name} is not a readable tokenizer.json ({reason}).",
                name=path.name,
                reason=e,
            ) from None
        self.n_vocab = self.tokenizer.get_vocab_size(with_added_tokens=True)
        self.name = path.parent.name
        eos = [t for t in ("<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "</s>") if self.tokenizer.token_to_id(t)]
        self.eot_id = self.tokenizer.token_to_id(eos[0]) if eos else None

    def encode(self, text: str) -> list[int]:
        """Text -> ids, with no special tokens added (the prompt is the learner's text, as with GPT-2)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_bytes(self, token_id: int) -> bytes:
        if not 0 <= int(token_id) < self.n_vocab:
            return b""
        return self.decode([token_id]).encode("utf-8")

    def pieces(self, ids) -> list[TokenPiece]:
        return [self.piece(i) for i in ids]

    def piece(self, token_id: int) -> TokenPiece:
        token_id = int(token_id)
        if not 0 <= token_id < self.n_vocab:
            return TokenPiece(token_id, "", f"⟨id {token_id}⟩", True)
        text = self.decode([token_id])
        if "\ufffd" in text:  # a byte-level token that ends mid-character
            token = self.tokenizer.id_to_token(token_id) or ""
            return TokenPiece(token_id, "", f"⟨{token}⟩", True)
        return TokenPiece(token_id, text, display_text(text), False)
