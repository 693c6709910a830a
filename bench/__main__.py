"""``python -m bench [--quick]``: decode speed against peers, memory, the app; prints a table and
checks the targets of issue 5, writes bench/results/latest.json.
``python -m bench --browser [--quick]``: the app in headless Chromium against the same runs through
gradio_client (issue 9); writes bench/results/browser-latest.json.
``python -m bench --inside [--quick]``: the Inside tab's views (issues 11, 23: time, FLOPs, share of
this machine's matmul rate) and the plain decode path against the forward before hooks; writes
bench/results/inside-latest.json.
``python -m bench --room [--room-n 1,8,30] [--room-models bundled,gpt2-small]``: N learners at once on
one app (gradio_client sessions and a Chromium page) against llama.cpp's llama-server with ``-np N``
(issue 33); writes bench/results/room-latest.json."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from playground.runtime import kernels, native_gemv, native_step  # noqa: E402

from . import checks, decode, load, memory, report, scoring, serving  # noqa: E402
from .timing import median  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer tokens and rounds (about a minute)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--reps", type=int, default=None, help="rounds, every variant once a round (default 5, quick 3)")
    ap.add_argument("--new-tokens", type=int, default=None, help="default 128, quick 32")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--api-name", default="/generate", help="the app's generation endpoint")
    ap.add_argument("--ready-api", default="/load_session", help="endpoint that builds the default model")
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--skip-app", action="store_true", help="no cold start / concurrent users")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-ct2", action="store_true", help="no CTranslate2 peer")
    ap.add_argument("--skip-llama", action="store_true", help="no llama.cpp peer (llama-cpp-python + LLAMA_CPP_SRC)")
    ap.add_argument("--skip-onnx", action="store_true", help="no ONNX Runtime peer")
    ap.add_argument("--skip-load", action="store_true", help="no decode-under-training measurement")
    ap.add_argument(
        "--load-reps", type=int, default=None, help="rounds of the training-load measurement (default 3, quick 2)"
    )
    ap.add_argument(
        "--no-docs", action="store_true", help="do not regenerate docs/benchmarks.md and docs/speed.md's table"
    )
    ap.add_argument(
        "--out",
        default=None,
        help="JSON path (default bench/results/latest.json, with --browser bench/results/browser-latest.json)",
    )
    br = ap.add_argument_group("browser (issue 9)")
    br.add_argument(
        "--browser",
        action="store_true",
        help="time the app in headless Chromium against gradio_client (quick: 40 and 200 tokens)",
    )
    br.add_argument("--run-timeout", type=float, default=300.0, help="seconds a browser run may take (default 300)")
    br.add_argument("--models", default=None, help="comma-separated: bundled,gpt2-small (default both)")
    br.add_argument("--max-new", default=None, help="comma-separated max new tokens (default 40,200,512; quick 40,200)")
    br.add_argument("--prompts", default=None, help="comma-separated: short,long (default both)")
    br.add_argument("--no-stop", action="store_true", help="skip the Stop-latency runs")
    br.add_argument("--skip-generate", action="store_true", help="no Generate runs (nor Stop): only the Inside views")
    br.add_argument("--skip-inside", action="store_true", help="no Inside views (GPT-2 small, 256 tokens)")
    br.add_argument(
        "--inside-views",
        default=None,
        help="comma-separated words: only the Inside views whose names contain one (e.g. intervention,dose; "
        "the lens always runs: opening the tab draws it)",
    )
    br.add_argument("--inside-reps", type=int, default=1, help="clicks of each chosen Inside view (default 1)")
    br.add_argument(
        "--profile",
        action="store_true",
        help="also trace one 200-token run (Chrome trace + V8 CPU profile) and summarise the main thread",
    )
    br.add_argument("--trace-out", default=None, help="where to save that Chrome trace (default: not saved)")
    ap.add_argument(
        "--inside",
        action="store_true",
        help="time the Inside tab's views against this machine's matmul rate, and the decode path before/after hooks",
    )
    rm = ap.add_argument_group("room (issue 33)")
    rm.add_argument(
        "--room",
        action="store_true",
        help="N learners at once on the app (64 tokens each) and on llama-server -np N (bench/room.py)",
    )
    rm.add_argument("--room-n", default="1,8,30", help="comma-separated room sizes (default 1,8,30; 1 always runs)")
    rm.add_argument("--room-models", default="bundled,gpt2-small", help="comma-separated: bundled,gpt2-small")
    rm.add_argument("--room-skip-llama", action="store_true", help="no llama-server peer")
    rm.add_argument(
        "--room-llama-args",
        default="",
        help='extra llama-server arguments, one string (e.g. "-lm none": weights read into memory, not mapped)',
    )
    rm.add_argument("--room-timeout", type=float, default=900.0, help="seconds a round may take (default 900)")
    rm.add_argument(
        "--room-client",
        choices=("http", "gradio"),
        default="http",
        help="how a learner asks: a bare HTTP event stream like llama-server's clients (default), or gradio_client",
    )
    rm.add_argument(
        "--room-no-page",
        action="store_true",
        help="no Chromium page among the learners (its rendering shares the server's cores on one machine)",
    )
    args = ap.parse_args(argv)
    if args.room:
        return _room(args)
    if args.browser:
        return _browser(args)
    if args.inside:
        return _inside(args)

    if args.threads:
        torch.set_num_threads(args.threads)
    reps = args.reps or (3 if args.quick else 5)
    n_new = args.new_tokens or (32 if args.quick else 128)

    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        print("transformers is not installed: it is the peer this benchmark compares with.", file=sys.stderr)
        return 2

    training = _training_running()
    result = {
        "date": report.now(),
        "machine": report.machine(),
        "quick": args.quick,
        "config": {
            "model": "gpt2-small (124M), random weights",
            "prompt_tokens": args.prompt_tokens,
            "new_tokens": n_new,
            "reps": reps,
            "batch": 1,
            "greedy": True,
        },
        "concurrent_load": {"training_running": training, "loadavg_start": os.getloadavg()},
    }
    if training:
        print(
            "note: a playground.training.trainer run is using the CPU; ratios are measured in the same run, "
            "absolute numbers will be low."
        )

    print("Building GPT-2 small (Hugging Face init -> save_pretrained -> playground.load_pretrained) ...")
    peers = decode.build_peers(
        seed=0, with_ct2=not args.skip_ct2, with_llama=not args.skip_llama, with_onnx=not args.skip_onnx
    )
    prompt = decode.prompt_ids(args.prompt_tokens, seed=0)
    if peers.ct2_note:
        print(f"note: CTranslate2 not measured: {peers.ct2_note}")
    if peers.llama_note:
        some = " (in part)" if peers.gguf else ""
        print(f"note: llama.cpp not measured{some}: {peers.llama_note}")
    for t, why in peers.no_repack.items():
        print(f"note: llama.cpp {t} timed with --no-repack: {why}")
    if peers.onnx_note:
        print(f"note: ONNX Runtime not measured: {peers.onnx_note}")
    result["ctranslate2"] = {
        "version": _version("ctranslate2"),
        "note": peers.ct2_note,
        "model_bin_bytes": peers.ct2_bytes,
        "threads": torch.get_num_threads(),
    }
    result["peers"] = {
        "llama.cpp": {
            "version": _version("llama-cpp-python"),
            "note": peers.llama_note,
            "no_repack": peers.no_repack,
        },
        "onnxruntime": {"version": _version("onnxruntime"), "note": peers.onnx_note},
        "file_bytes": peers.peer_bytes,
    }
    result["build_seconds"] = peers.seconds
    result["kernels"] = [
        {"decision": c.decision, "winner": c.winner, "seconds": c.seconds, "measured": c.measured}
        for c in kernels.measured()
    ]
    status = native_gemv.status()
    print(
        f"Compiled one-row kernel: {status.reason}"
        + (
            f" ({status.compiler}, {status.vector_bits}-bit vectors, "
            + (f"built in {status.build_seconds:.1f} s)" if status.build_seconds else "loaded from the cache)")
            if status.available
            else f" {status.detail}"
        )
        + (
            f"; int8 products (VNNI, or AVX2's 16-bit pairs) {status.int8_dot_bits}-bit"
            if status.int8_dot_bits
            else f"; no int8 dot product {status.int8_dot_error}".rstrip()
            if status.available
            else ""
        )
    )
    print(
        "Decode path (each generation step): "
        + ", ".join(f"ours {k} {decode.decode_path(m)}" for k, m in peers.ours.items())
        + f" (native step: {native_step.status().reason})"
    )
    print("Kernel choices measured on this machine (playground.runtime.kernels):")
    for c in kernels.measured():
        print("  " + c.summary())

    print(f"Decoding {n_new} tokens, {reps} rounds (memory bandwidth measured in each round) ...")
    t0 = time.perf_counter()
    dec = decode.measure_decode(peers, prompt, n_new, reps)
    copy_bw, read_bw = median(dec.copy_bw), median(dec.read_bw)
    result["bandwidth"] = {
        "copy_gb_s": copy_bw / 1e9,
        "read_gb_s": read_bw / 1e9,
        "weight_bytes": peers.weight_bytes,
        "limit_tok_s": {dt: copy_bw / b for dt, b in peers.weight_bytes.items()},
        "copy_gb_s_rounds": [b / 1e9 for b in dec.copy_bw],
        "read_gb_s_rounds": [b / 1e9 for b in dec.read_bw],
    }
    result["decode_tok_s"] = dec.medians()
    result["decode_spread"] = {k: (min(v), max(v)) for k, v in dec.rates.items()}
    result["decode_rates"] = dec.rates
    result["decode_step_median_tok_s"] = dec.step_medians()
    result["decode_outside_products_ms"] = dec.outside_products()
    result["decode_paths"] = {f"ours {k}": decode.decode_path(m) for k, m in peers.ours.items()}
    result["native_gemv"] = dataclasses.asdict(native_gemv.status())
    if f"ours {decode.PLAIN_KERNELS}" in dec.tokens:
        result["native_gemv"]["tokens_identical_to_plain"] = (
            dec.tokens["ours float32"] == dec.tokens[f"ours {decode.PLAIN_KERNELS}"]
        )
    result["decode_seconds"] = time.perf_counter() - t0

    print("bfloat16 vs float32 greedy agreement ...")
    agreement = [
        decode.agreement_report(
            "random GPT-2 small (ours)",
            peers.ours["float32"],
            peers.ours["bfloat16"],
            prompt,
            dec.tokens["ours float32"],
            dec.tokens["ours bfloat16"],
        )
    ]
    agreement.append(
        decode.agreement_report(
            "random GPT-2 small (transformers)",
            peers.hf["float32"],
            peers.hf["bfloat16"],
            prompt,
            dec.tokens["transformers float32"],
            dec.tokens["transformers bfloat16"],
        )
    )
    agreement.append(
        decode.agreement_report(
            "random GPT-2 small (ours)",
            peers.ours["float32"],
            peers.ours["int8"],
            prompt,
            dec.tokens["ours float32"],
            dec.tokens["ours int8"],
            precision="int8",
        )
    )
    agreement.append(
        decode.agreement_report(
            "random GPT-2 small (ours)",
            peers.ours["float32"],
            peers.ours["int8-dynamic"],
            prompt,
            dec.tokens["ours float32"],
            dec.tokens["ours int8-dynamic"],
            precision="int8-dynamic",
        )
    )
    agreement.extend(_bundled_agreement(n_new))
    result["agreement"] = agreement
    result["ours_vs_transformers_float32_tokens_identical"] = (
        dec.tokens["ours float32"] == dec.tokens["transformers float32"]
    )
    if "ctranslate2 int8" in dec.tokens:
        result["ctranslate2_tokens_identical"] = {
            "float32 (ours float32)": dec.tokens["ctranslate2 float32"] == dec.tokens["ours float32"],
            "int8 (ours int8)": dec.tokens["ctranslate2 int8"] == dec.tokens["ours int8"],
            "int8 (ours float32)": dec.tokens["ctranslate2 int8"] == dec.tokens["ours float32"],
        }

    result["peer_tokens_vs_ours_float32"] = decode.peer_tokens_check(dec.tokens)

    if not args.skip_load:
        print(
            "Decoding (ours float32, the app's default) alone / with a training thread before / after "
            "the background-priority change ..."
        )
        result["under_training"] = load.measure(
            peers.ours["float32"], prompt, n_new, args.load_reps or (2 if args.quick else 3)
        )
    del peers

    print("Scoring 8 KB of Tiny Shakespeare with the bundled model (issue 13) ...")
    result["scoring"] = scoring.measure(reps)
    if not args.skip_memory:
        print("1024-token prompt with attention views (subprocess) ...")
        result["memory"] = {}
        for dt in ("float32", "bfloat16"):
            try:
                result["memory"][dt] = memory.measure_in_subprocess(dt, 1024, args.threads)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                result["memory"][dt] = {"dtype": dt, "error": str(e)}
    if not args.skip_app:
        print("Cold start of app.py ...")
        result["cold_start"] = serving.cold_start(args.ready_api)
        print(f"{args.users} concurrent users via {args.api_name} ...")
        result["concurrent_users"] = serving.concurrent_users(
            args.users, args.api_name, args.ready_api, max_new_tokens=32 if args.quick else 64
        )
    result["concurrent_load"]["loadavg_end"] = os.getloadavg()
    result["concurrent_load"]["training_running_end"] = _training_running()

    checked = checks.targets(result)
    result["targets"] = [c.__dict__ for c in checked]
    print()
    print(report.table(result))
    print("\n".join(scoring.rows(result["scoring"])))
    print()
    print("Targets (issues 5 and 14):")
    for c in checked:
        print(c.row())
    path = report.write_json(result, args.out and os.path.abspath(args.out))
    print(f"\nwrote {path}")
    if not args.no_docs and args.out is None:
        for doc in report.write_docs(result):
            print(f"regenerated {doc}")
    return 0


def _version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def _browser(args) -> int:
    from . import browser

    if not os.path.exists(browser.CHROMIUM):
        print(f"no Chromium at {browser.CHROMIUM} (set PLAYGROUND_CHROMIUM)", file=sys.stderr)
        return 2
    split = lambda v: [x.strip() for x in v.split(",") if x.strip()] if v else None  # noqa: E731
    prompts = split(args.prompts)
    if prompts:
        prompts = ["300 words" if p in ("long", "300", "300 words") else p for p in prompts]
    tokens = [int(x) for x in split(args.max_new)] if args.max_new else None
    training = _training_running()
    if training:
        print("note: a playground.training.trainer run is using the CPU; compare ratios, not absolute times.")
    print(f"Browser benchmark: app.py + headless Chromium, per-run timeout {args.run_timeout:.0f} s ...")
    out = os.path.abspath(args.out) if args.out else report.RESULTS / "browser-latest.json"
    result = browser.run(
        quick=args.quick,
        run_timeout=args.run_timeout,
        models=split(args.models),
        tokens=tokens,
        prompts=prompts,
        stop=not args.no_stop,
        profile=args.profile,
        trace_path=args.trace_out and os.path.abspath(args.trace_out),
        checkpoint=lambda r: report.write_json({**r, "partial": True}, out),
        generate=not args.skip_generate,
        inside=not args.skip_inside,
        inside_only=split(args.inside_views),
        inside_reps=max(1, args.inside_reps),
    )
    result["training_running"] = [training, _training_running()]
    print()
    print(browser.table(result))
    print()
    print("Targets (issues 9 and 23):")
    for t in browser.targets(result):
        print(t.row())
    path = report.write_json(result, out)
    print(f"\nwrote {path}")
    return 0


def _inside(args) -> int:
    from . import inside

    if args.threads:
        torch.set_num_threads(args.threads)
    result = {
        "date": report.now(),
        "machine": report.machine(),
        "quick": args.quick,
        "loadavg_start": os.getloadavg(),
        "training_running": _training_running(),
    }
    result.update(inside.run(quick=args.quick))
    result["loadavg_end"] = os.getloadavg()
    checked = inside.targets(result)
    result["targets"] = [c.__dict__ for c in checked]
    print()
    print(inside.table(result))
    print()
    print("Targets (issues 11 and 23):")
    for c in checked:
        print(c.row())
    path = report.write_json(result, os.path.abspath(args.out) if args.out else report.RESULTS / "inside-latest.json")
    print(f"\nwrote {path}")
    return 0


def _room(args) -> int:
    from . import browser, room, room_figures

    models = [m.strip() for m in args.room_models.split(",") if m.strip()]
    unknown = [m for m in models if m not in room.MODELS]
    if unknown:
        print(f"unknown --room-models {unknown}: choose from {', '.join(room.MODELS)}", file=sys.stderr)
        return 2
    sizes = sorted({int(x) for x in args.room_n.split(",") if x.strip()})
    if not sizes or min(sizes) < 1 or max(sizes) > 64:
        print("--room-n takes room sizes from 1 to 64", file=sys.stderr)
        return 2
    if not os.path.exists(browser.CHROMIUM):
        print(f"no Chromium at {browser.CHROMIUM} (set PLAYGROUND_CHROMIUM)", file=sys.stderr)
        return 2
    out = os.path.abspath(args.out) if args.out else report.RESULTS / "room-latest.json"
    training = _training_running()
    print(f"Room benchmark: {', '.join(models)}; N = {', '.join(map(str, sizes))}; {room.MAX_NEW} tokens each ...")
    result = room.run(
        models,
        sizes,
        llama=not args.room_skip_llama,
        run_timeout=args.room_timeout,
        llama_args=args.room_llama_args.split(),
        client=args.room_client,
        with_page=not args.room_no_page,
        checkpoint=lambda r: report.write_json({**r, "partial": True}, out),
    )
    result["training_running"] = [training, _training_running()]
    print()
    print(room_figures.table(result))
    print()
    print("Targets (issue 33; measured, not yet expected to be met):")
    print("\n".join(room_figures.targets(result)))
    path = report.write_json(result, out)
    print(f"\nwrote {path}")
    return 0


def _training_running() -> bool:
    try:
        return subprocess.run(["pgrep", "-f", "playground.training"], capture_output=True).returncode == 0
    except OSError:
        return False


def _bundled_agreement(n_new) -> list[dict]:
    """The same comparisons (bfloat16, int8, int8-dynamic against float32) on the bundled model, if this copy of
    the app has one."""
    from playground.accel import accelerate
    from playground.engine.quantize import quantize_int8
    from playground.engine.weights import load_checkpoint
    from playground.server.recipes import BUNDLED_CHECKPOINT

    if not BUNDLED_CHECKPOINT.is_file():
        return []
    from playground.engine.tokenizer import load_tokenizer

    prompt = load_tokenizer().encode("ROMEO:\nBut soft, what light through yonder window breaks?\n")
    m32 = accelerate(load_checkpoint(BUNDLED_CHECKPOINT, dtype="float32", device="cpu"))
    t32 = decode.run_ours(m32, prompt, n_new)[1]
    out = []
    for precision in ("bfloat16", "int8", "int8-dynamic"):
        m = load_checkpoint(
            BUNDLED_CHECKPOINT, dtype="float32" if precision == "int8-dynamic" else "bfloat16", device="cpu"
        )
        if precision == "int8":
            m = quantize_int8(m)
        elif precision == "int8-dynamic":
            m = quantize_int8(m, "float32", dynamic=True)
        t = decode.run_ours(accelerate(m), prompt, n_new)[1]
        out.append(decode.agreement_report(f"bundled ({BUNDLED_CHECKPOINT.name})", m32, m, prompt, t32, t, precision))
    return out


if __name__ == "__main__":
    sys.exit(main())
