"""ONNX Runtime as a decode peer: the same random GPT-2 small weights exported with ``torch.onnx`` as one
decoding step with a KV cache, run by the CPU execution provider in float32 and after ONNX Runtime's
dynamic int8 quantization (``quantize_dynamic``: int8 weights, activations quantized at run time).

The exported graph is ``KVStep`` below: GPT-2's forward written in plain tensor operations over the Hugging
Face state dict, taking the past keys and values as inputs and returning them grown by the new tokens, so
ONNX Runtime decodes one token per call without re-reading the prompt.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

PRECISIONS = ("float32", "int8")
INSTALL = "pip install onnxruntime onnx onnxscript (CPU wheels, seconds)"


def available() -> str | None:
    """None if ONNX Runtime can be measured (and the model exported), else why not and how to install it."""
    for module in ("onnxruntime", "onnx", "onnxscript"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed ({INSTALL})"
    return None


class KVStep(nn.Module):
    """GPT-2 (Hugging Face's ``GPT2LMHeadModel`` weights) as one call: new token ids and the past keys and
    values (n_layer, n_head, past, head_dim) -> the last position's logits and the keys and values grown by
    the new tokens. Batch 1."""

    def __init__(self, hf_model):
        super().__init__()
        cfg = hf_model.config
        self.n_layer, self.n_head, self.eps = cfg.n_layer, cfg.n_head, cfg.layer_norm_epsilon
        sd = {k: v.detach().float() for k, v in hf_model.state_dict().items()}
        prefix = "transformer."
        self.wte = nn.Parameter(sd[prefix + "wte.weight"], requires_grad=False)
        # The head as its own (d, V) matrix: a MatMul with a constant right side is what ONNX Runtime's dynamic
        # quantization turns into int8 (a transposed tied embedding would stay float32).
        self.head = nn.Parameter(sd[prefix + "wte.weight"].t().contiguous(), requires_grad=False)
        self.wpe = nn.Parameter(sd[prefix + "wpe.weight"], requires_grad=False)
        self.params = nn.ParameterDict(
            {
                k[len(prefix) :].replace(".", "_"): nn.Parameter(v, requires_grad=False)
                for k, v in sd.items()
                if k.startswith(prefix + "h.") and not k.endswith(".attn.bias") and not k.endswith("masked_bias")
            }
        )
        self.lnf_w = nn.Parameter(sd[prefix + "ln_f.weight"], requires_grad=False)
        self.lnf_b = nn.Parameter(sd[prefix + "ln_f.bias"], requires_grad=False)

    def _p(self, i: int, name: str) -> torch.Tensor:
        return self.params[f"h_{i}_{name.replace('.', '_')}"]

    def forward(self, ids: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor):
        # ids (1, T) int64; past_k / past_v (n_layer, n_head, P, head_dim)
        T, P = ids.shape[1], past_k.shape[2]
        pos = torch.arange(T) + P
        x = self.wte[ids[0]] + self.wpe[pos]  # (T, d)
        d = x.shape[-1]
        hd = d // self.n_head
        keys = torch.arange(P + T)
        mask = keys[None, :] <= pos[:, None]  # (T, P + T): each new token sees the past and itself
        new_k, new_v = [], []
        for i in range(self.n_layer):
            h = F.layer_norm(x, (d,), self._p(i, "ln_1.weight"), self._p(i, "ln_1.bias"), self.eps)
            qkv = h @ self._p(i, "attn.c_attn.weight") + self._p(i, "attn.c_attn.bias")  # Conv1D: (in, out)
            q, k, v = qkv.split(d, dim=-1)
            q, k, v = (t.reshape(T, self.n_head, hd).transpose(0, 1) for t in (q, k, v))  # (H, T, hd)
            k = torch.cat([past_k[i], k], dim=1)
            v = torch.cat([past_v[i], v], dim=1)
            new_k.append(k)
            new_v.append(v)
            scores = (q @ k.transpose(1, 2)) / math.sqrt(hd)
            scores = scores.masked_fill(~mask, float("-inf"))
            a = (scores.softmax(-1) @ v).transpose(0, 1).reshape(T, d)
            x = x + a @ self._p(i, "attn.c_proj.weight") + self._p(i, "attn.c_proj.bias")
            h = F.layer_norm(x, (d,), self._p(i, "ln_2.weight"), self._p(i, "ln_2.bias"), self.eps)
            h = F.gelu(h @ self._p(i, "mlp.c_fc.weight") + self._p(i, "mlp.c_fc.bias"), approximate="tanh")
            x = x + h @ self._p(i, "mlp.c_proj.weight") + self._p(i, "mlp.c_proj.bias")
        last = F.layer_norm(x[-1:], (d,), self.lnf_w, self.lnf_b, self.eps)
        return last @ self.head, torch.stack(new_k), torch.stack(new_v)

    def empty_past(self) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.wte.shape[1]
        shape = (self.n_layer, self.n_head, 0, d // self.n_head)
        return torch.zeros(shape), torch.zeros(shape)


def greedy(step, prompt: list[int], n_new: int) -> list[int]:
    """Greedy decoding through any ``step(ids, past_k, past_v)`` -> ids (the reference for the export)."""
    past_k, past_v = step.empty_past()
    ids, out = torch.tensor([prompt]), []
    with torch.no_grad():
        for _ in range(n_new):
            logits, past_k, past_v = step(ids, past_k, past_v)
            out.append(int(logits[0].argmax()))
            ids = torch.tensor([[out[-1]]])
    return out


def export(hf_model, out_root: Path) -> dict:
    """Export the float32 step and quantize it -> {"float32": path, "int8": path}."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    step = KVStep(hf_model).eval()
    past_k, past_v = step.empty_past()
    past_k, past_v = (
        torch.zeros(*past_k.shape[:2], 3, past_k.shape[3]),
        torch.zeros(*past_v.shape[:2], 3, past_v.shape[3]),
    )
    paths = {p: Path(out_root) / f"gpt2-{p}.onnx" for p in PRECISIONS}
    T, P = torch.export.Dim("T", min=1, max=1024), torch.export.Dim("P", min=0, max=1024)
    with torch.no_grad():
        torch.onnx.export(
            step,
            (torch.tensor([[1, 2]]), past_k, past_v),
            str(paths["float32"]),
            input_names=["ids", "past_k", "past_v"],
            output_names=["logits", "k", "v"],
            dynamic_shapes={"ids": {1: T}, "past_k": {2: P}, "past_v": {2: P}},
            dynamo=True,
            external_data=False,
            verbose=False,
        )
    quantize_dynamic(str(paths["float32"]), str(paths["int8"]), weight_type=QuantType.QInt8)
    return paths


def session(path: Path, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def run_loaded(path: Path, threads: int, prompt: list[int], n_new: int, shape: tuple[int, int, int]):
    """Open a session, warm up, time one greedy generation and free it -> (timestamps of the new tokens, their
    ids). ``shape``: (n_layer, n_head, head_dim) of the past keys and values."""
    sess = session(path, threads)
    try:
        run(sess, prompt, min(8, n_new), shape)
        return run(sess, prompt, n_new, shape)
    finally:
        del sess


def run(sess, prompt: list[int], n_new: int, shape: tuple[int, int, int]):
    import numpy as np

    n_layer, n_head, hd = shape
    past_k = np.zeros((n_layer, n_head, 0, hd), np.float32)
    past_v = past_k
    ids = np.array([prompt], np.int64)
    times, out = [], []
    for _ in range(n_new):
        logits, past_k, past_v = sess.run(None, {"ids": ids, "past_k": past_k, "past_v": past_v})
        out.append(int(logits[0].argmax()))
        times.append(time.perf_counter())
        ids = np.array([[out[-1]]], np.int64)
    return times, out
