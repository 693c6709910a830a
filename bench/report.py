"""The table of medians, the ratios to each peer, the docs' blocks and results/latest.json."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch

from bench.checks import CLASSES, best_by_class, dtype_of, ratio

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


def class_lines(r: dict) -> list[str]:
    lines = []
    for dt, best in best_by_class(r["decode_tok_s"]).items():
        ours, peer = best["ours"], best["peer"]
        if ours and peer:
            lines.append(
                f"{CLASSES[dt]}: {ours[0]} {ours[1]:.1f} tok/s (the best of ours) against {peer[0]} "
                f"{peer[1]:.1f} tok/s (the best peer): {ours[1] / peer[1]:.2f}×"
            )
    for name, check in r.get("peer_tokens_vs_ours_float32", {}).items():
        div = "identical" if check["identical"] else f"first differs at token {check['first_divergence']}"
        lines.append(f"greedy tokens of {name} vs ours float32: {div}")
    for peer, info in r.get("peers", {}).items():
        if isinstance(info, dict) and info.get("note"):
            lines.append(f"{peer}: not measured: {info['note']}")
        for t, why in (info.get("no_repack") or {}).items() if isinstance(info, dict) else ():
            lines.append(f"{peer} {t}: timed with --no-repack (llama.cpp's weights left unrepacked): {why}")
    return lines


def decode_table(r: dict) -> list[str]:
    d = r["decode_tok_s"]
    spread = r["decode_spread"]
    hf = {"float32": d.get("transformers float32"), "bfloat16": d.get("transformers bfloat16")}
    ct = {"float32": d.get("ctranslate2 float32"), "int8": d.get("ctranslate2 int8")}
    rerun = d.get("re-run loop float32")
    limit = r["bandwidth"]["limit_tok_s"]
    lines = [
        "| variant | tok/s (median) | min–max | × transformers (same dtype) | × CTranslate2 (same dtype) | × re-run loop | of bandwidth limit | 1 / median step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    steady = r.get("decode_step_median_tok_s", {})
    for name, rate in d.items():
        dt = dtype_of(name)
        lo, hi = spread[name]
        cells = [
            name,
            f"{rate:.1f}",
            f"{lo:.1f}–{hi:.1f}",
            _fmt(ratio(rate, hf.get(dt))),
            _fmt(ratio(rate, ct.get(dt))),
            _fmt(ratio(rate, rerun)),
            f"{rate / limit[dt]:.0%}" if dt in limit else "—",
            f"{steady[name]:.1f}" if name in steady else "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def bandwidth_line(r: dict) -> str:
    bw, limit = r["bandwidth"], r["bandwidth"]["limit_tok_s"]
    wb = bw["weight_bytes"]
    return (
        f"Memory bandwidth (median of the rounds): copy {bw['copy_gb_s']:.1f} GB/s (read + write), read {bw['read_gb_s']:.1f} GB/s. "
        f"Weights {wb['float32'] / GB:.3f} GB float32, {wb['bfloat16'] / GB:.3f} GB bfloat16"
        + (f", {wb['int8'] / GB:.3f} GB int8 (measured)" if "int8" in wb else "")
        + f" -> limit {limit['float32']:.0f} tok/s float32, {limit['bfloat16']:.0f} tok/s bfloat16"
        + (f", {limit['int8']:.0f} tok/s int8" if "int8" in limit else "")
        + " (copy bandwidth / weight bytes)."
    )


def outside_lines(r: dict) -> list[str]:
    """The time a decode step spends outside its matrix products, and the compiled kernel's part."""
    lines = []
    outside = r.get("decode_outside_products_ms", {})
    if outside:
        lines.append(
            "Time outside the matrix products (median step − that step's products timed alone, same rounds): "
            + "; ".join(
                f"{name} {o['step_ms']:.1f} ms = {o['products_ms']:.1f} products + {o['outside_ms']:.1f} outside"
                for name, o in outside.items()
            )
            + "."
        )
    paths = r.get("decode_paths")
    if paths:
        lines.append(
            "Decode path of each generation step: "
            + "; ".join(f"{name}: {path}" for name, path in paths.items())
            + " (native step: the whole token in one compiled call, `playground.accel.native_decode`; its "
            "products timed alone run in its own compiled region)."
        )
    native = r.get("native_gemv")
    if native:
        if native.get("available"):
            d = r["decode_tok_s"]
            a, b = d.get("ours float32"), d.get("ours float32, plain kernels")
            same_run = (
                f"; same run: ours float32 {a:.1f} tok/s against plain kernels {b:.1f} tok/s, {a / b:.2f}×"
                if a and b
                else ""
            )
            int8 = (
                f" Its int8-dynamic product on the CPU's int8 products ({native['int8_dot_bits']}-bit: VNNI, or AVX2's"
                " 16-bit pairs), used where"
                " the int8 dynamic kernel choices below say 'compiled_vnni'."
                if native.get("int8_dot_bits")
                else f" No int8 dot-product kernel ({native.get('int8_dot_error') or 'not in this build'})."
                if "int8_dot_bits" in native
                else ""
            )
            lines.append(
                f"Compiled one-row kernel (`playground.runtime.native_gemv`): built by {native['compiler']}, "
                f"{native['vector_bits'] or 'scalar'}-bit vectors, used where the kernel choices below say 'compiled'{same_run}."
                + int8
            )
        else:
            lines.append(f"Compiled one-row kernel: not used ({native.get('reason')}: {native.get('detail') or '—'}).")
    return lines


def table(r: dict) -> str:
    lines = [
        f"GPT-2 small, batch 1, {r['config']['prompt_tokens']}-token prompt, {r['config']['new_tokens']} new tokens, greedy; "
        f"median of {r['config']['reps']} rounds, {r['machine']['torch_threads']} threads",
        "",
    ] + decode_table(r)
    lines += ["", bandwidth_line(r), *outside_lines(r)] + class_lines(r)
    load = r.get("under_training")
    if load:
        lines.append(load_line(load))
    for k in r.get("kernels", []):
        lines.append("kernel choice: " + _kernel_text(k))
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
        lines.append(
            f"Cold start of app.py: page served in {cold['page_s']:.1f} s"
            + (
                f", default model ready in {cold['ready_s']:.1f} s"
                if "ready_s" in cold
                else f" ({cold.get('ready_note')})"
            )
        )
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
        kl = f", mean KL {a['mean_kl_nats']:.2e} nats" if "mean_kl_nats" in a else ""
        lines.append(
            f"{a.get('precision', 'bfloat16')} vs float32 greedy, {a['model']}: {a['greedy_tokens']} tokens, first divergence {div}; "
            f"argmax agreement on the float32 sequence {a['teacher_forced_agreement']:.1%}{kl}"
        )
    return "\n".join(lines)


def load_line(load: dict) -> str:
    d, share, steps = load["decode_tok_s"], load["share_of_alone"], load["training_steps_per_s"]
    before, after = "with training (before)", "with training (after: background priority)"
    bg = load.get("background_settings") or {}
    return (
        f"Decode (ours float32) with a training thread in the process: alone {d['alone']:.1f} tok/s; "
        f"training as before {d[before]:.1f} tok/s ({share[before]:.0%} of alone, training {steps[before]:.2f} steps/s); "
        f"training as background work (nice {bg.get('nice')}, {bg.get('threads')} thread(s)) {d[after]:.1f} tok/s "
        f"({share[after]:.0%}, training {steps[after]:.2f} steps/s)."
    )


def _kernel_text(k: dict) -> str:
    if not k.get("measured", True):
        return f"{k['decision']}: {k['winner']} (not measured)"
    figures = ", ".join(f"{n} {s * 1e3:.2f} ms" for n, s in k["seconds"].items())
    return f"{k['decision']}: **{k['winner']}** ({figures})"


# ----------------------------------------------------------------------------------------------
# docs/benchmarks.md and docs/speed.md: the generated blocks between markers

ROOT = Path(__file__).resolve().parent.parent
DOCS = {"docs": ROOT / "docs" / "benchmarks.md", "speed": ROOT / "docs" / "speed.md"}
START, END = "<!-- bench:decode:start (python -m bench writes this block) -->", "<!-- bench:decode:end -->"


def docs_block(r: dict, short: bool = False) -> str:
    m, c = r["machine"], r["config"]
    load = r.get("concurrent_load", {})
    la = load.get("loadavg_start"), load.get("loadavg_end")
    head = (
        f"{r['date'][:16].replace('T', ' ')} UTC, `python -m bench{' --quick' if r.get('quick') else ''}`; "
        f'CPU "{m["cpu"]}" ({", ".join(m["cpu_flags"]) or "no AVX-512"}), {m["cores"]} cores, {m["torch_threads"]} torch threads, '
        f"torch {m['torch']}"
        + (f", CTranslate2 {r['ctranslate2']['version']}" if r.get("ctranslate2", {}).get("version") else "")
        + "".join(
            f", {peer} {info['version']}"
            for peer, info in r.get("peers", {}).items()
            if isinstance(info, dict) and info.get("version") and not info.get("note")
        )
        + (f"; 1-minute load average {la[0][0]:.1f} at the start, {la[1][0]:.1f} at the end" if la[0] and la[1] else "")
        + f". GPT-2 small (random weights), batch 1, {c['prompt_tokens']}-token prompt, {c['new_tokens']} new tokens, "
        f"greedy, median of {c['reps']} rounds."
    )
    lines = [START, "", head, ""] + decode_table(r) + ["", bandwidth_line(r)]
    if not short:
        lines += [""] + outside_lines(r)
    if not short:
        lines += [""] + [f"- {line}" for line in class_lines(r)]
    if r.get("under_training"):
        lines += ["", load_line(r["under_training"])]
    checks = [] if short else r.get("targets", [])
    if checks:
        lines += ["", "| target | value | goal | |", "|---|---:|---|---|"]
        for t in checks:
            shown = "—" if t["value"] is None else f"{t['value']:.3g}"
            status = "n/a" if t["ok"] is None else "PASS" if t["ok"] else "FAIL"
            lines.append(f"| {t['name']} | {shown} | {t['goal']} | {status} |")
    if not short:
        if r.get("agreement"):
            lines += [
                "",
                "| precision vs float32 | model | greedy tokens | first divergence | argmax agreement, teacher-forced | mean KL (nats) |",
                "|---|---|---:|---:|---:|---:|",
            ]
            for a in r["agreement"]:
                div = "none" if a["first_divergence"] is None else f"token {a['first_divergence']}"
                kl = f"{a['mean_kl_nats']:.2e}" if "mean_kl_nats" in a else "—"
                lines.append(
                    f"| {a.get('precision', 'bfloat16')} | {a['model']} | {a['greedy_tokens']} | {div} | "
                    f"{a['teacher_forced_agreement']:.1%} | {kl} |"
                )
        if r.get("kernels"):
            lines += [
                "",
                "Kernel and layout choices measured in this run (`playground.runtime.kernels`; median of one pass over a "
                "working set of the model's own shapes):",
                "",
            ]
            lines += [f"- {_kernel_text(k)}" for k in r["kernels"]]
    lines += ["", END]
    return "\n".join(lines)


def write_docs(r: dict) -> list[Path]:
    """Replace the generated block in docs/benchmarks.md (full) and docs/speed.md (short); README has none."""
    written = []
    for name, path in DOCS.items():
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if START not in text or END not in text:
            continue
        before, rest = text.split(START, 1)
        _, after = rest.split(END, 1)
        path.write_text(before + docs_block(r, short=name == "speed") + after, encoding="utf-8")
        written.append(path)
    return written


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


if __name__ == "__main__":  # python -m bench.report: regenerate the docs from bench/results/latest.json
    result = json.loads((RESULTS / "latest.json").read_text())
    for p in write_docs(result):
        print(f"regenerated {p}")
