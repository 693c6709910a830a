"""The bench's optional peers (llama.cpp, ONNX Runtime): the skip path with its install message, the conversion
helpers, and the exported KV-cache step against transformers -- none of it needs the peers installed."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import torch

from bench import checks, decode, llamacpp, onnx_peer


def test_llama_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp -> ImportError
    note = llamacpp.available()
    assert note is not None
    assert "pip install" in note and f"llama-cpp-python=={llamacpp.VERSION}" in note and "GGML_NATIVE" in note


def test_llama_without_converter_says_where_it_is(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "llama_cpp", types.ModuleType("llama_cpp"))
    monkeypatch.delenv(llamacpp.SRC_ENV, raising=False)
    note = llamacpp.available()
    assert note is not None and llamacpp.SRC_ENV in note and "--no-binary" in note
    monkeypatch.setenv(llamacpp.SRC_ENV, str(tmp_path))  # a folder without the script
    assert llamacpp.available() is not None
    (tmp_path / "convert_hf_to_gguf.py").write_text("")
    assert llamacpp.available() is None
    assert llamacpp.converter() == tmp_path / "convert_hf_to_gguf.py"


def test_a_llama_type_that_dies_is_left_out_with_its_reason(monkeypatch, tmp_path):
    """``llamacpp.crashes``: four tokens in a child process first; a signal, a failure or success said apart."""
    import subprocess

    runs = []

    def fake_run(args, **kw):
        runs.append(args)
        return subprocess.CompletedProcess(args, fake_run.code, b"", b"Traceback ... OSError: bad file")

    monkeypatch.setattr(llamacpp.subprocess, "run", fake_run)
    for code, want in ((-11, "crashed (SIGSEGV)"), (1, "OSError: bad file"), (0, None)):
        fake_run.code = code
        got = llamacpp.crashes(tmp_path / "gpt2-q8_0.gguf", 2)
        assert got == want if want is None else want in got
    assert runs[0][0] == sys.executable and runs[0][-1] == str(tmp_path / "gpt2-q8_0.gguf")


def test_a_llama_type_can_be_tried_without_repacked_weights(monkeypatch):
    """llama.cpp's ``--no-repack`` for a type whose repacked (AMX) weights die: ``crashes`` asks the child for
    it, and ``_repacking(False)`` loads with ``use_extra_bufts`` off, then puts llama-cpp-python's default back."""
    import subprocess
    import types

    runs = []
    monkeypatch.setattr(
        llamacpp.subprocess, "run", lambda args, **kw: runs.append(args) or subprocess.CompletedProcess(args, 0)
    )
    assert llamacpp.crashes(Path("gpt2-q8_0.gguf"), 2, repack=False) is None
    assert "repack=False" in runs[-1][2]
    assert llamacpp.crashes(Path("gpt2-q8_0.gguf"), 2) is None and "repack=True" in runs[-1][2]

    def default():
        return types.SimpleNamespace(use_extra_bufts=True, n_gpu_layers=0)

    low = types.SimpleNamespace(llama_model_default_params=default)
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(llama_cpp=low))
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_cpp", low)
    with llamacpp._repacking(False):
        assert low.llama_model_default_params().use_extra_bufts is False
    assert low.llama_model_default_params is default
    with llamacpp._repacking(True):
        assert low.llama_model_default_params().use_extra_bufts is True


def test_add_n_ctx_copies_n_positions_and_keeps_the_rest(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"n_positions": 77, "n_embd": 8}))
    llamacpp.add_n_ctx(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config == {"n_positions": 77, "n_embd": 8, "n_ctx": 77}


def test_convert_command_names_the_type_and_refuses_others(tmp_path):
    cmd = llamacpp.convert_command(tmp_path / "c.py", tmp_path / "hf", "q8_0", tmp_path / "o.gguf")
    assert cmd[0] == sys.executable and cmd[cmd.index("--outtype") + 1] == "q8_0"
    assert cmd[cmd.index("--outfile") + 1] == str(tmp_path / "o.gguf")
    with pytest.raises(ValueError, match="outtype"):
        llamacpp.convert_command(tmp_path / "c.py", tmp_path / "hf", "q4_0", tmp_path / "o.gguf")


def test_convert_without_converter_raises_with_the_steps(monkeypatch, tmp_path):
    monkeypatch.delenv(llamacpp.SRC_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=llamacpp.SRC_ENV):
        llamacpp.convert(tmp_path, tmp_path)


@pytest.mark.parametrize("module", ["onnxruntime", "onnx", "onnxscript"])
def test_onnx_missing_says_how_to_install(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)
    note = onnx_peer.available()
    assert note is not None and module in note and "pip install onnxruntime" in note


def test_skipped_peer_names_the_flag():
    assert decode.peer_note(False, "--skip-onnx", lambda: None) == "skipped (--skip-onnx)"
    assert decode.peer_note(True, "--skip-onnx", lambda: "missing") == "missing"


def _hf_tiny():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, n_positions=64, vocab_size=97, initializer_range=0.3, eos_token_id=None
    )
    return transformers.GPT2LMHeadModel(cfg).eval()


def test_kv_step_matches_transformers_with_and_without_cache():
    hf = _hf_tiny()
    step = onnx_peer.KVStep(hf)
    prompt = [5, 6, 7, 8, 9]
    with torch.no_grad():
        ref = hf.generate(
            torch.tensor([prompt]), max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0
        )[0, len(prompt) :].tolist()
        assert onnx_peer.greedy(step, prompt, 16) == ref
        assert len(set(ref)) > 2  # the tiny model does not just repeat one token
        seq = torch.tensor([prompt + ref])
        full = hf(seq).logits[0]
        past_k, past_v = step.empty_past()
        first, past_k, past_v = step(seq[:, :8], past_k, past_v)
        second, past_k, _ = step(seq[:, 8:9], past_k, past_v)
    torch.testing.assert_close(first[0], full[7], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(second[0], full[8], atol=1e-4, rtol=1e-4)
    assert past_k.shape == (2, 4, 9, 8)


def test_peer_tokens_check_says_where_each_peer_differs():
    ours = [1, 2, 3, 4]
    check = decode.peer_tokens_check(
        {"ours float32": ours, "ours int8": [1, 9, 9, 9], "llama.cpp f32": ours, "onnxruntime int8": [1, 2, 5, 4]}
    )
    assert set(check) == {"llama.cpp f32", "onnxruntime int8"}
    assert check["llama.cpp f32"] == {"identical": True, "first_divergence": None}
    assert check["onnxruntime int8"] == {"identical": False, "first_divergence": 2}


def test_precision_classes_put_each_peer_in_its_class():
    rates = {
        "ours float32": 30.0,
        "ours float32 + attention": 40.0,
        "llama.cpp f32": 50.0,
        "llama.cpp f16": 90.0,
        "llama.cpp q8_0": 140.0,
        "onnxruntime int8": 20.0,
        "ours bfloat16": 70.0,
    }
    best = checks.best_by_class(rates)
    assert best["float32"] == {"ours": ("ours float32", 30.0), "peer": ("llama.cpp f32", 50.0)}
    assert best["bfloat16"] == {"ours": ("ours bfloat16", 70.0), "peer": ("llama.cpp f16", 90.0)}
    assert best["int8"] == {"ours": None, "peer": ("llama.cpp q8_0", 140.0)}


def test_the_report_says_which_llama_type_ran_without_repacked_weights():
    from bench import report

    lines = report.class_lines(
        {
            "decode_tok_s": {},
            "peers": {
                "llama.cpp": {"note": None, "no_repack": {"q8_0": "with its weights repacked it crashed (SIGSEGV)"}},
                "onnxruntime": {"note": "skipped (--skip-onnx)"},
            },
        }
    )
    assert (
        "llama.cpp q8_0: timed with --no-repack (llama.cpp's weights left unrepacked): with its weights "
        in "\n".join(lines)
    )
    assert "onnxruntime: not measured: skipped (--skip-onnx)" in lines
    assert not any("llama.cpp: not measured" in x for x in lines)


def test_the_decode_loop_makes_a_room_in_a_process_of_its_own_each_time_it_is_told():
    """``LoopOnCue`` (``--with-loop``): the bundled model's room of two, on cue, twice."""
    from bench.room_floor import LoopOnCue

    loop = LoopOnCue("bundled", 2)
    try:
        walls = []
        for _ in range(2):
            loop.start()
            walls.append(loop.wall())
    finally:
        loop.close()
    assert all(0 < w < 60 for w in walls)
    assert loop.proc.poll() is not None
