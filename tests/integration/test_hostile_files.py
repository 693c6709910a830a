"""Hostile files and inputs, built here as an attacker would: replay records past the generation cap,
.npz zip bombs, deeply nested JSON, records with bad fields, checkpoints whose finite weights overflow,
huge targets and configs. Each is refused before any work, with a message naming what is wrong."""

import io
import json
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
import torch

from playground.engine.config import GPT2_VOCAB_SIZE, ConfigError
from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS
from playground.engine.sizes import MAX_VOCAB_SIZE, check_build_size
from playground.engine.tokenizer import load_tokenizer
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import load_checkpoint, save_checkpoint
from playground.errors import MAX_FIELD_CHARS, UserError
from playground.inside import view_checks
from playground.runtime.memory import MemoryBudget
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.server.replay import ReplayError, read_record, replay, replay_record
from playground.server.replay_files import MAX_METADATA_BYTES
from playground.server.runs import MAX_NEW_TOKENS, start_run

NANO = PRESETS["nano"]


@pytest.fixture(scope="module")
def nano():
    recipe = random_recipe(NANO, seed=3)
    return CACHE.get(recipe), recipe


@pytest.fixture(scope="module")
def record(nano):
    model, recipe = nano
    run, gen = start_run(
        model, recipe, "Hello there", max_new_tokens=3, temperature=1.0, top_k=0, top_p=1.0, seed=7, replaces=None
    )
    run.steps.extend(gen)
    return replay_record(run, model)


def _write(tmp_path, record, name="r.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(record))
    return str(path)


# ---- 1. replay files keep the generation cap


def test_a_replay_padded_past_the_cap_is_refused_before_any_token(nano, record, tmp_path):
    n = 20_000
    padded = record | {"token_ids": record["token_ids"] * (n // 3 + 1), "probs": record["probs"] * (n // 3 + 1)}
    t0 = time.perf_counter()
    with pytest.raises(ReplayError, match=f"at most {MAX_NEW_TOKENS}, and so does a replay") as caught:
        read_record(_write(tmp_path, padded))
    assert caught.value.key == "replay.too_many_tokens" and caught.value.fields["n"] > n
    with pytest.raises(ReplayError, match="at most 512"):
        replay(padded, nano[0])  # the library entry point refuses it too, without the file reader
    assert time.perf_counter() - t0 < 5  # no generation ran (20,000 steps would take minutes)


def test_a_replay_at_the_cap_is_still_read(record, tmp_path):
    at_cap = record | {
        "token_ids": (record["token_ids"] * MAX_NEW_TOKENS)[:MAX_NEW_TOKENS],
        "probs": (record["probs"] * MAX_NEW_TOKENS)[:MAX_NEW_TOKENS],
    }
    assert len(read_record(_write(tmp_path, at_cap))["token_ids"]) == MAX_NEW_TOKENS


def test_an_honest_replay_is_still_identical(nano, record):
    report = replay(record, nano[0])
    assert report.identical and report.steps == len(record["token_ids"])


# ---- 2. .npz zip bombs are refused from their declared sizes


def _npz(tmp_path, members: dict[str, bytes], name="bomb.npz") -> str:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return str(path)


def _npy_header(dtype: str, shape: tuple) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _read_measured(path):
    tracemalloc.start()
    try:
        with pytest.raises(ReplayError) as caught:
            read_record(path)
        return caught.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_metadata_header_declaring_a_gibibyte_of_floats_is_refused_unread(tmp_path):
    # The recipe: ('<f8', (134217728,)) over deflated zeros, 1 GiB declared.
    path = _npz(tmp_path, {"metadata.npy": _npy_header("<f8", (134_217_728,)) + bytes(1 << 20)})
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    error, peak = _read_measured(path)
    assert error.key == "replay.npz_metadata" and "(134217728,)" in str(error)
    assert peak < 20_000_000  # nothing near the declared size was allocated


def test_a_metadata_string_declared_past_the_bound_is_refused_unread(tmp_path):
    chars = MAX_METADATA_BYTES // 4 + 1  # a '<U…' scalar: 4 bytes a character
    path = _npz(tmp_path, {"metadata.npy": _npy_header(f"<U{chars}", ()) + bytes(1 << 16)})
    error, peak = _read_measured(path)
    assert error.key == "replay.npz_member_big" and "metadata.npy" in str(error)
    assert peak < 20_000_000


def test_a_zip_entry_declared_past_the_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_EXPORT_MB", "1")  # every member of a run export is at most 1 MB
    path = _npz(tmp_path, {"attention.npy": bytes(3_000_000), "metadata.npy": b"x"})
    error, peak = _read_measured(path)
    assert error.key == "replay.npz_member_big" and "attention.npy" in str(error) and "3.00 MB" in str(error)
    assert peak < 20_000_000


def test_a_zip_listing_thousands_of_members_is_refused_from_its_end_record(tmp_path):
    path = _npz(tmp_path, {f"m{i}.npy": b"" for i in range(5000)} | {"metadata.npy": b"x"})
    error, peak = _read_measured(path)
    assert error.key == "replay.npz_members" and "5,001 members" in str(error)
    assert peak < 1_000_000  # not one ZipInfo object was made


def test_a_header_shorter_than_its_data_is_refused(tmp_path):
    path = _npz(tmp_path, {"metadata.npy": _npy_header("<U1000", ()) + b"\0" * 40})
    assert _read_measured(path)[0].key == "replay.npz_short"


def test_a_real_npz_metadata_is_still_read(record, tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array(json.dumps({"replay": record})), allow_pickle=False)
    path = _npz(tmp_path, {"token_ids.npy": b"", "metadata.npy": buf.getvalue()}, "ok.npz")
    assert read_record(path)["token_ids"] == record["token_ids"]


# ---- 3. a refusal names no other user's model, file or seed


def test_a_budget_refusal_says_counts_and_sizes_only():
    budget = MemoryBudget(total_bytes=10_000_000)
    secret = torch.zeros(1)
    budget.register(secret, 6_000_000, "checkpoint: secret_patient_notes_model.safetensors (seed 31337)", "model")
    with pytest.raises(MemoryError) as caught:
        budget.check(5_000_000, "a generation")
    message = str(caught.value)
    assert "secret_patient_notes" not in message and "31337" not in message
    assert "in use by 1 model (6.00 MB)" in message


# ---- 6. huge inputs are refused before the tokenizer, and never echoed


def test_a_ten_megabyte_target_is_refused_at_once_and_not_echoed():
    text = "ab" * 5_000_000
    t0 = time.perf_counter()
    with pytest.raises(view_checks.LensError) as caught:
        view_checks.resolve_target(load_tokenizer(), text)
    assert time.perf_counter() - t0 < 0.5  # tokenizing it took 17-25 s
    assert caught.value.key == "inside.target_long" and "10,000,000 characters" in str(caught.value)
    assert len(str(caught.value)) < 300


def test_a_longest_token_is_still_a_target():
    tok = load_tokenizer()
    longest = max(range(GPT2_VOCAB_SIZE), key=lambda i: len(tok.decode([i])))
    assert len(tok.decode([longest])) == view_checks.LONGEST_TOKEN_CHARS
    assert view_checks.resolve_target(tok, tok.decode([longest])) == longest


def test_any_message_quotes_a_short_excerpt_of_what_was_sent():
    e = UserError("input.not_number", "{name} must be a number, got {value!r}.", name="X", value="7" * 10_000_000)
    assert len(str(e)) < MAX_FIELD_CHARS + 50 and str(e).startswith("X must be a number, got '777")
    e = UserError("input.not_number", "{name} must be a number, got {value!r}.", name="X", value=list(range(10**6)))
    assert str(e) == "X must be a number, got [0, 1, 2, 3, 4, 5, 6, 7, ...]."


# ---- 8. every config field is bounded by what a model can use


def test_a_ten_million_token_vocabulary_is_refused_before_building():
    cfg = NANO.replace(vocab_size=10_000_000)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        CACHE.get(random_recipe(cfg, seed=1))
    assert time.perf_counter() - t0 < 2  # it held the build slot for minutes
    assert caught.value.key == "config.vocab_too_large" and f"at most {MAX_VOCAB_SIZE:,}" in str(caught.value)
    check_build_size(NANO.replace(vocab_size=50_304))  # a padded vocabulary, asked for on purpose, is fine


@pytest.mark.parametrize(
    "field, value, key",
    [
        ("context_length", 100_000, "config.context_too_large"),
        ("n_heads", 512, "config.heads_too_many"),
    ],
)
def test_other_fields_have_maxima_too(field, value, key):
    cfg = NANO.replace(**({field: value} | ({"emb_dim": 1024} if field == "n_heads" else {})))
    with pytest.raises(ConfigError) as caught:
        check_build_size(cfg)
    assert caught.value.key == key and f"{value:,}" in str(caught.value)


@pytest.mark.parametrize("field", ["vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"])
def test_1e308_in_any_field_gets_a_message_not_an_overflow(field):
    with pytest.raises(ConfigError) as caught:
        NANO.replace(**{field: int(1e308)})
    assert caught.value.key == "config.field_huge" and str(caught.value).startswith(f"{field} is 1e+308;")


# ---- 10. replay fields refused by name; finite weights that overflow


@pytest.mark.parametrize(
    "change, key, words",
    [
        ({"probs": []}, "replay.probs_count", "one probability for each of its 3"),
        ({"probs": ["high", 0.1, 0.2]}, "replay.probs_range", "probs must be numbers between 0 and 1"),
        ({"seed": True}, "replay.seed", "seed must be a whole number"),
        ({"seed": 2**70}, "replay.seed_range", "seed must be between 0"),
        ({"settings": [0.8, 40]}, "replay.settings", "settings must be an object"),
        ({"settings": {"temperature": "hot"}}, "replay.temperature", "settings.temperature"),
        ({"settings": {"top_k": 2.5}}, "replay.top_k", "settings.top_k"),
        ({"settings": {"top_p": 7}}, "replay.top_p", "settings.top_p"),
        ({"recipe": "gpt2"}, "replay.recipe", "recipe must be an object"),
        ({"weights_sha256": 5}, "replay.sha", "weights_sha256"),
        ({"prompt_ids": [1, True]}, "replay.prompt_ids", "prompt_ids"),
    ],
)
def test_bad_replay_fields_are_refused_by_name(record, tmp_path, change, key, words):
    with pytest.raises(ReplayError, match=words) as caught:
        read_record(_write(tmp_path, record | change))
    assert caught.value.key == key


def test_deeply_nested_replay_json_gets_a_message(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ReplayError) as caught:
        read_record(path)
    assert caught.value.key == "replay.nested"


def test_finite_weights_that_overflow_are_refused_at_load(tmp_path):
    model = GPTModel(NANO)
    with torch.no_grad():
        model.trf_blocks[0].ff.layers[0].weight.fill_(1e30)  # finite, but the MLP's output is not
    path = save_checkpoint(model, tmp_path / "huge.safetensors")
    with pytest.raises(WeightLoadError) as caught:
        load_checkpoint(path)
    assert caught.value.key == "weights.activations_not_finite"
    assert "every weight is finite" in str(caught.value) and "1e+30" in str(caught.value)
    good = save_checkpoint(GPTModel(NANO), tmp_path / "good.safetensors")
    assert load_checkpoint(good).cfg == NANO
