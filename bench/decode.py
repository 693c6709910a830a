"""Decode tokens/s at batch 1 for GPT-2 small, with the same random weights in every peer.

The weights come from Hugging Face's own ``GPT2LMHeadModel`` initialisation, written with
``save_pretrained`` and read back by this project's ``load_pretrained`` -- so the peers compute
the same function and the import path is exercised on the way.
"""

from __future__ import annotations

import copy
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from playground.accel import accelerate, native_choice, native_decode
from playground.engine.hf_hub import load_pretrained
from playground.engine.quantize import model_bytes, quantize_int8
from playground.engine.sampling import generate
from playground.runtime import native_gemv

from . import ct2, llamacpp, onnx_peer
from .timing import copy_bandwidth, decode_rate, median, read_bandwidth, step_times

GPT2_EOT = 50256


def prompt_ids(n: int, seed: int = 0) -> list[int]:
    """``n`` token ids drawn uniformly from the GPT-2 vocabulary (no end-of-text), reproducibly."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, GPT2_EOT, (n,), generator=gen).tolist()


@dataclass
class Peers:
    ours: dict  # dtype name -> GPTModel ("int8": weight-only, bfloat16 activations; "int8-dynamic": int8 x int8)
    hf: dict  # dtype name -> GPT2LMHeadModel
    weight_bytes: dict  # dtype name -> bytes of one copy of the weights (tied head counted once)
    ct2: dict = field(default_factory=dict)  # compute type -> folder of its converted model
    ct2_threads: int = 1
    ct2_note: str | None = None  # why CTranslate2 is missing, if it is
    ct2_bytes: dict = field(default_factory=dict)  # compute type -> size of its converted model.bin
    seconds: dict = field(default_factory=dict)  # what building each peer took
    keep: object = None  # the temporary folder the converted CTranslate2 models live in
    gguf: dict = field(default_factory=dict)  # llama.cpp GGUF type -> its file
    llama_note: str | None = None  # why llama.cpp is missing, if it is
    onnx: dict = field(default_factory=dict)  # "float32" / "int8" -> its ONNX file
    onnx_note: str | None = None  # why ONNX Runtime is missing, if it is
    peer_bytes: dict = field(default_factory=dict)  # "llama.cpp f16", "onnxruntime int8", ... -> file size
    keep_peers: object = None  # the temporary folder of the GGUF and ONNX files
    no_repack: dict = field(default_factory=dict)  # GGUF type timed with llama.cpp's --no-repack -> why


PLAIN_KERNELS = "float32, plain kernels"  # ours float32 without the compiled one-row kernel


def peer_note(wanted: bool, flag: str, check) -> str | None:
    return check() if wanted else f"skipped ({flag})"


def build_peers(seed: int = 0, with_ct2: bool = True, with_llama: bool = True, with_onnx: bool = True) -> Peers:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    hf32 = GPT2LMHeadModel(GPT2Config()).eval()
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="bench-gpt2-") as folder:
        hf_dir = Path(folder) / "hf"
        hf32.save_pretrained(hf_dir)  # config.json + model.safetensors, the hub layout
        ours = {}
        for dt in ("float32", "bfloat16"):
            t0 = time.perf_counter()
            ours[dt] = accelerate(load_pretrained(hf_dir, dtype=dt, device="cpu"))  # measures its kernels
            seconds[f"ours {dt} (load + kernel measurements)"] = time.perf_counter() - t0
        if native_gemv.status().available:  # the same weights on the plain products, for the same-run ratio
            plain = load_pretrained(hf_dir, dtype="float32", device="cpu")
            ours[PLAIN_KERNELS] = accelerate(plain, compiled_kernel=False)
        t0 = time.perf_counter()
        ours["int8"] = accelerate(quantize_int8(load_pretrained(hf_dir, dtype="bfloat16", device="cpu")))
        seconds["ours int8 (load + quantize + kernel measurements)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        dynamic = quantize_int8(load_pretrained(hf_dir, dtype="float32", device="cpu"), "float32", dynamic=True)
        ours["int8-dynamic"] = accelerate(dynamic)
        seconds["ours int8-dynamic (load + quantize + kernel measurements)"] = time.perf_counter() - t0
        gens, note, sizes, keep = {}, ct2.available() if with_ct2 else "skipped (--skip-ct2)", {}, None
        if note is None:
            t0 = time.perf_counter()
            keep = tempfile.TemporaryDirectory(prefix="bench-ct2-")  # lives as long as the Peers
            gens = ct2.convert(hf_dir, Path(keep.name))
            sizes = {ct: (path / "model.bin").stat().st_size for ct, path in gens.items()}
            seconds["ctranslate2 (convert float32 + int8)"] = time.perf_counter() - t0
        llama_note = peer_note(with_llama, "--skip-llama", llamacpp.available)
        onnx_note = peer_note(with_onnx, "--skip-onnx", onnx_peer.available)
        gguf, onnx, peer_bytes, no_repack = {}, {}, {}, {}
        keep_peers = (
            tempfile.TemporaryDirectory(prefix="bench-peers-") if llama_note is None or onnx_note is None else None
        )
        if llama_note is None:
            t0 = time.perf_counter()
            if note is not None:  # CTranslate2 did not save the tokenizer the converter reads
                ct2.save_tokenizer(hf_dir)
            try:
                gguf = llamacpp.convert(hf_dir, Path(keep_peers.name))
                peer_bytes.update({f"llama.cpp {t}": f.stat().st_size for t, f in gguf.items()})
                seconds["llama.cpp (convert f32 + f16 + q8_0)"] = time.perf_counter() - t0
            except (RuntimeError, OSError) as e:
                llama_note = f"conversion failed: {e}"
            # a type that dies on this machine runs without llama.cpp's repacked weights (its AMX copy dies
            # on some Xeon machines), or, dying so too, is left out; either is said, and the other peers still run
            threads = torch.get_num_threads()
            for t, why in [(t, llamacpp.crashes(f, threads)) for t, f in gguf.items()]:
                if why is None:
                    continue
                if llamacpp.crashes(gguf[t], threads, repack=False) is None:
                    no_repack[t] = f"with its weights repacked {why}"
                else:
                    del gguf[t]
                    peer_bytes.pop(f"llama.cpp {t}", None)
                    llama_note = "; ".join(x for x in (llama_note, f"{t}: {why}") if x)
        if onnx_note is None:
            t0 = time.perf_counter()
            try:
                onnx = onnx_peer.export(hf32, Path(keep_peers.name))
                peer_bytes.update({f"onnxruntime {p}": f.stat().st_size for p, f in onnx.items()})
                seconds["onnxruntime (export float32 + quantize int8)"] = time.perf_counter() - t0
            except Exception as e:  # an exporter that cannot handle this torch: the other peers still run
                onnx_note = f"export failed: {type(e).__name__}: {e}"
    hf = {"float32": hf32, "bfloat16": copy.deepcopy(hf32).to(torch.bfloat16)}
    n_params = sum(p.numel() for p in ours["float32"].parameters())  # parameters() skips the tied copy
    weight_bytes = {"float32": 4 * n_params, "bfloat16": 2 * n_params, "int8": model_bytes(ours["int8"])}
    # (int8-dynamic keeps its norms and biases in float32: a few hundred KB more than int8's, same matrices)
    return Peers(
        ours,
        hf,
        weight_bytes,
        gens,
        torch.get_num_threads(),
        note,
        sizes,
        seconds,
        keep,
        gguf,
        llama_note,
        onnx,
        onnx_note,
        peer_bytes,
        keep_peers,
        no_repack,
    )


# ----------------------------------------------------------------------------------------------
# One generation of each kind -> (timestamps of the new tokens, their ids)


def run_ours(model, prompt: list[int], n_new: int, capture: bool = False):
    times, tokens = [], []
    for step in generate(model, prompt, max_new_tokens=n_new, temperature=0, capture_attention=capture):
        times.append(time.perf_counter())
        tokens.append(step.token_id)
    return times, tokens


def run_hf(model, prompt: list[int], n_new: int):
    from transformers.generation.streamers import BaseStreamer

    class Clock(BaseStreamer):
        """generate() pushes the prompt first, then each new token as soon as it is chosen."""

        def __init__(self):
            self.seen_prompt, self.times = False, []

        def put(self, value):
            if self.seen_prompt:
                self.times.append(time.perf_counter())
            self.seen_prompt = True

        def end(self):
            pass

    ids = torch.tensor([prompt])
    clock = Clock()
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n_new,
            min_new_tokens=n_new,
            do_sample=False,
            pad_token_id=GPT2_EOT,
            streamer=clock,
        )
    return clock.times, out[0, len(prompt) :].tolist()


_CT2_VOCAB: tuple | None = None


def run_ct2(folder, compute_type: str, threads: int, prompt: list[int], n_new: int):
    global _CT2_VOCAB
    if _CT2_VOCAB is None:
        tokens = ct2.id_to_token()
        _CT2_VOCAB = (tokens, {t: i for i, t in enumerate(tokens)})
    tokens, vocab = _CT2_VOCAB
    return ct2.run_loaded(folder, compute_type, threads, [tokens[i] for i in prompt], n_new, vocab)


def run_rerun(model, prompt: list[int], n_new: int):
    """The tutorial loop (generate_text_simple): the whole sequence through the model, full logits,
    for every new token -- no KV cache."""
    idx = torch.tensor([prompt])
    context = model.cfg.context_length
    times = []
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(idx[:, -context:])[:, -1, :]  # (1, vocab_size)
            next_id = torch.argmax(logits, dim=-1, keepdim=True)  # (1, 1)
            idx = torch.cat([idx, next_id], dim=1)
            times.append(time.perf_counter())
    return times, idx[0, len(prompt) :].tolist()


def decode_path(model) -> str:
    """How ``model``'s generation steps run: "native step" (each token in one compiled call,
    accel.native_decode) or "torch forward" (the model's forward, op by op)."""
    return "native step" if native_decode.uses_native_step(model) else "torch forward"


def step_products(model):
    """A function running every matrix product one decode step of ``model`` makes, each on one row
    and through the model's own modules (so on the kernels and layouts its decode uses): each
    block's Q/K/V, attention output and two MLP products, then the output head. A model on the
    native step runs them as its step does: in the step's own compiled region, products only."""
    alone = native_choice.products_alone(model)
    if alone is not None:
        return alone
    d = model.cfg.emb_dim
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, d, generator=gen).to(model.dtype)
    blocks = list(model.trf_blocks)
    h = torch.randn(1, 1, blocks[0].ff.layers[2].in_features, generator=gen).to(model.dtype)

    def run():
        with torch.no_grad():
            for block in blocks:
                block.att.project_qkv(x)
                block.att.out_proj(x)
                block.ff.layers[0](x)
                block.ff.layers[2](h)
            model.out_head(x)

    return run


def products_seconds(run, reps: int = 5) -> float:
    """Median seconds of one pass of ``step_products``' function (after one warm-up pass)."""
    run()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return median(times)


# ----------------------------------------------------------------------------------------------


@dataclass
class DecodeResult:
    rates: dict[str, list[float]] = field(default_factory=dict)  # variant -> tok/s of each rep
    steps: dict[str, list[float]] = field(default_factory=dict)  # variant -> every step's seconds
    tokens: dict[str, list[int]] = field(default_factory=dict)  # variant -> greedy ids (last rep)
    copy_bw: list[float] = field(default_factory=list)  # bytes/s, measured once a round
    read_bw: list[float] = field(default_factory=list)
    products: dict[str, list[float]] = field(default_factory=dict)  # variant -> seconds of its step's products alone

    def medians(self) -> dict[str, float]:
        return {name: median(r) for name, r in self.rates.items()}

    def step_medians(self) -> dict[str, float]:
        """1 / the median time between two tokens over all rounds: on a shared CPU, bursts of other
        work slow some steps 2x; this figure shows the speed of the undisturbed steps."""
        return {name: 1 / median(s) for name, s in self.steps.items()}

    def outside_products(self) -> dict[str, dict[str, float]]:
        """Per variant of ours: the median step, its matrix products timed alone (right after the
        variant's run, in every round) and the difference -- the time a step spends outside the
        products (attention, norms, the sampler, Python, threads waking), in milliseconds."""
        out = {}
        for name, seconds in self.products.items():
            step, products = median(self.steps[name]), median(seconds)
            out[name] = {"step_ms": 1e3 * step, "products_ms": 1e3 * products, "outside_ms": 1e3 * (step - products)}
        return out


def measure_decode(peers: Peers, prompt: list[int], n_new: int, reps: int, log=print) -> DecodeResult:
    """Every variant once per round, rounds repeated: a burst of load from other processes then
    hits all peers alike instead of one of them."""
    ours, hf = peers.ours, peers.hf
    variants = {
        "ours float32": lambda: run_ours(ours["float32"], prompt, n_new),
        **(
            {f"ours {PLAIN_KERNELS}": lambda: run_ours(ours[PLAIN_KERNELS], prompt, n_new)}
            if PLAIN_KERNELS in ours
            else {}
        ),
        "ours float32 + attention": lambda: run_ours(ours["float32"], prompt, n_new, capture=True),
        "ours bfloat16": lambda: run_ours(ours["bfloat16"], prompt, n_new),
        "ours bfloat16 + attention": lambda: run_ours(ours["bfloat16"], prompt, n_new, capture=True),
        "ours int8": lambda: run_ours(ours["int8"], prompt, n_new),
        "ours int8 + attention": lambda: run_ours(ours["int8"], prompt, n_new, capture=True),
        "ours int8-dynamic": lambda: run_ours(ours["int8-dynamic"], prompt, n_new),
        "transformers float32": lambda: run_hf(hf["float32"], prompt, n_new),
        "transformers bfloat16": lambda: run_hf(hf["bfloat16"], prompt, n_new),
        "re-run loop float32": lambda: run_rerun(ours["float32"], prompt, n_new),
    }
    for ct, folder in peers.ct2.items():  # loaded for each run and freed after it (see ct2.run_loaded)
        variants[f"ctranslate2 {ct}"] = (lambda f, c: lambda: run_ct2(f, c, peers.ct2_threads, prompt, n_new))(
            folder, ct
        )
    threads = peers.ct2_threads
    for t, path in peers.gguf.items():  # loaded for each run and freed after it, like CTranslate2
        repack = t not in peers.no_repack
        variants[f"llama.cpp {t}"] = (lambda f, r: lambda: llamacpp.run_loaded(f, threads, prompt, n_new, repack=r))(
            path, repack
        )
    cfg = ours["float32"].cfg
    shape = (cfg.n_layers, cfg.n_heads, cfg.emb_dim // cfg.n_heads)
    for p, path in peers.onnx.items():
        variants[f"onnxruntime {p}"] = (lambda f: lambda: onnx_peer.run_loaded(f, threads, prompt, n_new, shape))(path)
    for name, fn in variants.items():  # warm-up: allocator, oneDNN/MKL kernels, caches
        if name.startswith("re-run"):
            run_rerun(ours["float32"], prompt, 4)
        else:
            fn()
    products = {
        f"ours {k}": step_products(m) for k, m in ours.items()
    }  # variants with attention capture: same products
    result = DecodeResult()
    for rep in range(reps):
        # The bandwidth of a shared (virtual) machine drifts with its neighbours' load: measure it in
        # every round, next to the decoding it is the limit of.
        result.copy_bw.append(copy_bandwidth(reps=3))
        result.read_bw.append(read_bandwidth(reps=3))
        for name, fn in variants.items():
            times, tokens = fn()
            result.rates.setdefault(name, []).append(decode_rate(times))
            result.steps.setdefault(name, []).extend(step_times(times))
            result.tokens[name] = tokens
            if name in products:
                result.products.setdefault(name, []).append(products_seconds(products[name]))
        log(
            f"  round {rep + 1}/{reps}: copy {result.copy_bw[-1] / 1e9:.1f} GB/s, "
            + ", ".join(f"{n} {r[-1]:.1f}" for n, r in result.rates.items())
        )
    return result


# ----------------------------------------------------------------------------------------------
# bfloat16 vs float32 greedy choices


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, None if the sequences agree everywhere."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def teacher_forced_agreement(model_a, model_b, prompt: list[int], continuation: list[int]) -> float:
    """Fraction of positions where both models' argmax agree when both read the same sequence
    (the prompt and ``continuation``): free-running greedy decoding diverges at the first
    disagreement, this counts every position."""
    seq = torch.tensor([prompt + continuation])
    with torch.no_grad():
        la = _logits(model_a, seq)[0, len(prompt) - 1 : -1].float()  # (n, vocab)
        lb = _logits(model_b, seq)[0, len(prompt) - 1 : -1].float()
    return float((la.argmax(-1) == lb.argmax(-1)).float().mean())


def _logits(model, seq):
    out = model(seq)
    return out.logits if hasattr(out, "logits") else out


def mean_kl(model_a, model_b, prompt: list[int], continuation: list[int]) -> float:
    """Mean over the continuation's positions of KL(p_a || p_b), in nats, both reading the same tokens."""
    seq = torch.tensor([prompt + continuation])
    with torch.no_grad():
        la = _logits(model_a, seq)[0, len(prompt) - 1 : -1].float().log_softmax(-1)
        lb = _logits(model_b, seq)[0, len(prompt) - 1 : -1].float().log_softmax(-1)
    return float((la.exp() * (la - lb)).sum(-1).mean())


def agreement_report(name: str, model32, model16, prompt, tokens32, tokens16, precision: str = "bfloat16") -> dict:
    return {
        "model": name,
        "precision": precision,
        "greedy_tokens": len(tokens32),
        "identical": tokens32 == tokens16,
        "first_divergence": first_divergence(tokens32, tokens16),
        "teacher_forced_agreement": teacher_forced_agreement(model32, model16, prompt, tokens32),
        "mean_kl_nats": mean_kl(model32, model16, prompt, tokens32),
    }


PEER_PREFIXES = ("transformers", "ctranslate2", "llama.cpp", "onnxruntime")


def peer_tokens_check(tokens: dict[str, list[int]], reference: str = "ours float32") -> dict[str, dict]:
    """Each peer's greedy tokens against ours in float32: identical, or the index of the first difference
    (a float32 peer should agree everywhere; a 16- or 8-bit one may drift)."""
    ref = tokens[reference]
    return {
        name: {"identical": ids == ref, "first_divergence": first_divergence(ref, ids)}
        for name, ids in tokens.items()
        if name.startswith(PEER_PREFIXES)
    }
