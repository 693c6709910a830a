"""A GPT-2-small-shaped attention export: its size and its peak memory (the export's format is
checked on nano in tests/unit/test_files.py)."""

import threading
import time

import numpy as np
import psutil
import pytest
import torch

from playground.engine.attention import attention_probs
from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from playground.server.export_formats import json_attention_bytes
from playground.server.exports import export_run
from playground.server.recipes import random_recipe
from playground.server.runs import Run
from tests.export_helpers import private_dirs, strict_json


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    return private_dirs(tmp_path, monkeypatch)


class PeakRSS:
    def __init__(self):
        self.proc = psutil.Process()
        self.base = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.01)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak - self.base


@pytest.mark.slow
def test_a_1024_token_gpt2_small_shaped_run_exports_as_json_within_twice_its_size_in_memory():
    """12 layers × 12 heads × 1024 tokens, as GPT-2 small: a 756 MB file (it used to be 2.1 GB, 3
    minutes and +13 GB of RAM). A narrower model (d=192) keeps the forward cheap; the export is the
    same size."""
    cfg = PRESETS["gpt2-small"].replace(emb_dim=192)
    torch.manual_seed(0)
    model = GPTModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1024,), generator=torch.Generator().manual_seed(0)).tolist()
    run = Run(random_recipe(cfg, seed=0), ids, 0, {"seed": 0})
    watch = PeakRSS()
    path = export_run(run, model, "json")
    extra = watch.stop()
    size = path.stat().st_size
    L, H, T = 12, 12, 1024
    assert 0 < size - json_attention_bytes(L, H, T) < 100_000  # the rest is metadata: tokens, config
    assert extra <= 2 * size + 100e6, f"peak +{extra / 1e6:.0f} MB for a {size / 1e6:.0f} MB file"
    # Parsing 151 M numbers into Python would take GBs: check the frame, and two whole maps.
    raw = path.read_bytes()
    start = raw.index(b',"attention":[')
    meta = strict_json(raw[:start] + b"}")
    assert meta["token_ids"] == ids and raw.endswith(b"]]]]}")
    start += len(b',"attention":[')
    map_len = json_attention_bytes(1, 1, T) - 4  # one map without the layer's and the list's brackets
    layer_len = H * (map_len + 1) + 1
    with torch.no_grad():
        _, trace = model(torch.tensor([ids]), return_attention=True, last_token_only=True)
    for layer, head in [(0, 0), (11, 11)]:
        at = start + layer * (layer_len + 1) + 1 + head * (map_len + 1)
        m = np.array(strict_json(raw[at : at + map_len]))
        assert m.shape == (T, T) and np.allclose(m.sum(-1), 1, atol=2e-3)
        direct = attention_probs(trace.queries[layer], trace.keys[layer])[0, head].numpy()
        assert np.abs(m - direct).max() <= 5.01e-6
