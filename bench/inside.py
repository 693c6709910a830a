"""``python -m bench --inside``: the Inside tab's views timed on this machine, each with its FLOPs
and the share of this machine's matmul rate it reaches, and the plain decode path against the
model code from before the hooks were added (same weights, same process, rounds interleaved).

Views are timed as the library functions the tab and the API call (the Gradio round trip is not
included): the bundled model on a 64-token run, GPT-2-small-shaped random weights on a 256-token
run, and the head-importance sweep (the bundled model's 24 heads; GPT-2 small's first layer, the
whole sweep being refused there as too long). A view's FLOPs are counted from the config
(bench/view_flops.py); the matmul rate is a large float32 ``torch.matmul`` timed between the
views, on the same torch threads. GPT-2's views are judged by that share (issue 23: >= 60%),
the bundled model's, which are too small to keep a core's vector units busy, by seconds.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import torch

from playground.inside import attention_maths, attribution, effects, lenses
from playground.inside.interventions import Intervention

from . import view_flops
from .checks import Target, at_most
from .decode import prompt_ids, run_ours
from .timing import decode_rate, matmul_rate, median

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
WINDOW = 32  # positions the tab's lens shows at once (playground.ui.inside.data.LENS_WINDOW)


def _ids(n: int) -> list[int]:
    from playground.engine.tokenizer import load_tokenizer

    if TEXT.is_file():
        with open(TEXT, encoding="utf-8") as f:
            return load_tokenizer().encode(f.read(8000))[:n]
    return prompt_ids(n, seed=1)


def views(model, ids) -> dict:
    """name -> (zero-argument call, its FLOPs counted from the config), every view of the tab on ``ids``."""
    cfg = model.cfg
    T, L, H = len(ids), cfg.n_layers, cfg.n_heads
    p = T - 2
    spec = Intervention(zero_heads=((L // 2, 0), (L - 1, H - 1)))
    first = max(0, T - WINDOW)  # the tab reads out the 32 positions it shows (and scrolls)
    return {
        "logit lens (32-position window)": (
            lambda: lenses.logit_lens(model, ids, first=first),
            view_flops.logit_lens(cfg, T, first, T),
        ),
        "lens cell (top-10 + KL)": (
            lambda: lenses.lens_cell(model, ids, L // 2, p),
            view_flops.lens_cell(cfg, T, p),
        ),
        "logit attribution": (
            lambda: attribution.logit_attribution(model, ids, p),
            view_flops.logit_attribution(cfg, T, p),
        ),
        "attention maths": (
            lambda: attention_maths.attention_maths(model, ids, L // 2, 1, p),
            view_flops.attention_maths(cfg, T, L // 2),
        ),
        "intervention before/after (+ lens window after)": (
            lambda: effects.compare(model, ids, spec, p, lens_window=(first, T)),
            view_flops.compare(cfg, T, L // 2, first, T),
        ),
        "dose-response (11 α)": (
            lambda: effects.dose_response(model, ids, L // 2, 0, p),
            view_flops.dose_response(cfg, T, L // 2, p),
        ),
    }


def sweep_first_layer(model, ids) -> dict:
    """The head sweep's first yield (layer 0's heads zeroed in turn, the costliest layer: every
    block runs for each), for a model whose whole sweep the tab refuses as too long."""
    H = model.cfg.n_heads
    return {
        f"head sweep, layer 0 ({H} of {H * model.cfg.n_layers} heads)": (
            lambda: next(effects.head_sweep_layers(model, ids, 0.0)),
            view_flops.head_sweep_layers(model.cfg, len(ids), 1),
        )
    }


def time_calls(calls: dict, reps: int, warm: bool = True) -> dict:
    """name -> median / min / max seconds of ``reps`` calls (after one unmeasured call when ``warm``);
    a call given as (call, flops) also gets its FLOPs."""
    out = {}
    for name, call in calls.items():
        call, flops = call if isinstance(call, tuple) else (call, None)
        if warm:
            call()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out[name] = {"median_s": median(times), "min_s": min(times), "max_s": max(times)}
        if flops is not None:
            out[name]["flops"] = flops
    return out


def baseline_model_class():
    """GPTModel as it was before ``hooks`` was added to the forward (from git), or None."""
    try:
        introduced = subprocess.run(
            ["git", "log", "--format=%H", "-S", "hooks=None", "--reverse", "--", "playground/model.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if not introduced:
            return None
        source = subprocess.run(
            ["git", "show", f"{introduced[0]}^:playground/model.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    source = source.replace("from .config import", "from playground.engine.config import")
    spec = importlib.util.spec_from_loader("bench_baseline_model", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        exec(compile(source, f"{introduced[0][:10]}^:playground/model.py", "exec"), module.__dict__)
    except Exception as e:  # the old file imports names today's modules no longer have: no baseline to time
        print(
            f"  (the forward before hooks, {introduced[0][:10]}^, does not load against today's modules: {e!r}; skipped)"
        )
        sys.modules.pop(spec.name, None)
        return None
    return module.GPTModel, introduced[0][:10]


def decode_ab(model, n_new: int, reps: int) -> dict | None:
    """Greedy decode tokens/s of today's forward against the forward before hooks, same weights."""
    found = baseline_model_class()
    if found is None:
        return None
    cls, commit = found
    before = cls(model.cfg, memory_budget=False).eval()
    before.load_state_dict(model.state_dict())
    before.to(model.dtype)
    prompt = prompt_ids(32, seed=0)
    rates = {"after (hooks=None)": [], "before hooks": []}
    tokens = {}
    for _ in range(reps):
        for name, m in (("after (hooks=None)", model), ("before hooks", before)):
            times, toks = run_ours(m, prompt, n_new)
            rates[name].append(decode_rate(times))
            tokens[name] = toks
    med = {k: median(v) for k, v in rates.items()}
    return {
        "baseline": f"playground/model.py before commit {commit}",
        "tok_s": med,
        "rounds": rates,
        "ratio_after_over_before": med["after (hooks=None)"] / med["before hooks"],
        "same_tokens": tokens["after (hooks=None)"] == tokens["before hooks"],
    }


def run(quick: bool = False) -> dict:
    from playground.accel import accelerate
    from playground.engine.model import GPTModel
    from playground.engine.presets import PRESETS
    from playground.server.recipes import BUNDLED_CHECKPOINT, build_from_recipe, bundled_recipe

    reps = 3 if quick else 5
    result = {"views": {}}
    if BUNDLED_CHECKPOINT.is_file():
        print("Inside views: bundled model, 64-token run ...")
        bundled = build_from_recipe(bundled_recipe())
        ids = _ids(64)
        result["views"]["bundled, 64 tokens"] = time_calls(views(bundled, ids), reps)
        sweep = time_calls({"head sweep (24 heads)": lambda: effects.head_sweep(bundled, ids)}, max(1, reps - 2))
        result["views"]["bundled, 64 tokens"].update(sweep)
        result["forward_s"] = {"bundled, 64 tokens": effects.estimate_sweep_seconds(bundled, ids)[0]}
    print("Inside views: GPT-2-small-shaped random weights, 256-token run, and this machine's matmul rate ...")
    gpt2 = accelerate(GPTModel(PRESETS["gpt2-small"], generator=torch.Generator().manual_seed(0)).eval())
    ids = _ids(256)
    rates = [matmul_rate()]
    idx = torch.tensor([ids])
    run_views = time_calls(
        {"one plain forward (all logits)": (lambda: gpt2(idx), view_flops.forward(gpt2.cfg, len(ids), False))}, 2
    )
    for name, view in views(gpt2, ids).items():  # the rate measured between views: load comes and goes
        run_views.update(time_calls({name: view}, max(2, reps - 2)))
        rates.append(matmul_rate())
    run_views.update(time_calls(sweep_first_layer(gpt2, ids), 1, warm=False))
    rates.append(matmul_rate())
    result["views"]["gpt2-small shape, 256 tokens"] = run_views
    result["matmul"] = {
        "shape": "float32 (2048 × 2048) · (2048 × 2048), torch.matmul",
        "threads": torch.get_num_threads(),
        "flop_s": median(rates),
        "flop_s_samples": rates,
    }
    for rows in result["views"].values():
        for t in rows.values():
            if "flops" in t:
                t["fraction_of_matmul"] = t["flops"] / t["median_s"] / result["matmul"]["flop_s"]
    print("Activation patching: GPT-2-small-shaped weights, 20 tokens, the whole resid_pre grid ...")
    result["views"][PATCH_RUN] = time_calls({PATCH_VIEW: patching_call(gpt2)}, max(2, reps - 2))
    one, estimate = effects.estimate_sweep_seconds(gpt2, ids)
    result.setdefault("forward_s", {})["gpt2-small shape, 256 tokens"] = one
    result["gpt2_sweep_estimate_s"] = estimate
    try:
        effects.head_sweep(gpt2, ids)
        result["gpt2_sweep_refused"] = False
    except effects.SweepTooLongError as e:
        result["gpt2_sweep_refused"] = str(e)
    print("Plain decode path: today's forward against the one before hooks (same weights) ...")
    result["decode_ab"] = decode_ab(gpt2, 16 if quick else 48, reps)
    return result


FRACTION_TARGET = 0.6  # of this machine's measured matmul rate, for GPT-2 small's views at 256 tokens
GPT2_RUN = "gpt2-small shape, 256 tokens"
PATCH_RUN, PATCH_VIEW = "gpt2-small shape, 20-token patching", "activation patching, resid_pre grid + attribution"
PATCH_TARGET_S = 5.0  # issue 37: the whole 12 × 20 grid of GPT-2 small


def patching_call(model):
    """The Inside tab's patching view on a 20-token clean prompt and a corrupted one two tokens apart: every
    layer's block input at every position patched (240 cells, batched forwards), then attribution patching."""
    from playground.inside.patching import activation_patching

    clean = _ids(20)
    corrupted = list(clean)
    corrupted[3], corrupted[10] = (clean[3] + 1) % model.cfg.vocab_size, (clean[10] + 1) % model.cfg.vocab_size
    answer, wrong = clean[-1], corrupted[-1] if corrupted[-1] != clean[-1] else (clean[-1] + 1) % model.cfg.vocab_size
    return lambda: activation_patching(model, clean, corrupted, answer, wrong, "resid_pre")


def targets(r: dict) -> list[Target]:
    out = []
    for name, t in r["views"].get("bundled, 64 tokens", {}).items():
        goal = 3.0 if name.startswith("head sweep") else 0.2
        out.append(at_most(f"bundled, 64 tokens: {name} (s, median)", t["median_s"], goal))
    for name, t in r["views"].get(PATCH_RUN, {}).items():
        out.append(at_most(f"{PATCH_RUN}: {name} (s, median)", t["median_s"], PATCH_TARGET_S))
    for name, t in r["views"].get(GPT2_RUN, {}).items():
        if name.startswith("one plain forward") or "fraction_of_matmul" not in t:
            continue
        f = t["fraction_of_matmul"]
        out.append(Target(f"{GPT2_RUN}: {name}, of the matmul rate", f, f">= {FRACTION_TARGET}", f >= FRACTION_TARGET))
    ab = r.get("decode_ab")
    if ab:
        out.append(
            Target(
                "plain decode after/before hooks (tok/s ratio)",
                ab["ratio_after_over_before"],
                ">= 0.95",
                ab["ratio_after_over_before"] >= 0.95,
            )
        )
    return out


def table(r: dict) -> str:
    m = r.get("matmul")
    lines = []
    if r.get("loadavg_start") and r.get("loadavg_end"):
        lines.append(
            f"1-minute load average {r['loadavg_start'][0]:.1f} at the start, {r['loadavg_end'][0]:.1f} at the end"
            + ("; a training run was using the CPU" if r.get("training_running") else "")
        )
    if m:
        samples = [x / 1e9 for x in m["flop_s_samples"]]
        lines.append(
            f"matmul rate: {m['flop_s'] / 1e9:.1f} GFLOP/s (median of {len(samples)} probes between the views, "
            f"{min(samples):.1f}–{max(samples):.1f}; {m['shape']}, {m['threads']} threads)"
        )
    lines.append(
        f"{'view':48} {'median s':>9} {'min s':>8} {'max s':>8} {'x forward':>10} {'GFLOP':>8} {'GFLOP/s':>8} "
        f"{'of matmul':>10}"
    )
    for run, rows in r["views"].items():
        forward = r.get("forward_s", {}).get(run)
        lines.append(f"-- {run}" + (f" (one plain forward: {forward * 1000:.0f} ms)" if forward else ""))
        for name, t in rows.items():
            times = f"{name:48} {t['median_s']:9.3f} {t['min_s']:8.3f} {t['max_s']:8.3f}"
            line = times + (f" {t['median_s'] / forward:9.1f}x" if forward else f" {'–':>10}")
            if "flops" in t:
                line += f" {t['flops'] / 1e9:8.1f} {t['flops'] / 1e9 / t['median_s']:8.1f}"
            if "fraction_of_matmul" in t:
                short = run == GPT2_RUN and t["fraction_of_matmul"] < FRACTION_TARGET
                line += f" {t['fraction_of_matmul']:9.0%}" + (" < 60%" if short else "")
            lines.append(line)
    if r.get("gpt2_sweep_refused"):
        lines.append(f"gpt2-small 256-token sweep (144 heads): refused, estimate {r['gpt2_sweep_estimate_s']:.0f} s")
    ab = r.get("decode_ab")
    if ab:
        tok = ab["tok_s"]
        lines.append(
            f"decode tok/s, GPT-2 small shape, greedy: after {tok['after (hooks=None)']:.1f}, "
            f"before hooks {tok['before hooks']:.1f} (ratio {ab['ratio_after_over_before']:.3f}; "
            f"same tokens: {ab['same_tokens']})"
        )
    return "\n".join(lines)
