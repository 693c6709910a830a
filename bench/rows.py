"""The batched native decode step: one step of B rows against B single-row steps (issue 33).

``python -m bench.rows`` times ``native_decode.decode_rows`` for B = 1, 8, 16, 30 rows on GPT-2 small
(float32, random weights) and on the bundled model, each row continuing its own KV cache after a prompt,
and prints ms per step, the aggregate tokens/s and the ratio to B single-row steps. The rows' positions
are reset after every timed step, so every repeat times the same step. The machine may be shared: the
1-minute load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from playground.accel import native_decode
from playground.engine.decoding import Row
from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from playground.engine.weights import load_checkpoint
from playground.runtime.weight_streams import weight_streams

from .timing import median

BATCHES = (1, 8, 16, 30)
PROMPT = 32  # tokens in every row's cache before the timed step
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_average() -> float:
    return os.getloadavg()[0]


@torch.no_grad()
def step_seconds(model, n_rows: int, repeats: int) -> tuple[float, float]:
    """Median seconds of one native step of ``n_rows`` rows (each its own cache, positions ``PROMPT`` + row % 4):
    wall-clock, and the calling thread's CPU time (the whole step's on a team of one, whatever the load)."""
    cache = model.new_kv_cache()
    model(torch.arange(PROMPT + 4).view(1, -1) % model.cfg.vocab_size, kv_cache=cache)
    rows = []
    for i in range(n_rows):
        own = model.new_kv_cache()
        own.k.copy_(cache.k)
        own.v.copy_(cache.v)
        rows.append(Row(1000 + 37 * i, own))
    starts = [PROMPT + i % 4 for i in range(n_rows)]
    times, cpu = [], []
    for _ in range(repeats + 1):  # the first is a warm-up
        for row, start in zip(rows, starts):
            row.cache.length = start
        t0, c0 = time.perf_counter(), time.thread_time()
        out = native_decode.decode_rows(model, rows)
        cpu.append(time.thread_time() - c0)
        times.append(time.perf_counter() - t0)
        assert all(o is not None for o in out), "a row took the plain path"
    return median(times[1:]), median(cpu[1:])


def table(name: str, model, repeats: int, threads: int) -> list[str]:
    assert native_decode.set_native_step(model, threads), "no native step for this model here"
    load = load_average()
    seconds = {b: step_seconds(model, b, repeats) for b in BATCHES}
    one, one_cpu = seconds[1]
    alone = threads == 1  # the calling thread runs the whole step: its CPU time is the step's
    lines = [
        f"{name}: 1-minute load average {load:.1f} before, {load_average():.1f} after, "
        f"{threads or torch.get_num_threads()} of {torch.get_num_threads()} threads",
        "",
        "| rows B | ms / step | tokens/s (all rows) | × one row's tokens/s | B × one-row step (ms) | step / (B × one-row) |"
        + (" CPU ms / step | × one row's tokens/s by CPU time |" if alone else ""),
        "|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if alone else ""),
    ]
    for b, (s, c) in seconds.items():
        line = f"| {b} | {1e3 * s:.2f} | {b / s:.0f} | {b * one / s:.2f}× | {1e3 * b * one:.1f} | {s / (b * one):.2f} |"
        lines.append(line + (f" {1e3 * c:.1f} | {b * one_cpu / c:.2f}× |" if alone else ""))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed steps per B (median)")
    parser.add_argument("--skip-bundled", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="the step's team (0: all of torch's threads)")
    args = parser.parse_args(argv)
    # the one-row products read their weight rows as the app reads them on this machine (decided once)
    reading = weight_streams()
    print(f"one-row products: {reading.winner if reading else 'four_rows (not decided)'}\n")
    small = GPTModel(PRESETS["gpt2-small"], generator=torch.Generator().manual_seed(0)).eval()
    for line in table("GPT-2 small float32 (random weights)", small, args.repeats, args.threads):
        print(line)
    if not args.skip_bundled:
        bundled = load_checkpoint(
            os.path.join(ROOT, "playground", "assets", "bundled", "model.safetensors"), dtype="float32"
        ).eval()
        cfg = bundled.cfg
        print()
        name = f"bundled model float32 ({cfg.n_layers} blocks, d={cfg.emb_dim})"
        for line in table(name, bundled, args.repeats, args.threads):
            print(line)


if __name__ == "__main__":
    main()
