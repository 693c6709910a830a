"""What logging the heads costs a training run: the induction run with and without its head watch, alternating.

    python tools/watch_overhead.py --steps 200 --rounds 2 --threads 1

Each round trains the default "watch an induction head form" run (same seed) once with the head watch
(every ``WATCH_EVERY`` steps, as the Train tab does) and once without, in alternating order, and
prints each run's wall time; the overhead is the difference of the medians over the run without.
The load average is printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from playground.training import induction_run  # noqa: E402
from playground.training.corpus import load_bundled_corpus, prepare_corpus  # noqa: E402
from playground.training.head_watch import HeadWatch, probe_batch  # noqa: E402
from playground.training.trainer import Trainer, build_model  # noqa: E402


def one_run(corpus, tcfg, watched: bool) -> tuple[float, float, str]:
    model = build_model(induction_run.MODEL, tcfg.seed, device="cpu")
    trainer = Trainer(model, corpus.train_ids, corpus.val_ids, tcfg, **induction_run.trainer_extras(corpus, tcfg))
    watch = HeadWatch(model, probe_batch(corpus.train_ids), induction_run.WATCH_EVERY) if watched else None
    started = time.perf_counter()
    trainer.run(watch)
    seconds = time.perf_counter() - started
    if watch is None:
        return seconds, 0.0, ""
    last, tl = watch.records[-1], watch.timeline()
    found = (
        f"step {last.step}: previous-token {last.previous_token.max():.2f} (layer "
        f"{int(last.previous_token.argmax()) // last.previous_token.shape[1]}), induction {last.induction.max():.2f} "
        f"(layer {int(last.induction.argmax()) // last.induction.shape[1]}), gap {last.gap:+.2f}; "
        f"phase change {tl['phase_change']}; training {trainer.elapsed_s:.1f} s"
    )
    return seconds, watch.seconds, found


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    tcfg = induction_run.train_config(steps=a.steps)
    corpus = prepare_corpus(load_bundled_corpus(induction_run.CORPUS), tcfg.block_size, name="aesop")
    print(f"load before: {os.getloadavg()}")
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(a.rounds):
        for watched in (True, False) if r % 2 == 0 else (False, True):
            seconds, logging, found = one_run(corpus, tcfg, watched)
            times[watched].append(seconds)
            print(
                f"round {r + 1} {'with' if watched else 'without'} the watch: {seconds:.1f} s (logging {logging:.2f} s)"
            )
            if found:
                print(f"  {found}", flush=True)
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"load after: {os.getloadavg()}")
    print(f"median with {with_:.1f} s, without {without:.1f} s: overhead {100 * (with_ - without) / without:+.1f}%")


if __name__ == "__main__":
    main()
