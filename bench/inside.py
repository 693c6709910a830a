"""``python -m bench --inside``: the Inside tab's views timed on this machine (issue 11), and the
plain decode path against the model code from before the hooks were added (same weights, same
process, rounds interleaved).

Views are timed as the library functions the tab and the API call (the Gradio round trip is not
included): the bundled model on a 64-token run, GPT-2-small-shaped random weights on a 256-token
run, and the head-importance sweep of the bundled model's 24 heads.
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

from .decode import prompt_ids, run_ours
from .report import Target, _at_most
from .timing import decode_rate, median

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
WINDOW = 32  # positions the tab's lens shows at once (playground.ui.inside_data.LENS_WINDOW)


def _ids(n: int) -> list[int]:
    from playground.engine.tokenizer import load_tokenizer

    if TEXT.is_file():
        with open(TEXT, encoding="utf-8") as f:
            return load_tokenizer().encode(f.read(8000))[:n]
    return prompt_ids(n, seed=1)


def views(model, ids) -> dict:
    """name -> zero-argument call, every view of the tab on ``ids``."""
    T, L, H = len(ids), model.cfg.n_layers, model.cfg.n_heads
    p = T - 2
    spec = Intervention(zero_heads=((L // 2, 0), (L - 1, H - 1)))
    first = max(0, T - WINDOW)  # the tab reads out the 32 positions it shows (and scrolls)
    return {
        "logit lens (32-position window)": lambda: lenses.logit_lens(model, ids, first=first),
        "lens cell (top-10 + KL)": lambda: lenses.lens_cell(model, ids, L // 2, p),
        "logit attribution": lambda: attribution.logit_attribution(model, ids, p),
        "attention maths": lambda: attention_maths.attention_maths(model, ids, L // 2, 1, p),
        "intervention before/after (+ lens window after)": lambda: effects.compare(
            model, ids, spec, p, lens_window=(first, T)
        ),
        "dose-response (11 α)": lambda: effects.dose_response(model, ids, L // 2, 0, p),
    }


def time_calls(calls: dict, reps: int) -> dict:
    out = {}
    for name, call in calls.items():
        call()  # warm
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out[name] = {"median_s": median(times), "min_s": min(times), "max_s": max(times)}
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
    exec(compile(source, f"{introduced[0][:10]}^:playground/model.py", "exec"), module.__dict__)
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
    from playground.engine.config import PRESETS
    from playground.engine.decode_paths import optimize_for_decode
    from playground.engine.model import GPTModel
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
    print("Inside views: GPT-2-small-shaped random weights, 256-token run ...")
    gpt2 = optimize_for_decode(GPTModel(PRESETS["gpt2-small"], generator=torch.Generator().manual_seed(0)).eval())
    ids = _ids(256)
    result["views"]["gpt2-small shape, 256 tokens"] = time_calls(views(gpt2, ids), max(2, reps - 2))
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


def targets(r: dict) -> list[Target]:
    out = []
    for run, limit in (("bundled, 64 tokens", 0.2), ("gpt2-small shape, 256 tokens", 1.5)):
        for name, t in r["views"].get(run, {}).items():
            goal = 3.0 if name.startswith("head sweep") else limit
            out.append(_at_most(f"{run}: {name} (s, median)", t["median_s"], goal))
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
    lines = [f"{'view':48} {'median s':>9} {'min s':>8} {'max s':>8} {'x forward':>10}"]
    for run, rows in r["views"].items():
        forward = r["forward_s"].get(run, float("nan"))
        lines.append(f"-- {run} (one plain forward: {forward * 1000:.0f} ms)")
        for name, t in rows.items():
            lines.append(
                f"{name:48} {t['median_s']:9.3f} {t['min_s']:8.3f} {t['max_s']:8.3f} {t['median_s'] / forward:9.1f}x"
            )
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
