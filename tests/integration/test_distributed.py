"""Training scaled out with torchrun (DistributedDataParallel over gloo on this CPU) against one
process: the same global batch and seed must give the same loss curve and the same weights, only
rank 0 may write, and a checkpoint resumes on a different number of processes where it stopped.

Two torchrun launches of 2 processes (~10-20 s each on a shared 2-core machine) and three short
single-process runs; nano model (context 16, d32), dropout 0 so that the runs are deterministic,
and a constant learning rate so that a 4-step run and the first 4 steps of an 8-step run agree."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from playground.training.cli import main
from tests.helpers import ROOT

DDP_WORKER = ROOT / "tests" / "integration" / "ddp_worker.py"  # a worker script, not a test module
CONFIG = json.dumps({"preset": "nano", "context_length": 16, "emb_dim": 32, "drop_rate": 0.0})
# global batch 4 (2 windows per process), constant lr (warm-up 0, min_lr = lr), eval every 2 steps
COMMON = [
    "--config",
    CONFIG,
    "--batch-size",
    "4",
    "--lr",
    "3e-3",
    "--min-lr",
    "3e-3",
    "--warmup-steps",
    "0",
    "--eval-interval",
    "2",
    "--eval-batches",
    "1",
    "--seed",
    "7",
    "--threads",
    "1",
]
LOSS_TOL = dict(rel=1e-5, abs=1e-5)
WEIGHT_TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    words = "the king queen crown sword castle night day love war river stone bread wine song".split()
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(12)) + "." for _ in range(300)))
    return path


def torchrun(args: list[str], *, record_dir=None, timeout=240) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node=2 ...`` (standalone: a free rendezvous port, so
    parallel runs never collide), on the CPU whatever this machine has."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PLAYGROUND_DEVICE": "cpu"}
    if record_dir is not None:
        env["PG_DDP_RECORD"] = str(record_dir)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"torchrun failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    return done


def log_of(out) -> tuple[list[float], list[tuple[int, float]]]:
    events = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["kind"] == "step"]
    assert [e["step"] for e in steps] == list(range(steps[0]["step"], steps[0]["step"] + len(steps))), (
        "every step logged exactly once, in order"
    )
    return [e["loss"] for e in steps], [(e["step"], e["val_loss"]) for e in events if e["kind"] == "eval"]


def assert_same_tensors(path_a, path_b) -> None:
    a, b = load_file(str(path_a)), load_file(str(path_b))
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], **WEIGHT_TOL, msg=lambda m, name=name: f"{name}: {m}")


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """One process: 4 steps, and 8 steps, with the same settings."""
    threads = torch.get_num_threads()  # --threads 1 sets it for the whole process
    base = tmp_path_factory.mktemp("reference")
    try:
        for steps in (4, 8):
            assert main(["--data", str(corpus), "--out", str(base / f"s{steps}"), "--steps", str(steps), *COMMON]) == 0
    finally:
        torch.set_num_threads(threads)
    return base


def test_two_processes_follow_one_and_only_rank_0_writes(corpus, reference, tmp_path):
    out, record = tmp_path / "two", tmp_path / "record"
    record.mkdir()
    torchrun(
        [str(DDP_WORKER), "--data", str(corpus), "--out", str(out), "--steps", "4", *COMMON],
        record_dir=record,
    )

    losses, vals = log_of(out)
    ref_losses, ref_vals = log_of(reference / "s4")
    assert losses == pytest.approx(ref_losses, **LOSS_TOL)
    assert [s for s, _ in vals] == [s for s, _ in ref_vals] == [0, 2, 4]
    assert [v for _, v in vals] == pytest.approx([v for _, v in ref_vals], **LOSS_TOL)
    assert losses[-1] < losses[0]  # it learned something: the comparison is not between two no-ops
    # each rank ran its half of the batch: 4 steps × 4 windows × 16 tokens in all, not twice that
    events = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e for e in events if e["kind"] == "step"][-1]["tokens_seen"] == 4 * 4 * 16
    assert_same_tensors(out / "model.safetensors", reference / "s4" / "model.safetensors")
    assert_same_tensors(out / "model.optim.safetensors", reference / "s4" / "model.optim.safetensors")

    ranks = {r: json.loads((record / f"rank{r}.json").read_text()) for r in (0, 1)}
    assert ranks[0]["rc"] == ranks[1]["rc"] == 0
    assert ranks[1]["writes"] == [] and ranks[1]["stdout"] == ""  # rank 1 trained silently
    written = {os.path.basename(p) for p in ranks[0]["writes"]}
    # (heads.json: the heads' scores on the probe, logged by rank 0 alone at step 0 and every --heads-every)
    assert written == {"log.jsonl", "heads.json", "model.safetensors.tmp", "model.optim.safetensors.tmp"}
    assert "2 processes (gloo), 2 of the 4 windows of each batch per process" in ranks[0]["stdout"]
    assert sorted(p.name for p in out.iterdir()) == [
        "heads.json",
        "log.jsonl",
        "model.optim.safetensors",
        "model.safetensors",
    ]

    # The 2-process checkpoint, resumed by ONE process, continues the one-process curve.
    threads = torch.get_num_threads()
    try:
        assert main(["--data", str(corpus), "--out", str(out), "--steps", "8", "--resume", *COMMON]) == 0
    finally:
        torch.set_num_threads(threads)
    losses, _ = log_of(out)
    assert losses == pytest.approx(log_of(reference / "s8")[0], **LOSS_TOL)
    assert_same_tensors(out / "model.safetensors", reference / "s8" / "model.safetensors")


def test_one_process_checkpoint_resumes_on_two(corpus, reference, tmp_path):
    out = tmp_path / "one_then_two"
    shutil.copytree(reference / "s4", out)
    done = torchrun(
        ["-m", "playground.training", "--data", str(corpus), "--out", str(out), "--steps", "8", "--resume", *COMMON]
    )
    assert done.stdout.count("resuming at step 4") == 1  # printed by rank 0 only
    losses, vals = log_of(out)
    ref_losses, ref_vals = log_of(reference / "s8")
    assert losses == pytest.approx(ref_losses, **LOSS_TOL)
    assert [v for _, v in vals] == pytest.approx([v for _, v in ref_vals], **LOSS_TOL)
    assert_same_tensors(out / "model.safetensors", reference / "s8" / "model.safetensors")


def test_a_batch_that_does_not_split_evenly_is_refused(corpus, tmp_path, monkeypatch, capsys):
    import playground.training.trainer as train_module

    # As rank 0 of 2 (faked: the check comes before any collective call)
    monkeypatch.setattr(train_module, "_distributed", lambda: True)
    monkeypatch.setattr(train_module.dist, "get_rank", lambda: 0)
    monkeypatch.setattr(train_module.dist, "get_world_size", lambda: 2)
    args = ["--data", str(corpus), "--out", str(tmp_path / "o"), "--steps", "2", *COMMON, "--batch-size", "3"]
    assert main(args) == 2
    assert "batch of 3 windows cannot be split evenly among 2 processes" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason=f"needs 2 CUDA GPUs (NCCL); this machine has {torch.cuda.device_count()}"
)
def test_two_gpus_follow_one_gpu(corpus, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PLAYGROUND_DEVICE": "cuda"}
    args = ["--data", str(corpus), "--steps", "4", *COMMON]
    subprocess.run(
        [sys.executable, "-m", "playground.training", "--out", str(tmp_path / "one"), *args],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "playground.training",
            "--out",
            str(tmp_path / "two"),
            *args,
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
    )
    assert log_of(tmp_path / "two")[0] == pytest.approx(log_of(tmp_path / "one")[0], rel=1e-4, abs=1e-4)


def test_amp_bf16_is_bfloat16_autocast(corpus, tmp_path):
    from playground.engine.weights import read_checkpoint_metadata

    threads = torch.get_num_threads()
    try:
        assert (
            main(["--data", str(corpus), "--out", str(tmp_path / "amp"), "--steps", "1", *COMMON, "--amp", "bf16"]) == 0
        )
    finally:
        torch.set_num_threads(threads)
    meta = read_checkpoint_metadata(tmp_path / "amp" / "model.safetensors")
    assert json.loads(meta["train_config"])["dtype"] == "bfloat16"
    assert meta["processes"] == "1"
