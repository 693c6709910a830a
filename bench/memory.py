"""Time to first token and peak memory for a full-context prompt with attention views on.

Run in its own process so the peak resident set belongs to this measurement alone:
``python -m bench.memory --dtype bfloat16 --prompt-tokens 1024`` prints one JSON line. The parent
(``python -m bench``) spawns it; ``measure_in_subprocess`` does that.

What the app does, in order: build GPT-2 small, generate with attention capture (the first token
needs the whole prompt's forward pass), then keep every layer's queries and keys of the window and
compute one layer's (n_heads, T, T) maps at a time when the user looks at them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    """Make VmHWM start again from the current RSS (Linux >= 4.0); False where unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def run(dtype: str, prompt_tokens: int, seed: int = 0) -> dict:
    import torch

    from playground.accel import accelerate
    from playground.engine.attention import attention_probs
    from playground.engine.config import GPTConfig
    from playground.engine.model import GPTModel
    from playground.engine.sampling import generate

    rss_start = _status_kb("VmRSS")
    torch.manual_seed(seed)
    model = accelerate(GPTModel(GPTConfig()).to(getattr(torch, dtype)).eval())
    gc.collect()
    rss_model = _status_kb("VmRSS")
    peak_after_build = _status_kb("VmHWM")
    reset = _reset_peak()

    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, 50256, (prompt_tokens,), generator=gen).tolist()
    t0 = time.perf_counter()
    first = next(iter(generate(model, prompt, max_new_tokens=1, temperature=0, capture_attention=True)))
    ttft = time.perf_counter() - t0
    assert first.attention is not None and len(first.attention) == model.cfg.n_layers

    # The attention views: queries and keys of every layer kept (as the app's run cache does),
    # each layer's full maps computed on request and dropped when the next layer is shown.
    t0 = time.perf_counter()
    with torch.no_grad():
        _, trace = model(torch.tensor([prompt]), return_attention=True, last_token_only=True)
    qk = [(q[0], k[0]) for q, k in zip(trace.queries, trace.keys)]  # (H, T, hd) each
    trace_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q, k in qk:
        maps = attention_probs(q.unsqueeze(0), k.unsqueeze(0))[0]  # (H, T, T) float32
        assert maps.shape[-1] == prompt_tokens
        del maps
    maps_s = (time.perf_counter() - t0) / len(qk)
    qk_bytes = sum(q.nbytes + k.nbytes for q, k in qk)

    return {
        "dtype": dtype,
        "prompt_tokens": prompt_tokens,
        "threads": torch.get_num_threads(),
        "ttft_s": ttft,
        "trace_forward_s": trace_s,
        "one_layer_maps_s": maps_s,
        "queries_keys_bytes": qk_bytes,
        "rss_start_bytes": rss_start * 1024,
        "rss_model_bytes": rss_model * 1024,
        "peak_while_building_bytes": peak_after_build * 1024,
        "peak_bytes": _status_kb("VmHWM") * 1024 if reset else None,  # since the model was built
        "peak_process_bytes": max(peak_after_build, _status_kb("VmHWM")) * 1024,
    }


def measure_in_subprocess(
    dtype: str, prompt_tokens: int = 1024, threads: int | None = None, timeout: float = 600
) -> dict:
    cmd = [sys.executable, "-m", "bench.memory", "--dtype", dtype, "--prompt-tokens", str(prompt_tokens)]
    if threads:
        cmd += ["--threads", str(threads)]
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"bench.memory failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--prompt-tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    print(json.dumps(run(args.dtype, args.prompt_tokens)))


if __name__ == "__main__":
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    main()
