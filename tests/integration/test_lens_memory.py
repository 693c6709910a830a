"""A logit lens's and an intervention's memory stays within what they reserve: the peak resident growth of the
view, measured in a fresh process as the server runs it (``map_large_blocks``), against the reservation it holds
(``reading_bytes`` for the readout, a tile of the vocabulary at a time, and ``capture_bytes`` for the forward).
The lens once reserved four float32 matrices of 512 rows' logits (412 MB for GPT-2's vocabulary) for a readout
that holds a few MB, an intervention 206 MB."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# A short lens first (the readout's lanes, the tokenizer, torch's code paths), then the measured one; the peak
# is VmHWM reset just before it (ru_maxrss would start from the forking process's size).
PROBE = r"""
import gc, json, sys
import torch
from playground.runtime.machine_memory import map_large_blocks, resident_bytes, trim
map_large_blocks()
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.inside import effects, lenses
from playground.inside.interventions import Intervention
from playground.runtime import memory

T, dtype, view = int(sys.argv[1]), sys.argv[2], sys.argv[3]
label = {"lens": "the logit lens", "intervention": "an intervention"}[view]
def run(ids):
    if view == "lens":
        out = lenses.logit_lens(model, ids)
        assert len(out["top_id"]) == cfg.n_layers + 1 and len(out["top_id"][0]) == len(ids)
    else:
        out = effects.compare(model, ids, Intervention(zero_heads=((1, 2),)), len(ids) - 1, lens=True)
        assert len(out["lens_after"]["top_id"]) == cfg.n_layers + 1
cfg = GPTConfig(vocab_size=50257, context_length=max(T, 16), emb_dim=128, n_heads=4, n_layers=4, drop_rate=0.0)
torch.set_grad_enabled(False)
model = GPTModel(cfg, generator=torch.Generator().manual_seed(0)).eval().to(getattr(torch, dtype))
ids = [int(i) for i in torch.randint(0, cfg.vocab_size, (T,), generator=torch.Generator().manual_seed(1))]
held = []
reserve = memory.BUDGET.reserve
def recording(nbytes, what, kind="build"):
    if what.startswith(label):
        held.append(nbytes)
    return reserve(nbytes, what, kind)
memory.BUDGET.reserve = recording
run(ids[: max(2, T // 8)])
gc.collect(); trim()
held.clear()
before = resident_bytes()
open("/proc/self/clear_refs", "w").write("5")  # the peak resident size counts from here (Linux 4.0 and later)
run(ids)
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps({"growth": peak - before, "reserved": held[0], "reservations": len(held)}))
"""


@pytest.mark.parametrize(
    "tokens, dtype, view",
    [
        (512, "float32", "lens"),
        (12, "float32", "lens"),
        (64, "bfloat16", "lens"),
        (256, "float32", "intervention"),
        (24, "float32", "intervention"),
    ],
    ids=["lens in tiles", "lens in one chunk", "lens of bfloat16", "intervention in tiles", "short intervention"],
)
def test_a_view_stays_within_its_reservation(tokens, dtype, view):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tokens), dtype, view], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    mb = {k: round(v / 2**20, 1) for k, v in got.items()}
    assert got["reservations"] == 1, mb
    assert got["growth"] <= got["reserved"], mb
    assert got["reserved"] <= 1.5 * got["growth"] + 32 * 2**20, mb  # and says roughly what it takes
