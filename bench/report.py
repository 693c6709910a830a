"""The table of medians, the ratios to each peer, and the targets of issue 5."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"
GB = 1e9


def machine() -> dict:
    model = platform.processor() or "unknown"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    flags = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cpu_flags": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16"}),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


@dataclass
class Target:
    name: str
    value: float | None
    goal: str  # e.g. ">= 1.5"
    ok: bool | None  # None: not measured

    def row(self) -> str:
        status = "n/a " if self.ok is None else "PASS" if self.ok else "FAIL"
        shown = "—" if self.value is None else f"{self.value:.3g}"
        return f"  [{status}] {self.name}: {shown} (target {self.goal})"


def _at_least(name, value, goal) -> Target:
    return Target(name, value, f">= {goal}", None if value is None else value >= goal)


def _at_most(name, value, goal) -> Target:
    return Target(name, value, f"<= {goal}", None if value is None else value <= goal)


def targets(r: dict) -> list[Target]:
    d = r["decode_tok_s"]
    limit = r["bandwidth"]["limit_tok_s"]
    get = d.get
    out = [
        _at_least("bfloat16 / transformers bfloat16", _ratio(get("ours bfloat16"), get("transformers bfloat16")), 1.5),
        _at_least("bfloat16 / bandwidth limit (bfloat16 weights)", _ratio(get("ours bfloat16"), limit["bfloat16"]), 0.6),
        _at_least("float32 / transformers float32", _ratio(get("ours float32"), get("transformers float32")), 1.0),
        _at_least("float32 / re-run-everything loop (float32)", _ratio(get("ours float32"), get("re-run loop float32")), 6.0),
    ]
    for dt in ("float32", "bfloat16"):
        slow = _ratio(get(f"ours {dt}"), get(f"ours {dt} + attention"))
        out.append(_at_most(f"attention capture slowdown, {dt}", None if slow is None else slow - 1, 0.15))
    for m in r.get("memory", {}).values():
        if "peak_process_bytes" in m:
            out.append(_at_most(f"peak memory, 1024-token prompt + attention views, {m['dtype']} (GB)",
                                m["peak_process_bytes"] / GB, 1.5))
    cold = r.get("cold_start", {})
    out.append(_at_most("cold start of app.py to default model ready (s)", cold.get("ready_s", cold.get("page_s")), 10.0))
    users = r.get("concurrent_users", {})
    if "aggregate_tok_s" in users:
        out.append(Target("4 concurrent users: no request fails", len(users["errors"]), "0", not users["errors"]))
        out.append(_at_least("4 users aggregate tok/s / one user's", _ratio(users["aggregate_tok_s"], users.get("single_tok_s")), 1.0))
    sc = r.get("scoring", {})
    if "median_s" in sc:  # issue 13
        out.append(_at_most("scoring 8 KB of Tiny Shakespeare, bundled model (s)", sc["median_s"], 1.0))
        out.append(_at_least("scoring / full-logits evaluation loop (speed)", _ratio(sc["peer_median_s"], sc["median_s"]), 1.0))
    for a in r.get("agreement", []):
        if a["model"].startswith("random"):
            out.append(Target(f"bf16 vs fp32 teacher-forced greedy agreement, {a['model']} (measured, shown)",
                              a["teacher_forced_agreement"], "reported", None))
    return out


def _ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def table(r: dict) -> str:
    d = r["decode_tok_s"]
    spread = r["decode_spread"]
    hf = {"float32": d.get("transformers float32"), "bfloat16": d.get("transformers bfloat16")}
    rerun = d.get("re-run loop float32")
    limit = r["bandwidth"]["limit_tok_s"]
    lines = [
        f"GPT-2 small, batch 1, {r['config']['prompt_tokens']}-token prompt, {r['config']['new_tokens']} new tokens, greedy; "
        f"median of {r['config']['reps']} rounds, {r['machine']['torch_threads']} threads",
        "",
        "| variant | tok/s (median) | min–max | × transformers (same dtype) | × re-run loop | of bandwidth limit | 1 / median step |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    steady = r.get("decode_step_median_tok_s", {})
    for name, rate in d.items():
        dt = "bfloat16" if "bfloat16" in name else "float32"
        lo, hi = spread[name]
        cells = [
            name, f"{rate:.1f}", f"{lo:.1f}–{hi:.1f}",
            _fmt(_ratio(rate, hf[dt])), _fmt(_ratio(rate, rerun)), f"{rate / limit[dt]:.0%}",
            f"{steady[name]:.1f}" if name in steady else "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    bw = r["bandwidth"]
    lines += [
        "",
        f"Memory bandwidth (median of the rounds): copy {bw['copy_gb_s']:.1f} GB/s (read + write), read {bw['read_gb_s']:.1f} GB/s. "
        f"Weights {bw['weight_bytes']['float32'] / GB:.3f} GB float32, {bw['weight_bytes']['bfloat16'] / GB:.3f} GB bfloat16 "
        f"-> limit {limit['float32']:.0f} tok/s float32, {limit['bfloat16']:.0f} tok/s bfloat16 (copy bandwidth / weight bytes).",
    ]
    for m in r.get("memory", {}).values():
        if "error" in m:
            lines.append(f"1024-token prompt, {m.get('dtype')}: {m['error']}")
            continue
        lines.append(
            f"1024-token prompt, {m['dtype']}, attention on: first token {m['ttft_s']:.2f} s, "
            f"peak RSS {m['peak_process_bytes'] / GB:.2f} GB (queries+keys of all layers {m['queries_keys_bytes'] / 1e6:.0f} MB, "
            f"one layer's maps in {m['one_layer_maps_s'] * 1000:.0f} ms)"
        )
    cold = r.get("cold_start", {})
    if "skipped" in cold:
        lines.append(f"Cold start: skipped ({cold['skipped']})")
    elif cold:
        lines.append(f"Cold start of app.py: page served in {cold['page_s']:.1f} s"
                     + (f", default model ready in {cold['ready_s']:.1f} s" if "ready_s" in cold else f" ({cold.get('ready_note')})"))
    users = r.get("concurrent_users", {})
    if "skipped" in users:
        lines.append(f"Concurrent users: skipped ({users['skipped']})")
    elif users:
        lines.append(
            f"{users['users']} concurrent users via {users['api_name']} ({users['max_new_tokens']} tokens each): "
            f"aggregate {users.get('aggregate_tok_s', 0):.1f} tok/s vs one user {users.get('single_tok_s', 0):.1f} tok/s, "
            f"worst latency {users.get('worst_latency_s', float('nan')):.2f} s, failed requests: {len(users['errors'])}"
        )
    for a in r.get("agreement", []):
        div = "never" if a["first_divergence"] is None else f"at token {a['first_divergence']}"
        lines.append(
            f"bfloat16 vs float32 greedy, {a['model']}: {a['greedy_tokens']} tokens, first divergence {div}; "
            f"argmax agreement on the float32 sequence {a['teacher_forced_agreement']:.1%}"
        )
    return "\n".join(lines)


def _fmt(x):
    return "—" if x is None else f"{x:.2f}×"


def write_json(r: dict, path: Path | None = None) -> Path:
    path = Path(path) if path else RESULTS / "latest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(r, indent=2, default=str))
    os.replace(tmp, path)
    return path


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
