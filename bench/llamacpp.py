"""llama.cpp as a decode peer: the same random GPT-2 small weights, converted to f32, f16 and q8_0 GGUF by
llama.cpp's own ``convert_hf_to_gguf.py``, decoded greedily through ``llama-cpp-python``.

``llama-cpp-python`` has no binary wheel for this platform on PyPI: it compiles llama.cpp from source (about
15 minutes on 2 cores). Its source distribution carries the converter, which the installed package does not,
so the bench needs the unpacked sdist's ``vendor/llama.cpp`` folder too (``LLAMA_CPP_SRC``).

What each file holds: ``--outtype f32`` writes every tensor float32 (the converter's ALL_F32), ``f16`` every
matrix float16 and the norms and biases float32. The KV cache is llama.cpp's default, float16, in all three
(``type_k``/``type_v`` are not set here): llama.cpp f32 reads its keys and values at 16 bits where ours reads
float32 -- at the bench's mean position (~96) 3.5 MB a token against 7.1 MB, beside 498 MB of weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.3.36"
OUTTYPES = ("f32", "f16", "q8_0")  # one per precision class: 32-bit, 16-bit, 8-bit
SRC_ENV = "LLAMA_CPP_SRC"
INSTALL = (
    f'pip install cmake ninja && CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llama-cpp-python=={VERSION} '
    "(a source build, ~15 min on 2 cores)"
)
SRC_HOW = (
    f"pip download --no-deps --no-binary llama-cpp-python llama-cpp-python=={VERSION}, unpack it and set "
    f"{SRC_ENV}=<unpacked>/vendor/llama.cpp (its convert_hf_to_gguf.py writes the GGUF files)"
)


def converter(src: str | os.PathLike | None = None) -> Path | None:
    """llama.cpp's converter script under ``src`` (default: ``$LLAMA_CPP_SRC``), or None."""
    src = src if src is not None else os.environ.get(SRC_ENV)
    if not src:
        return None
    script = Path(src) / "convert_hf_to_gguf.py"
    return script if script.is_file() else None


def available(src: str | os.PathLike | None = None) -> str | None:
    """None if llama.cpp can be measured, else why not and how to install it."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return f"llama-cpp-python is not installed ({INSTALL})"
    if converter(src) is None:
        return f"llama.cpp's converter was not found ({SRC_HOW})"
    return None


def add_n_ctx(hf_dir: Path) -> None:
    """The GPT-2 converter reads ``n_ctx`` from config.json, which transformers 5 no longer writes."""
    path = Path(hf_dir) / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.setdefault("n_ctx", config["n_positions"])
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def convert_command(script: Path, hf_dir: Path, outtype: str, outfile: Path) -> list[str]:
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {OUTTYPES}, not {outtype!r}")
    return [sys.executable, str(script), str(hf_dir), "--outtype", outtype, "--outfile", str(outfile)]


def convert(hf_dir: Path, out_root: Path, src: str | os.PathLike | None = None) -> dict:
    """Convert the Hugging Face folder (model + tokenizer, see ``ct2.save_tokenizer``) once per GGUF type
    -> {outtype: path of its .gguf}."""
    script = converter(src)
    if script is None:
        raise FileNotFoundError(SRC_HOW)
    add_n_ctx(hf_dir)
    files = {}
    for outtype in OUTTYPES:
        out = Path(out_root) / f"gpt2-{outtype}.gguf"
        done = subprocess.run(convert_command(script, hf_dir, outtype, out), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"convert_hf_to_gguf.py --outtype {outtype} failed:\n{done.stderr[-2000:]}")
        files[outtype] = out
    return files


@contextlib.contextmanager
def _repacking(on: bool):
    """Models loaded inside with llama.cpp's weight repacking on (its default) or off (``--no-repack``: the
    weights stay in the CPU's own buffer, not in an AMX or other repacked copy). llama-cpp-python's ``Llama``
    takes no argument for it, so its default model parameters are changed for the load."""
    if on:
        yield
        return
    import llama_cpp.llama_cpp as low

    default = low.llama_model_default_params

    def without():
        params = default()
        params.use_extra_bufts = False
        return params

    low.llama_model_default_params = without
    try:
        yield
    finally:
        low.llama_model_default_params = default


def run_loaded(path: Path, threads: int, prompt: list[int], n_new: int, repack: bool = True):
    """Load the GGUF file, warm up, time one greedy generation and free the model -> (timestamps of the new
    tokens, their ids). Loaded per run like CTranslate2: a live model's OpenMP threads are not the other
    peers' business. ``repack=False``: llama.cpp's ``--no-repack``."""
    from llama_cpp import Llama

    with _repacking(repack):
        model = Llama(
            model_path=str(path),
            n_ctx=len(prompt) + n_new + 8,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=max(len(prompt), 8),
            verbose=False,
        )
    try:
        run(model, prompt, min(8, n_new))  # warm-up: its buffers and kernels
        model.reset()
        return run(model, prompt, n_new)
    finally:
        model.close()
        del model


def crashes(path: Path, threads: int, repack: bool = True) -> str | None:
    """Why the GGUF file at ``path`` cannot be timed here, or None: a few greedy tokens in a child process
    first, so that a peer that dies (llama.cpp's AMX kernels segfault on some Xeon machines,
    ggml-org/llama.cpp#20824) is left out with its reason instead of ending the whole benchmark."""
    code = (
        "import sys; from pathlib import Path; from bench.llamacpp import run_loaded; "
        f"run_loaded(Path(sys.argv[1]), {int(threads)}, list(range(100, 108)), 4, repack={bool(repack)})"
    )
    root = Path(__file__).resolve().parent.parent
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=root, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "four tokens took more than 300 s in a child process"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return f"it crashed ({name}) generating four tokens in a child process"
    return f"it failed generating four tokens in a child process: {done.stderr.decode(errors='replace')[-300:]}"


def run(model, prompt: list[int], n_new: int):
    """-> (timestamps of the new tokens, their ids): greedy (top-k 1, no repetition penalty)."""
    times, ids = [], []
    for token in model.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        times.append(time.perf_counter())
        ids.append(int(token))
        if len(ids) == n_new:
            break
    return times, ids
