"""SwiGLU: the feed-forward of Llama, Qwen and Mistral, a gated MLP.

SwiGLU(x) = fc3(silu(fc1(x)) · fc2(x)), with silu(z) = z · sigmoid(z). fc1 (the gate) and fc2 (the "up"
projection) both map emb_dim -> hidden; their product, element by element, lets one half decide how much
of the other passes. Three matrices instead of GPT-2's two, so the hidden width is usually smaller
(Llama 3.2 1B: 8192 = 4 · 2048 with three matrices; GPT-2 uses 4 · emb_dim with two).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class SwiGLU(nn.Module):
    """fc3(silu(fc1(x)) · fc2(x)); ``bias`` adds biases to all three (none in Llama or Qwen3)."""

    def __init__(self, emb_dim: int, hidden_dim: int, bias: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(emb_dim, hidden_dim, bias=bias)  # the gate
        self.fc2 = nn.Linear(emb_dim, hidden_dim, bias=bias)  # the values it gates
        self.fc3 = nn.Linear(hidden_dim, emb_dim, bias=bias)  # back to the residual stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.silu is one fused kernel for z · sigmoid(z) (forward_explicit writes it out; a test checks both)
        return self.fc3(F.silu(self.fc1(x)) * self.fc2(x))

    def forward_explicit(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.fc1(x)
        return self.fc3(gate * torch.sigmoid(gate) * self.fc2(x))
