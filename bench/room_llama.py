"""llama.cpp's own server as the room benchmark's peer: ``llama-server`` with continuous batching
(``-cb -np N``), the same weights as an f32 GGUF, N streaming clients on ``/completion``.

Where things are (``CACHE``, default ``~/.cache/gpt-playground/llama-server``, or ``$LLAMA_SERVER_CACHE``):

- ``build/bin/llama-server``: built once from the llama-cpp-python sdist's vendored llama.cpp
  (``VERSION`` of bench/llamacpp.py; fetched from PyPI's simple index, its sha256 checked; cmake builds only the server
  target: about 20 minutes on 2 cores). ``$LLAMA_SERVER`` names another binary instead.
- ``gguf/<model>-f32.gguf``: the bench's weights converted by llama.cpp's ``convert_hf_to_gguf.py``
  (``--outtype f32``) -- GPT-2 small's random init (seed 0, the same generator and order the app
  builds it with) and the bundled model's checkpoint.

Every client asks for the same prompt tokens as the app's learners, 64 tokens with ``ignore_eos``,
and the app's default sampling (temperature 0.8, top-k 40, top-p 1, every other sampler off; seed
42 + learner), ``cache_prompt`` off so that each request evaluates its prompt as the app does.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.request
from pathlib import Path

from .llamacpp import VERSION, add_n_ctx, convert_command
from .room_learners import learners_at_once
from .serving import free_port, stop_process

CACHE = Path(os.environ.get("LLAMA_SERVER_CACHE", Path.home() / ".cache" / "gpt-playground" / "llama-server"))
BINARY_ENV = "LLAMA_SERVER"
SDIST = f"llama_cpp_python-{VERSION}"
SIMPLE_INDEX = "https://pypi.org/simple/llama-cpp-python/"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
BUILD_TIMEOUT_S = 3600.0


def source_dir(cache: Path = CACHE) -> Path:
    return cache / SDIST / "vendor" / "llama.cpp"


def find_binary(cache: Path = CACHE) -> Path | None:
    """``$LLAMA_SERVER`` if set, else the cached build, else None."""
    named = os.environ.get(BINARY_ENV)
    if named:
        return Path(named) if Path(named).is_file() else None
    built = cache / "build" / "bin" / "llama-server"
    return built if built.is_file() else None


def build_commands(src: Path, build: Path, jobs: int = 2) -> list[list[str]]:
    """The two cmake calls: configure (Ninja if there is one), then only the llama-server target."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    return [
        ["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_FLAGS],
        ["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
    ]


def sdist_entry(index: dict, filename: str) -> dict:
    """The file ``filename`` of a PEP 691 project page (its ``url`` and ``hashes``)."""
    for entry in index.get("files", []):
        if entry.get("filename") == filename:
            return entry
    raise LookupError(f"{filename} is not on the index")


def fetch_sdist(archive: Path, index_url: str | None = None, timeout: float = 900.0) -> None:
    """The release's sdist, straight from the package index's project page (PEP 691 JSON), its sha256
    checked. (``pip download`` of an sdist prepares its metadata, and with ``--no-binary :all:`` builds its
    build requirements too: cmake from source, still bootstrapping after 8 minutes on 2 cores.)"""
    req = urllib.request.Request(index_url or SIMPLE_INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        entry = sdist_entry(json.load(r), archive.name)
    want = entry.get("hashes", {}).get("sha256")
    if not want:
        raise LookupError(f"the index gives no sha256 for {archive.name}")
    part = archive.with_name(archive.name + ".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(entry["url"], timeout=timeout) as r, open(part, "wb") as out:
        while chunk := r.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != want:
        part.unlink(missing_ok=True)
        raise ValueError(f"{archive.name}: sha256 {digest.hexdigest()} is not the index's {want}")
    part.replace(archive)


def build(cache: Path = CACHE, log=print) -> tuple[Path | None, str]:
    """Fetch the sdist (``fetch_sdist``), unpack it and build llama-server -> (binary or None, note)."""
    cache.mkdir(parents=True, exist_ok=True)
    if shutil.which("cmake") is None:
        return None, "cmake is not installed (pip install cmake ninja)"
    src = source_dir(cache)
    if not src.is_dir():
        archive = cache / f"{SDIST}.tar.gz"
        if not archive.is_file():
            log(f"  llama-cpp-python=={VERSION} (sdist) from {SIMPLE_INDEX} ...")
            try:
                fetch_sdist(archive)
            except Exception as e:
                return None, f"fetching the sdist failed: {e}"
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
    t0 = time.perf_counter()
    with open(cache / "build.log", "w") as out:
        for cmd in build_commands(src, cache / "build"):
            log("  " + " ".join(cmd))
            left = BUILD_TIMEOUT_S - (time.perf_counter() - t0)
            try:
                done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=max(left, 1))
            except subprocess.TimeoutExpired:
                return None, f"the build took longer than {BUILD_TIMEOUT_S:.0f} s (log: {cache / 'build.log'})"
            if done.returncode != 0:
                return None, f"the build failed (log: {cache / 'build.log'})"
    seconds = time.perf_counter() - t0
    (cache / "build-seconds.txt").write_text(f"{seconds:.0f}\n")
    binary = find_binary(cache)
    return binary, f"built in {seconds / 60:.1f} min" if binary else "the build made no llama-server"


def hf_folder(model: str, out: Path) -> Path:
    """The model's weights as a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer)."""
    import torch

    from bench.ct2 import save_tokenizer
    from playground.engine.hf_gpt2 import gpt2_config_dict
    from playground.engine.model import GPTModel
    from playground.engine.presets import PRESETS
    from playground.engine.weights import save_checkpoint
    from playground.server.recipes import BUNDLED_CHECKPOINT

    out.mkdir(parents=True, exist_ok=True)
    if model == "bundled":
        shutil.copy(BUNDLED_CHECKPOINT.parent / "config.json", out / "config.json")
        shutil.copy(BUNDLED_CHECKPOINT, out / "model.safetensors")
    elif model == "gpt2-small":
        cfg = PRESETS["gpt2-small"]
        # as playground.server.recipes builds random_recipe(cfg, seed=0): its own generator, float32
        net = GPTModel(cfg, generator=torch.Generator().manual_seed(0)).float().eval()
        save_checkpoint(net, out / "model.safetensors", layout="gpt2")
        (out / "config.json").write_text(json.dumps(gpt2_config_dict(cfg), indent=2), encoding="utf-8")
    else:
        raise ValueError(f"no GGUF recipe for {model!r}")
    add_n_ctx(out)
    save_tokenizer(out)
    return out


def gguf(model: str, cache: Path = CACHE) -> Path:
    """``gguf/<model>-f32.gguf`` in the cache, converted once."""
    path = cache / "gguf" / f"{model}-f32.gguf"
    if path.is_file():
        return path
    script = source_dir(cache) / "convert_hf_to_gguf.py"
    src_env = os.environ.get("LLAMA_CPP_SRC")
    if not script.is_file() and src_env:
        script = Path(src_env) / "convert_hf_to_gguf.py"
    if not script.is_file():
        raise FileNotFoundError(f"no convert_hf_to_gguf.py under {source_dir(cache)} nor $LLAMA_CPP_SRC")
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="room-gguf-") as tmp:
        folder = hf_folder(model, Path(tmp) / model)
        tmp_out = path.with_name(path.name + ".tmp")
        done = subprocess.run(
            convert_command(script, folder, "f32", tmp_out), capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            raise RuntimeError(f"convert_hf_to_gguf.py failed:\n{done.stderr[-1500:]}")
        os.replace(tmp_out, path)
    return path


def server_command(binary, model_path, n: int, ctx: int, port: int, threads: int = 2, extra_args=()) -> list[str]:
    """llama-server on loopback: N slots sharing an N × ctx KV cache, continuous batching, ``threads``
    threads for both decoding and prompt batches; ``extra_args`` last (e.g. ``-lm none``: weights
    read into memory instead of llama.cpp's default memory map)."""
    return [
        str(binary),
        "-m",
        str(model_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        str(n),
        "-c",
        str(n * ctx),
        "-cb",
        "-t",
        str(threads),
        "-tb",
        str(threads),
        *extra_args,
    ]


def completion_body(prompt_ids: list[int], n_predict: int, seed: int) -> dict:
    """The app's default sampling, every other llama.cpp sampler switched off."""
    return {
        "prompt": list(prompt_ids),
        "n_predict": n_predict,
        "stream": True,
        "ignore_eos": True,
        "cache_prompt": False,
        "temperature": 0.8,
        "top_k": 40,
        "top_p": 1.0,
        "min_p": 0.0,
        "typical_p": 1.0,
        "repeat_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "dry_multiplier": 0.0,
        "xtc_probability": 0.0,
        "mirostat": 0,
        "seed": seed,
        "samplers": ["top_k", "top_p", "temperature"],
        "return_tokens": True,
    }


class Server:
    """One llama-server process; ``close()`` ends that process only."""

    def __init__(
        self, binary, model_path, n: int, ctx: int, log_path: Path | None = None, timeout: float = 120.0, extra_args=()
    ):
        self.port = free_port()
        self.cmd = server_command(binary, model_path, n, ctx, self.port, extra_args=extra_args)
        self._log = open(log_path or os.devnull, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                self._log.close()
                raise RuntimeError(f"llama-server exited with code {self.proc.returncode}")
            if self._health():
                return
            time.sleep(0.1)
        self.close()
        raise TimeoutError(f"llama-server was not ready within {timeout:.0f} s")

    def _health(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            conn.request("GET", "/health")
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False

    def close(self) -> None:
        stop_process(self.proc)
        if not self._log.closed:
            self._log.close()


def stream_one(port: int, body: dict, barrier: threading.Barrier | None, timeout: float) -> dict:
    """One streaming /completion -> {start, first, end, tokens} (epoch seconds) or {error}."""
    try:
        if barrier is not None:
            barrier.wait(timeout=timeout)
        start = time.time()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"error": f"HTTP {resp.status}: {resp.read()[:200]!r}"}
        first, tokens, predicted, deadline = None, 0, None, start + timeout
        for _ in range(100_000):  # bounded: n_predict events and a final one
            line = resp.readline()
            if not line or time.time() > deadline:
                break
            if not line.startswith(b"data: "):
                continue
            event = json.loads(line[6:])
            n = len(event.get("tokens") or []) or (1 if event.get("content") else 0)
            if n and not event.get("stop"):
                tokens += n
                first = first or time.time()
            if event.get("stop"):
                predicted = (event.get("timings") or {}).get("predicted_n")
                break
        end = time.time()
        conn.close()
        if predicted is None:
            return {"error": "the stream ended without its final event", "start": start}
        return {"start": start, "first": first, "end": end, "tokens": predicted or tokens}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def run_round(port: int, prompt_ids, n: int, n_predict: int, timeout: float) -> list[dict]:
    """N clients at once (a barrier), learner i with seed 42 + i."""
    out: list[dict] = [{"error": "never finished"}] * n
    barrier = threading.Barrier(n)

    def client(i):
        out[i] = stream_one(port, completion_body(prompt_ids, n_predict, 42 + i), barrier, timeout)

    learners_at_once(client, n, timeout + 30)
    return out
