"""Paths every test folder shares (a plain module: no fixtures, no gradio, no test of its own)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
SHARED = ROOT.parent / "shared"  # data beside the checkout, shared by every worktree
TINY_SHAKESPEARE = SHARED / "data" / "tinyshakespeare.txt"
ARTIFACTS = ROOT / "tests" / "artifacts"  # screenshots the browser tests leave for a person to look at
README = ROOT / "README.md"


# The config fields /build_model takes after its weights, dtype and upload arguments, in order.
BUILD_FIELDS = (
    "vocab_size",
    "context_length",
    "emb_dim",
    "n_heads",
    "n_layers",
    "drop_rate",
    "qkv_bias",
    "tie_weights",
    "pos_encoding",
    "activation",
    "norm_placement",
    "attention_impl",
)


def build_fields(cfg) -> list:
    """A config (GPTConfig or a dict of changes to the nano preset) as /build_model's field arguments."""
    from playground import PRESETS

    values = cfg.to_dict() if hasattr(cfg, "to_dict") else {**PRESETS["nano"].to_dict(), **cfg}
    return [values[k] for k in BUILD_FIELDS]
