"""What one ZeroGPU slot costs here before any GPU work: ``python -m tools.zerogpu_slot_cost``.

tests/fake_spaces.py does what spaces 0.51.3 does around a ``@spaces.GPU`` call minus the scheduler (a
worker forked from the app, the arguments and the result pickled across): timed here with GPT-2 small as
the argument, alone and with the KV caches a slot per batched step would carry (1 and 30 runs of 256
positions). docs/benchmarks.md ("A ZeroGPU slot's price") has the figures and the choice they back."""

from __future__ import annotations

import os
import statistics
import time

import torch

from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from tests import fake_spaces


def touch(model, caches):
    return len(caches)


def main() -> None:
    torch.set_num_threads(1)
    call = fake_spaces.GPU(touch)
    model = GPTModel(PRESETS["gpt2-small"], generator=torch.Generator().manual_seed(0)).eval()
    cfg = model.cfg
    print(f"load average {os.getloadavg()[0]:.1f}")
    for runs, positions in ((0, 0), (1, 256), (30, 256)):
        caches = [torch.zeros(2 * cfg.n_layers, positions, cfg.emb_dim) for _ in range(runs)]
        times = []
        for _ in range(7):
            start = time.perf_counter()
            call(model, caches)
            times.append(time.perf_counter() - start)
        mb = sum(c.numel() * c.element_size() for c in caches) / 1e6
        print(
            f"{runs:2d} runs' caches ({mb:4.0f} MB): first call {times[0] * 1000:5.0f} ms, "
            f"then median {statistics.median(times[1:]) * 1000:5.1f} ms ({min(times[1:]) * 1000:.1f}–{max(times[1:]) * 1000:.1f})"
        )


if __name__ == "__main__":
    main()
