"""``python -m bench.decode_paths_ab [float32|bfloat16|int8|int8-dynamic]``: the plain decode path against the measured one and the native step, same process.

"Plain": every product through PyTorch (``accelerate(..., compiled_kernel=False)``), the sampler and
one query's attention on all threads. "Measured": the compiled one-row kernel where it measured faster, and
the threads the decisions chose, each step through the torch forward. "Native step": the same model with each
step in one compiled call (accel.native_decode; on the threads its decision chose, all if it chose the plain
step). All decode GPT-2 small (random weights) greedily, alternating, every round;
the output is each one's tok/s, its step split into the products timed alone and the time outside them, the
per-round ratio and the load average -- the figures docs/benchmarks.md records.

``int8`` (bfloat16 activations, as the app builds it): "plain" on torch's int8 kernels, "measured" on the compiled
ones where they won. ``int8-dynamic``: "measured" is the model as quantize_int8 chose its kernels (the int8 dot-product kernel where
it won), "plain" the same weights on the fastest of torch's int8-dynamic kernels in that measurement.
``--also float32 int8``: those precisions' measured models decode in the same rounds, for their tok/s beside.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import time

import torch

from playground.accel import accelerate, native_decode
from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from playground.engine.quantize import COMPILED_DYNAMIC, Int8Linear, quantize_int8
from playground.engine.sampling import generate
from playground.runtime import decode_decisions, kernels, native_gemv

from .decode import first_divergence, products_seconds, prompt_ids, step_products
from .timing import median, step_times


@contextlib.contextmanager
def threads_decided(sampler: int | None):
    """Within: the sampler's thread decision reads as given."""
    saved = decode_decisions.vocabulary_threads_decided
    decode_decisions.vocabulary_threads_decided = lambda vocab: sampler  # type: ignore[assignment]
    try:
        yield
    finally:
        decode_decisions.vocabulary_threads_decided = saved


def fastest_torch_int8_dynamic_kernel(shape: tuple[int, ...]) -> str:
    """The fastest of torch's own int8-dynamic kernels in this process's measurement for ``shape``."""
    for c in kernels.measured():
        if c.kind == "int8dyn" and c.fields.get("shape") == shape and c.seconds:
            return min((k for k in c.seconds if k not in COMPILED_DYNAMIC), key=c.seconds.__getitem__)
    return "int_mm"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.decode_paths_ab", description=__doc__.splitlines()[0])
    precisions = ["float32", "bfloat16", "int8", "int8-dynamic"]
    ap.add_argument("dtype", nargs="?", default="float32", choices=precisions)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--also", nargs="*", default=[], choices=precisions, help="more measured models, same rounds")
    args = ap.parse_args(argv)
    load_start = os.getloadavg()[0]
    cfg = PRESETS["gpt2-small"]

    def build(precision: str, compiled: bool = True):
        model = GPTModel(cfg, generator=torch.Generator().manual_seed(0)).eval()
        if precision == "int8":  # as bench.decode builds them: int8 from bfloat16, int8-dynamic from float32
            model = quantize_int8(model.to(torch.bfloat16), "bfloat16")
        elif precision == "int8-dynamic":
            model = quantize_int8(model, "float32", dynamic=True)
        else:
            model = model.to(getattr(torch, precision))
        return accelerate(model, compiled_kernel=compiled)

    if args.dtype == "int8-dynamic":
        measured = build(args.dtype)
        plain = copy.deepcopy(measured)
        for m in plain.modules():
            if isinstance(m, Int8Linear):
                m.kernel = fastest_torch_int8_dynamic_kernel(tuple(m.weight.shape))
    else:
        plain, measured = build(args.dtype, False), build(args.dtype)
    also = {f"{p} (measured)": build(p) for p in args.also}
    status = native_gemv.status()
    print(f"compiled one-row kernel: {status.reason} {status.detail}; int8 dot product {status.int8_dot_bits} bits")
    for c in kernels.measured():
        if "one-row" in c.decision or "threads for" in c.decision or "int8" in c.decision or c.kind == "step":
            print("  " + c.summary())
    step_choice = [c for c in kernels.measured() if c.kind == "step"]
    step_threads = 1 if step_choice and step_choice[0].winner == "native_step_1_thread" else 0
    chosen = decode_decisions.vocabulary_threads_decided(cfg.vocab_size)
    # int8-dynamic compares kernels only: both on the measured threads (main's int8-dynamic path has them too)
    plain_threads = chosen if args.dtype == "int8-dynamic" else None
    variants = {"plain": (plain, plain_threads), "measured": (measured, chosen)}
    if native_decode.set_native_step(measured, step_threads):
        variants["native step"] = (measured, chosen)
    variants.update({name: (model, chosen) for name, model in also.items()})
    prompt = prompt_ids(32)

    def run(name):
        model, threads = variants[name]
        if model is measured:  # one model, its steps on the torch forward or the native step
            native_decode.set_native_step(measured, step_threads if name == "native step" else None)
        with threads_decided(threads):
            stamps, tokens = [], []
            for step in generate(model, prompt, max_new_tokens=args.new_tokens, temperature=0):
                stamps.append(time.perf_counter())
                tokens.append(step.token_id)
        return median(step_times(stamps)), tokens

    products = {}
    for name, (model, _) in variants.items():  # each variant's products as its own steps run them
        if model is measured:
            native_decode.set_native_step(measured, step_threads if name == "native step" else None)
        products[name] = step_products(model)
    for name in variants:  # warm-up
        run(name)
    steps: dict[str, list[float]] = {n: [] for n in variants}
    prods: dict[str, list[float]] = {n: [] for n in variants}
    tokens = {}
    for rep in range(args.reps):
        for name in variants:
            step, tokens[name] = run(name)
            steps[name].append(step)
            prods[name].append(products_seconds(products[name]))
        print(
            f"round {rep + 1}: "
            + ", ".join(f"{n} {1 / steps[n][-1]:.1f} tok/s" for n in variants)
            + f", load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    differ = {n: first_divergence(tokens["plain"], tokens[n]) for n in variants if n != "plain"}
    print(
        f"GPT-2 small {args.dtype}: greedy tokens first differ from plain at {differ} (None: identical); "
        f"1-minute load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    for name in variants:
        s, p = median(steps[name]), median(prods[name])
        print(
            f"  {name}: {1 / s:.1f} tok/s, step {s * 1e3:.1f} ms = products {p * 1e3:.1f} + outside {(s - p) * 1e3:.1f} ms"
        )
    for name in variants:
        if name != "plain":
            ratios = [a / b for a, b in zip(steps["plain"], steps[name])]
            print(f"  {name} / plain, per round: {', '.join(f'{r:.2f}' for r in ratios)}; median {median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
