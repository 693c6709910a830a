"""A training run's memory stays within what its reservation says (``estimate_training_memory_bytes``): the
peak resident growth of a run, measured in a fresh process as the server runs it (``map_large_blocks``),
for the Train tab's default lesson, the induction-head run (its sampled softmax) and a bfloat16 run."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# In a fresh process: a small warm-up run loads torch's training code (tens of MB of libraries, once per
# process), then the measured run's peak resident size over what the process held before it. The peak is
# VmHWM reset just before the run: ru_maxrss would start from the RSS of the process that started this one
# (a fork's copy of pytest's, several GB in the full suite).
PROBE = r"""
import gc, json, sys
import torch
from playground.runtime.machine_memory import map_large_blocks, resident_bytes, trim
map_large_blocks()
from playground.engine.presets import PRESETS
from playground.server.jobs import training_config
from playground.training import induction_run
from playground.training.corpus import load_bundled_corpus, prepare_corpus
from playground.training.train_config import estimate_training_memory_bytes
from playground.training.trainer import Trainer, build_model

torch.set_num_threads(1)
cfg, kind = PRESETS["nano"], sys.argv[1]

def trainer(tcfg, name):
    corpus = prepare_corpus(load_bundled_corpus(name), tcfg.block_size, name=name)
    extras = induction_run.trainer_extras(corpus, tcfg, cfg) if kind == "induction" and tcfg.batch_size > 1 else {}
    return Trainer(build_model(cfg, seed=0), corpus.train_ids, corpus.val_ids, tcfg, **extras)

def run(t):
    for _ in range(2):
        t.step()
    t.evaluate()

if kind == "induction":
    tcfg, name = induction_run.train_config(steps=4), "aesop"
else:
    tcfg, name = training_config(cfg, 4, 3e-3, batch_size=8), "austen"
    if kind == "bfloat16":
        tcfg = tcfg.replace(dtype="bfloat16")
warm = training_config(cfg, 4, 3e-3, batch_size=1, block_size=8).replace(eval_batches=1, dtype=tcfg.dtype)
run(trainer(warm, name))
gc.collect(); trim()
before = resident_bytes()
open("/proc/self/clear_refs", "w").write("5")  # the peak resident size counts from here (Linux 4.0 and later)
run(trainer(tcfg, name))
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps({"growth": peak - before, "estimate": estimate_training_memory_bytes(cfg, tcfg)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["float32", "induction", "bfloat16"])
def test_a_training_runs_peak_stays_within_its_reservation(kind):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, kind], cwd=ROOT, capture_output=True, text=True, timeout=600, check=True
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    mb = {k: round(v / 2**20, 1) for k, v in got.items()}
    assert 0 < got["growth"] <= got["estimate"], mb
    assert got["estimate"] <= 1.5 * got["growth"] + 32 * 2**20, mb  # and says roughly what it takes, not a blanket
