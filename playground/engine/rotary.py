"""Rotary positions (RoPE): queries and keys turned by an angle that grows with their position.

Each pair of a query's or key's dimensions turns, so the dot product of a query and a key depends on how
far apart they are, not on where they are.

Pair i of a head of hd dimensions turns at the frequency θ^(−2i/hd) (θ = ``rope_theta``): at position p by
the angle p · θ^(−2i/hd). The pairs are (x[i], x[i + hd/2]), the "rotate half" layout Llama's and Qwen's
checkpoints are trained with:

    rope(x)[i]        = x[i] · cos(angle_i) − x[i + hd/2] · sin(angle_i)
    rope(x)[i + hd/2] = x[i + hd/2] · cos(angle_i) + x[i] · sin(angle_i)

Nothing is learned and nothing is added to the input embedding: positions enter attention only.

Llama 3 stretches the slow pairs for long contexts (``llama3``: factor, low_freq_factor, high_freq_factor,
original context): a pair whose wavelength 2π/frequency is longer than original/low_freq_factor turns
``factor`` times slower, one shorter than original/high_freq_factor is left as it is, and the pairs between
are blended.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


class RotaryEmbedding(nn.Module):
    """Turns (B, H, T, hd) queries or keys at positions start … start + T − 1."""

    inv_freq: torch.Tensor

    def __init__(self, head_dim: int, theta: float = 10000.0, llama3: tuple = ()):
        super().__init__()
        self.head_dim, self.theta, self.llama3 = head_dim, theta, llama3
        self.register_buffer("inv_freq", self._frequencies(), persistent=False)  # (hd / 2,)

    def _frequencies(self) -> torch.Tensor:
        # θ^(−2i/hd) for i = 0 … hd/2 − 1, in float32 (as the reference implementations compute it)
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        inv_freq = 1.0 / (self.theta**exponents)
        return llama3_frequencies(inv_freq, *self.llama3) if self.llama3 else inv_freq

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.inv_freq.copy_(self._frequencies().to(self.inv_freq.device))

    def cos_sin(self, start: int, length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of every angle, (T, hd) each, float32: the hd/2 angles repeated for both halves."""
        positions = torch.arange(start, start + length, device=device, dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq.to(device))  # (T, hd / 2)
        angles = torch.cat([angles, angles], dim=-1)  # (T, hd)
        return angles.cos(), angles.sin()

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        cos, sin = self.cos_sin(start, x.size(-2), x.device)
        half = x.size(-1) // 2
        rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (−x₂, x₁)
        return x * cos.to(x.dtype) + rotated_half * sin.to(x.dtype)


def llama3_frequencies(inv_freq: torch.Tensor, factor, low_freq_factor, high_freq_factor, original) -> torch.Tensor:
    """Llama 3's long-context frequencies: slow pairs / factor, fast pairs kept, the middle blended."""
    wavelength = 2 * math.pi / inv_freq
    slow, fast = wavelength > original / low_freq_factor, wavelength < original / high_freq_factor
    stretched = torch.where(slow, inv_freq / factor, inv_freq)
    blend = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)  # 0 slow … 1 fast
    blended = (1 - blend) * stretched / factor + blend * stretched
    return torch.where(~slow & ~fast, blended, stretched)
