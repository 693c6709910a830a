"""Training loop, schedule, checkpoints and resume, baselines, and the corpus loaders (no network)."""

from __future__ import annotations

import hashlib
import json
import math
import urllib.error

import pytest
import torch
from safetensors import safe_open

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.presets import PRESETS
from playground.engine.weights import load_checkpoint, read_checkpoint_metadata
from playground.training import corpus as corpus_mod
from playground.training.cli import main
from playground.training.corpus import (
    CorpusError,
    min_corpus_tokens,
    prepare_corpus,
    split_ids,
    text_from_bytes,
    text_from_paste,
    text_from_upload,
    tiny_shakespeare_path,
)
from playground.training.losses import evaluate_loss, overfitting, random_init_loss, unigram_loss
from playground.training.optimizer_state import optimizer_path
from playground.training.train_config import TrainConfig, check_training_memory, lr_at
from playground.training.trainer import Trainer, build_model
from tests.helpers import TINY_SHAKESPEARE
from tests.training_support import TINY, make_trainer, small_text

pytestmark = pytest.mark.usefixtures("no_downloads", "one_torch_thread")


# ----------------------------------------------------------------------------------------------
# Learning


def test_dropout_is_reproducible_and_leaves_the_global_rng_alone(tiny_corpus):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    runs = []
    for _ in range(2):
        trainer = Trainer(
            build_model(TINY.replace(drop_rate=0.2), seed=1),
            tiny_corpus.train_ids,
            tiny_corpus.val_ids,
            TrainConfig(steps=3, batch_size=2),
        )
        runs.append([trainer.step()["loss"] for _ in range(3)])
        trainer.evaluate()
    assert runs[0] == runs[1]
    assert torch.equal(torch.rand(3), expected)


def test_checkpoint_files_are_safetensors_with_optimizer_moments(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, steps=3)
    for _ in range(3):
        trainer.step()
    path = trainer.save(tmp_path / "ckpt.safetensors")
    assert optimizer_path(path).name == "ckpt.optim.safetensors"
    with safe_open(str(optimizer_path(path)), framework="pt") as f:
        keys = set(f.keys())
        exp_avg = f.get_tensor("tok_emb.weight.exp_avg")
        step = f.get_tensor("tok_emb.weight.step")
    names = {n for n, _ in trainer.model.named_parameters()}
    assert keys == {f"{n}.{k}" for n in names for k in ("step", "exp_avg", "exp_avg_sq")}
    assert "out_head.weight" not in names  # tied: stored and updated once
    assert exp_avg.shape == (TINY.vocab_size, TINY.emb_dim) and float(step) == 3.0
    meta = read_checkpoint_metadata(path)
    assert TrainConfig.from_dict(json.loads(meta["train_config"])) == trainer.tcfg
    reloaded = load_checkpoint(path)
    assert reloaded.cfg == TINY
    assert torch.equal(reloaded.tok_emb.weight, trainer.model.tok_emb.weight)


def test_resume_refuses_a_different_config(tiny_corpus, tmp_path):
    trainer = make_trainer(tiny_corpus, steps=2)
    trainer.step()
    path = trainer.save(tmp_path / "m.safetensors")
    other = Trainer(build_model(TINY.replace(n_layers=1)), tiny_corpus.train_ids, tiny_corpus.val_ids)
    with pytest.raises(ValueError, match="different model config"):
        other.load_state(path)


def test_should_stop_ends_early_and_keeps_what_was_learned(tiny_corpus):
    stepped = make_trainer(tiny_corpus, steps=20)
    for _ in range(3):
        stepped.step()
    stopped = make_trainer(tiny_corpus, steps=20)
    initial = stopped.model.tok_emb.weight.detach().clone()
    events = []
    done = stopped.run(callback=events.append, should_stop=lambda: stopped.step_count >= 3)
    assert done.kind == "done" and done.stopped and done.step == 3 and stopped.step_count == 3
    assert not torch.equal(stopped.model.tok_emb.weight, initial)
    for p, q in zip(stepped.model.parameters(), stopped.model.parameters()):
        assert torch.equal(p, q)
    # Stopping before the first step leaves the model untouched.
    untouched = make_trainer(tiny_corpus, steps=20)
    before = [p.detach().clone() for p in untouched.model.parameters()]
    assert untouched.run(should_stop=lambda: True).step == 0
    assert all(torch.equal(a, b) for a, b in zip(before, untouched.model.parameters()))


def test_snapshot_is_independent_of_further_training(tiny_corpus):
    trainer = make_trainer(tiny_corpus, steps=4)
    trainer.step()
    snap = trainer.snapshot_model()
    trainer.step()
    assert not snap.training
    assert not torch.equal(snap.tok_emb.weight, trainer.model.tok_emb.weight)


def test_bfloat16_autocast_trains(tiny_corpus):
    trainer = make_trainer(tiny_corpus, steps=3, dtype="bfloat16")
    losses = [trainer.step()["loss"] for _ in range(3)]
    assert all(math.isfinite(x) for x in losses)
    assert trainer.model.dtype == torch.float32  # master weights stay float32


def test_gradient_clipping_bounds_the_update(tiny_corpus):
    trainer = make_trainer(tiny_corpus, steps=2, grad_clip=0.5)
    trainer.step()
    norm = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in trainer.model.parameters()))
    assert trainer.history[0]["grad_norm"] > 0.5  # the raw norm was over the limit ...
    assert norm == pytest.approx(0.5, rel=1e-3)  # ... and the gradient used was scaled to it


# ----------------------------------------------------------------------------------------------
# Schedule and config


def test_lr_schedule_warms_up_linearly_then_cosine_decays_to_min_lr():
    tcfg = TrainConfig(steps=111, lr=1e-3, min_lr=1e-4, warmup_steps=10)
    lrs = [lr_at(s, tcfg) for s in range(tcfg.steps)]
    assert lrs[:10] == pytest.approx([1e-3 * (s + 1) / 10 for s in range(10)])
    assert all(b > a for a, b in zip(lrs[:9], lrs[1:10]))  # warm-up rises
    assert all(b <= a for a, b in zip(lrs[10:], lrs[11:]))  # then never rises
    assert lrs[10] == pytest.approx(1e-3)
    assert lrs[60] == pytest.approx(5.5e-4)  # half-way through the decay: the mean of lr and min_lr
    assert lrs[35] == pytest.approx(1e-4 + 0.5 * (1 + math.cos(math.pi / 4)) * 9e-4)
    assert lrs[-1] == pytest.approx(1e-4)  # ends exactly at min_lr
    assert lr_at(500, tcfg) == pytest.approx(1e-4)  # and stays there
    no_warmup = TrainConfig(steps=5, warmup_steps=0, lr=1e-3, min_lr=0.0)
    assert lr_at(0, no_warmup) == pytest.approx(1e-3) and lr_at(4, no_warmup) == 0.0


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"steps": 0}, "steps must be at least 1"),
        ({"batch_size": -2}, "batch_size"),
        ({"lr": 0.0}, "lr"),
        ({"lr": float("nan")}, "finite"),
        ({"lr": 5.0}, "too large"),
        ({"min_lr": 2e-3, "lr": 1e-3}, "min_lr"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"steps": 2.5}, "whole number"),
        ({"dtype": "float16"}, "dtype"),
        ({"block_size": 0}, "block_size"),
    ],
)
def test_train_config_rejects_bad_values(changes, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**changes)


def test_block_size_larger_than_context_is_refused(tiny_corpus):
    with pytest.raises(ConfigError, match="context_length"):
        Trainer(build_model(TINY), tiny_corpus.train_ids, tiny_corpus.val_ids, TrainConfig(block_size=64))


def test_training_memory_check_refuses_with_the_estimate():
    big = PRESETS["gpt2-small"]
    with pytest.raises(ConfigError, match=r"needs about .* GB"):
        check_training_memory(big, TrainConfig(batch_size=8), budget_bytes=2 * 2**30)
    # 124M parameters: weights, gradients and two moments alone are 2 GB.
    assert check_training_memory(TINY, TrainConfig(batch_size=4), budget_bytes=2 * 2**30) > 4 * 4 * 1.6e6


# ----------------------------------------------------------------------------------------------
# Baselines and evaluation


def test_unigram_loss_matches_a_hand_computation():
    # counts + 1 over a 4-token vocabulary: [3, 2, 1, 1] / 7
    expected = -(math.log(3 / 7) + math.log(2 / 7) + math.log(1 / 7)) / 3
    assert unigram_loss([0, 0, 1], [0, 1, 3], vocab_size=4) == pytest.approx(expected)


def test_random_init_loss_is_near_uniform(tiny_corpus):
    loss = random_init_loss(TINY, tiny_corpus.val_ids, n_windows=8)
    assert loss == pytest.approx(math.log(TINY.vocab_size), abs=0.2)
    # With ~5k training tokens add-one smoothing over 50257 ids costs a lot, but it is still far better.
    assert loss > unigram_loss(tiny_corpus.train_ids, tiny_corpus.val_ids) + 3


def test_evaluate_loss_equals_cross_entropy_over_the_chosen_windows(tiny_corpus):
    model = build_model(TINY, seed=3)
    ids = tiny_corpus.val_ids
    T = TINY.context_length
    by_hand = []
    with torch.no_grad():
        for start in range(0, len(ids) - T, T):  # every non-overlapping window
            window = ids[start : start + T + 1]
            logits = model(window[None, :-1])[0]
            by_hand.append(torch.nn.functional.cross_entropy(logits, window[1:]))
    assert evaluate_loss(model, ids, n_windows=None) == pytest.approx(float(torch.stack(by_hand).mean()), rel=1e-5)
    assert evaluate_loss(model, ids, n_windows=5) == evaluate_loss(model, ids, n_windows=5)


# ----------------------------------------------------------------------------------------------
# Corpus: too short, uploads, pastes


def test_too_short_corpus_is_refused_with_the_needed_length():
    with pytest.raises(CorpusError, match="too short.*at least 33"):
        prepare_corpus("To be, or not to be: that is the question.", block_size=32)
    n = min_corpus_tokens(32)
    ids = list(range(n))
    train, val = split_ids(ids)
    assert len(val) == 33 and len(train) >= 33
    Trainer(build_model(TINY), train, val, TrainConfig())  # exactly enough
    train, val = split_ids(ids[:-1])
    with pytest.raises(CorpusError, match="too short"):
        Trainer(build_model(TINY), train, val, TrainConfig())


def test_split_holds_out_the_last_tenth():
    train, val = split_ids(list(range(1000)))
    assert train.tolist() == list(range(900)) and val.tolist() == list(range(900, 1000))


def test_upload_reads_utf8_text_and_strips_bom(tmp_path):
    path = tmp_path / "plays.txt"
    path.write_bytes("\ufeffO Romeo, Romeo! wherefore art thou Romeo?\n— Juliet, 李白 🌹\n".encode())
    text = text_from_upload(str(path))
    assert text.startswith("O Romeo") and "李白 🌹" in text


def test_upload_accepts_an_object_carrying_the_temp_path(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("words and more words")

    class Upload:  # what older Gradio file components hand over
        name = str(path)

    assert text_from_upload(Upload()) == "words and more words"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"   \n\t  \n", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "binary"),
        (bytes(range(128, 256)) * 10, "does not look like UTF-8"),
        (b"\x01\x02\x03\x04\x05\x06 abc " * 20, "does not look like UTF-8"),
    ],
    ids=["empty", "whitespace", "png", "high-bytes", "control-codes"],
)
def test_upload_refuses_empty_and_binary(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        text_from_upload(path)


def test_upload_with_a_few_bad_bytes_is_decoded_with_replacement(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Café crème, naïve façade. ".encode("latin-1") * 40)  # é etc. are invalid UTF-8
    text = text_from_upload(path)
    assert "\ufffd" in text and "Caf\ufffd cr\ufffdme" in text


def test_upload_over_the_size_limit_is_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_text("a" * 1001)
    with pytest.raises(CorpusError, match="limit"):
        text_from_upload(path, max_bytes=1000)
    assert text_from_upload(path, max_bytes=1001) == "a" * 1001
    # The default limit is 20 MiB: a sparse 21 MiB file is refused without being read.
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as f:
        f.truncate(21 * 1024 * 1024)
    monkeypatch.setattr("pathlib.Path.open", lambda *a, **k: pytest.fail("read an oversize file"))
    with pytest.raises(CorpusError, match="20 MB"):
        text_from_upload(huge)


def test_upload_missing_or_none_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="No file"):
        text_from_upload(None)
    with pytest.raises(CorpusError, match="no longer available"):
        text_from_upload(tmp_path / "gone.txt")
    with pytest.raises(CorpusError, match="no longer available"):
        text_from_upload(tmp_path)  # a directory is not a file


def test_paste_checks():
    assert text_from_paste("Now is the winter of our discontent") == "Now is the winter of our discontent"
    assert text_from_paste("lone \ud800 surrogate") == "lone \ufffd surrogate"
    for empty in ("", "  \n ", None):
        with pytest.raises(CorpusError, match="empty"):
            text_from_paste(empty)
    with pytest.raises(CorpusError, match="limit"):
        text_from_paste("é" * 600, max_bytes=1000)  # 1200 bytes in UTF-8
    with pytest.raises(CorpusError, match="string"):
        text_from_paste(b"bytes")
    assert text_from_bytes(b"plain") == "plain"


# ----------------------------------------------------------------------------------------------
# Tiny Shakespeare: local copy, cache, download (monkeypatched)


def test_download_offline_with_nothing_cached_is_a_clear_error(tmp_path, monkeypatch):
    def offline(url, timeout, max_bytes):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(corpus_mod, "_fetch_url", offline)
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(CorpusError, match="network is not reachable.*cached"):
        tiny_shakespeare_path(local_path=tmp_path / "absent.txt")
    with pytest.raises(CorpusError, match="downloading is turned off"):
        tiny_shakespeare_path(local_path=tmp_path / "absent.txt", download=False)
    assert not (tmp_path / "cache" / "tinyshakespeare.txt").exists()


def test_download_verifies_sha256_then_caches(tmp_path, monkeypatch):
    payload = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"
    monkeypatch.setattr(corpus_mod, "TINY_SHAKESPEARE_SHA256", hashlib.sha256(payload).hexdigest())
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def fetch(url, timeout, max_bytes):
        calls.append(url)
        return payload

    monkeypatch.setattr(corpus_mod, "_fetch_url", fetch)
    path = tiny_shakespeare_path(local_path=tmp_path / "absent.txt")
    assert path == tmp_path / "cache" / "tinyshakespeare.txt" and path.read_bytes() == payload
    assert calls == ["https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"]
    # Cached now: no second download.
    monkeypatch.setattr(corpus_mod, "_fetch_url", lambda *a: pytest.fail("downloaded again"))
    assert corpus_mod.load_tiny_shakespeare(local_path=tmp_path / "absent.txt") == payload.decode()


def test_download_with_wrong_sha256_is_refused_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(corpus_mod, "_fetch_url", lambda url, timeout, max_bytes: b"<html>captive portal</html>")
    with pytest.raises(CorpusError, match="sha256"):
        tiny_shakespeare_path(local_path=tmp_path / "absent.txt")
    assert not (tmp_path / "cache" / "tinyshakespeare.txt").exists()


def test_a_corrupt_cached_copy_is_not_used(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tinyshakespeare.txt").write_text("truncated")
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(cache))
    with pytest.raises(CorpusError, match="not in the cache"):
        tiny_shakespeare_path(local_path=tmp_path / "absent.txt", download=False)


@pytest.mark.skipif(not TINY_SHAKESPEARE.is_file(), reason="../shared/data/tinyshakespeare.txt not present")
def test_local_shared_copy_is_used_first():
    path = tiny_shakespeare_path()  # the autouse fixture fails any download
    assert path.resolve() == TINY_SHAKESPEARE.resolve()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == corpus_mod.TINY_SHAKESPEARE_SHA256


# ----------------------------------------------------------------------------------------------
# Command line


def test_cli_trains_saves_and_resumes(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text(small_text(300))
    out = tmp_path / "run"
    config = json.dumps({"preset": "nano", "context_length": 16, "emb_dim": 32})
    common = [
        "--data",
        str(data),
        "--out",
        str(out),
        "--batch-size",
        "2",
        "--eval-interval",
        "2",
        "--eval-batches",
        "1",
    ]
    assert main(["--config", config, "--steps", "3", *common]) == 0
    assert read_checkpoint_metadata(out / "model.safetensors")["step"] == "3"
    assert main(["--steps", "5", "--resume", *common]) == 0
    printed = capsys.readouterr().out
    assert "resuming at step 3" in printed and "saved" in printed
    assert read_checkpoint_metadata(out / "model.safetensors")["step"] == "5"
    assert load_checkpoint(out / "model.safetensors").cfg == GPTConfig(
        context_length=16, emb_dim=32, n_heads=4, n_layers=2
    )
    events = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["kind"] == "step"] == [1, 2, 3, 4, 5]


def test_cli_reports_errors_without_a_traceback(tmp_path, capsys):
    data = tmp_path / "short.txt"
    data.write_text("Too short.")
    assert main(["--data", str(data), "--out", str(tmp_path / "o"), "--steps", "2"]) == 2
    assert "too short" in capsys.readouterr().err
    assert main(["--data", str(data), "--out", str(tmp_path / "o"), "--config", "no such preset"]) == 2
    assert main(["--data", str(data), "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "Nothing to resume" in capsys.readouterr().err


def test_overfitting_is_validation_rising_while_training_falls():
    train = [(s, 6.0 - 0.01 * s) for s in range(0, 101, 10)]
    rising = [(0, 7.0), (50, 6.0), (100, 6.2)]
    assert overfitting(train, rising)
    assert not overfitting(train, [(0, 7.0), (50, 6.0), (100, 5.9)])  # still falling
    assert not overfitting(train, [(0, 7.0), (50, 6.0), (100, 6.03)])  # within the margin: noise
    flat_train = [(s, 5.0) for s in range(0, 101, 10)]
    assert not overfitting(flat_train, rising)  # training stalled too: not overfitting
    assert not overfitting(train, rising[:2])  # too few evaluations to say


def test_a_llama_style_model_learns_and_its_checkpoint_reloads(tmp_path):
    """Issue 38: the tiny Llama-style preset (RoPE, RMSNorm, SwiGLU, GQA, no biases) trains on the GPT-2
    tokenizer like any other, and its checkpoint reloads to the same model with the same switches."""
    from playground.engine.presets import MODERN_PRESETS

    cfg = MODERN_PRESETS["llama-3.2-style"].replace(context_length=TINY.context_length, n_layers=2)
    corpus = prepare_corpus(small_text(), cfg.context_length, name="small")
    tcfg = TrainConfig(steps=30, batch_size=4, lr=1e-2, min_lr=1e-3, warmup_steps=3, eval_interval=10, eval_batches=2)
    trainer = Trainer(build_model(cfg, seed=3), corpus.train_ids, corpus.val_ids, tcfg)
    losses = [trainer.step()["loss"] for _ in range(30)]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.0
    path = trainer.save(tmp_path / "llama.safetensors")
    reloaded = load_checkpoint(path)
    assert reloaded.cfg == cfg and reloaded.cfg.since_gpt2()
    x = torch.tensor([corpus.val_ids[:20].tolist()])
    with torch.no_grad():
        torch.testing.assert_close(reloaded(x), trainer.model.eval()(x))
