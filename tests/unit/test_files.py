"""Exports, uploads and the disk budget (playground/server/files.py): sizes known before writing, files
stored once, refused uploads deleted, the work dir kept under budget. A GPT-2-small-sized export is
checked in tests/integration/test_big_export.py, Gradio serving exports in tests/app/test_export_serving.py."""

import os
import time

import numpy as np
import psutil
import pytest
import torch
from safetensors.torch import load_file, save_file

from playground.engine.config import ConfigError
from playground.engine.presets import PRESETS
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import CHECKPOINT_FORMAT, save_checkpoint
from playground.server import files
from playground.server.export_formats import json_attention_bytes
from playground.server.exports import ExportTooLarge, export_model, export_run
from playground.server.files import (
    discard_upload,
    enforce_disk_budget,
    exports_dir,
    import_upload,
    protect,
    save_trained,
)
from playground.server.recipes import random_recipe
from playground.server.runs import Run
from tests.export_helpers import NANO, nano_model, private_dirs, small_run, strict_json


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    return private_dirs(tmp_path, monkeypatch)


def direct_attention(model, ids):
    with torch.no_grad():
        _, trace = model(torch.tensor([ids]), return_attention=True)
    return np.stack([trace.layer(i)[0].numpy() for i in range(model.cfg.n_layers)])


# ---------------------------------------------------------------------------------------------
# Run exports


def test_json_export_is_strict_json_equal_to_the_attention_and_exactly_the_predicted_size():
    model = nano_model()
    run = small_run(model)
    path = export_run(run, model, "json")
    data = strict_json(path.read_text())
    T = len(run.token_ids)
    att = np.array(data["attention"])
    assert att.shape == (NANO.n_layers, NANO.n_heads, T, T)
    assert np.abs(att - direct_attention(model, run.token_ids)).max() <= 5.01e-6  # 5 decimals
    assert np.allclose(att.sum(-1), 1, atol=1e-4)
    assert np.all(att[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0)  # the future is masked
    assert data["token_ids"] == run.token_ids and data["attention_layers"] == [0, 1]
    assert [s["token_id"] for s in data["steps"]] == [s.token_id for s in run.steps]
    raw = path.read_bytes()
    assert len(raw) - raw.index(b'"attention":') - len(b'"attention":') - 1 == json_attention_bytes(
        NANO.n_layers, NANO.n_heads, T
    )


@pytest.mark.parametrize("T, decimals", [(1, 5), (2, 5), (9, 3), (33, 8)])
def test_json_writer_is_exact_for_any_length_and_precision(tmp_path, T, decimals):
    from playground.server.export_formats import write_json

    rng = np.random.default_rng(T)
    layers = [np.tril(rng.random((3, T, T), dtype=np.float32)) for _ in range(2)]
    layers[0][0, -1, 0] = 1.0  # rounds to "1.000…"
    layers[1][2, -1, -1] = 0.999999999  # rounds up to 1 at every precision here
    path = tmp_path / "a.json"
    write_json(path, b'{"x":1}', 2, lambda i: layers[i], decimals)
    data = strict_json(path.read_text())
    assert data["x"] == 1 and path.stat().st_size == len(b'{"x":1,"attention":') + json_attention_bytes(
        2, 3, T, decimals
    ) + len(b"}")
    assert np.abs(np.array(data["attention"]) - np.stack(layers)).max() <= 0.5 * 10.0**-decimals + 1e-7


def test_npz_export_streams_the_same_attention():
    model = nano_model()
    run = small_run(model)
    path = export_run(run, model, "npz")
    with np.load(path) as npz:
        assert npz["attention"].dtype == np.float32
        assert np.allclose(npz["attention"], direct_attention(model, run.token_ids), atol=1e-6)
        assert npz["token_ids"].tolist() == run.token_ids
        assert strict_json(str(npz["metadata"]))["token_ids"] == run.token_ids
    half = export_run(run, model, "npz", dtype="float16", layers=[1])
    with np.load(half) as npz:
        assert npz["attention"].dtype == np.float16 and npz["attention"].shape[0] == 1
        assert np.allclose(npz["attention"][0], direct_attention(model, run.token_ids)[1], atol=1e-3)


def test_the_same_export_twice_is_written_once():
    model = nano_model()
    run = small_run(model)
    first = export_run(run, model, "json")
    os.utime(first, (1, 1))
    again = export_run(run, model, "json")
    assert again == first and first.stat().st_mtime > 1  # touched, not rewritten
    assert len(list(exports_dir().iterdir())) == 1


def test_too_large_an_export_is_refused_before_anything_is_written(monkeypatch):
    model = nano_model()
    run = small_run(model, n_new=20)
    T = len(run.token_ids)
    attention = json_attention_bytes(NANO.n_layers, NANO.n_heads, T)
    monkeypatch.setenv("PLAYGROUND_MAX_EXPORT_MB", "0.000001")
    with pytest.raises(ExportTooLarge) as info:
        export_run(run, model, "json")
    size = info.value.size  # the whole file: metadata + attention
    limit_mb = (size - attention / 4) / 1e6  # room for one of the two layers
    monkeypatch.setenv("PLAYGROUND_MAX_EXPORT_MB", str(limit_mb))
    with pytest.raises(ExportTooLarge) as info:
        export_run(run, model, "json")
    err = info.value
    assert err.size == size > attention and err.limit == int(limit_mb * 1e6)
    assert f"would be {size / 1e6:.2f} MB as .json (2 layers × 4 heads × {T}×{T} attention values), over the " in str(
        err
    )
    assert "PLAYGROUND_MAX_EXPORT_MB" in str(err)
    assert "layers 0–0 only" in err.options and ".npz (float16)" in err.options
    assert list(exports_dir().iterdir()) == []  # nothing written, not even a temporary file
    kwargs, fitted = err.options["layers 0–0 only"]
    one_layer = export_run(run, model, **kwargs)
    assert one_layer.stat().st_size == fitted <= err.limit  # sizes are exact, not estimates
    assert strict_json(one_layer.read_text())["attention_layers"] == [0]
    monkeypatch.delenv("PLAYGROUND_MAX_EXPORT_MB")
    assert export_run(run, model, "json").stat().st_size == err.size


def test_non_finite_attention_is_refused_and_metadata_stays_json():
    model = nano_model()
    run = small_run(model)
    run.steps[0].entropy = float("nan")
    data = strict_json(export_run(run, model, "json").read_text())
    assert data["steps"][0]["entropy_bits"] is None
    with torch.no_grad():
        model.trf_blocks[0].att.W_query.weight.fill_(float("nan"))
    fresh = Run(run.recipe, run.token_ids, 0, {})  # not the run above, whose attention is cached
    with pytest.raises(ValueError, match="Layer 0's attention contains NaN or infinity"):
        export_run(fresh, model, "json")
    assert len(list(exports_dir().iterdir())) == 1  # the refused one left nothing behind


# ---------------------------------------------------------------------------------------------
# Model export, uploads


def upload_in_gradio(dirs, name, writer):
    """A file where Gradio 6 puts an upload: <GRADIO_TEMP_DIR>/<content hash>/<the user's file name>."""
    folder = dirs / "gradio" / "0f3a9c"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    writer(path)
    return path


def test_model_export_loads_back_through_import_upload(dirs):
    model = nano_model()
    recipe = random_recipe(model.cfg, seed=0)
    path = export_model(model, recipe)
    assert path.parent == exports_dir()
    uploaded = upload_in_gradio(dirs, "my model.safetensors", lambda p: p.write_bytes(path.read_bytes()))
    got = import_upload(str(uploaded))
    assert got["kind"] == "file" and got["label"] == "my model.safetensors"
    kept = os.stat(got["path"])
    assert kept.st_ino == uploaded.stat().st_ino  # a hard link: stored once
    assert import_upload(str(uploaded))["path"] == got["path"]


def test_a_tiny_file_declaring_gpt2_xl_is_refused_from_its_header(dirs):
    files.validate_checkpoint  # noqa: B018 (imported)
    from playground.engine.weight_layout import expected_shapes

    expected_shapes(NANO)  # the first meta-device build imports torch's meta kernels (~80 MB, once)
    path = upload_in_gradio(
        dirs,
        "gpt2-xl.safetensors",
        lambda p: save_file(
            {"final_norm.shift": torch.zeros(16)},
            str(p),
            metadata={"format": CHECKPOINT_FORMAT, "config": PRESETS["gpt2-xl"].to_json()},
        ),
    )
    assert path.stat().st_size < 600
    rss = psutil.Process().memory_info().rss
    with pytest.raises(WeightLoadError) as info:
        import_upload(str(path))
    grown = psutil.Process().memory_info().rss - rss
    assert grown < 100e6, f"RSS grew {grown / 1e6:.0f} MB"
    msg = str(info.value)
    assert "The weights do not fit this model: 771 missing (final_norm.scale, pos_emb.weight" in msg
    assert "final_norm.shift: file [16] vs model [1600]" in msg
    assert not path.exists() and not path.parent.exists()  # deleted at once, its hash folder too
    assert not (dirs / "work" / "uploads").exists() or not list((dirs / "work" / "uploads").iterdir())


def test_refused_uploads_are_named_as_the_user_named_them_and_deleted(dirs):
    garbage = upload_in_gradio(dirs, "notes.safetensors", lambda p: p.write_bytes(b"\x00" * 64))
    with pytest.raises(WeightLoadError, match=r"^notes\.safetensors is not a readable safetensors file"):
        import_upload(str(garbage))
    assert not garbage.exists()

    def poisoned(p):
        model = nano_model()
        with torch.no_grad():
            model.trf_blocks[1].att.W_value.weight[0, :3] = float("inf")
        save_checkpoint(model, p)

    bad = upload_in_gradio(dirs, "poisoned.safetensors", poisoned)
    with pytest.raises(
        WeightLoadError,
        match=r"^Mine\.safetensors: 1 tensor contains NaN or infinity: trf_blocks\.1\.att\.W_value\.weight \(3 values\)",
    ):
        import_upload(str(bad), "Mine.safetensors")
    assert not bad.exists()


def test_uploads_over_the_memory_budget_are_refused_and_deleted(dirs, monkeypatch):
    path = upload_in_gradio(dirs, "nano.safetensors", lambda p: save_checkpoint(nano_model(), p))
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "0.001")
    with pytest.raises(ConfigError, match="more than the memory budget"):
        import_upload(str(path))
    assert not path.exists()


def test_files_outside_gradios_uploads_are_never_deleted(dirs):
    mine = dirs / "mine.safetensors"
    mine.write_bytes(b"not a checkpoint")
    with pytest.raises(WeightLoadError, match="mine.safetensors is not a readable"):
        import_upload(str(mine))
    assert mine.exists()  # refused, but not ours to delete
    model = nano_model()
    exported = export_model(model, random_recipe(model.cfg, seed=0))
    assert discard_upload(exported) is False and exported.exists()


# ---------------------------------------------------------------------------------------------
# Disk budget


def _file(path, size, age):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    t = time.time() - age
    os.utime(path, (t, t))
    return path


def _total(*roots):
    return sum(p.stat().st_size for r in roots for p in r.rglob("*") if p.is_file())


def test_disk_budget_evicts_oldest_first_and_never_a_protected_file(dirs):
    work, cache = dirs / "w", dirs / "g"
    oldest = _file(work / "uploads" / "a.safetensors", 400, age=500)
    protected = _file(work / "trained" / "b.safetensors", 400, age=400)
    middle = _file(cache / "h1" / "run.json", 400, age=300)
    registered = _file(cache / "h2" / "run.npz", 400, age=200)
    newest = _file(work / "exports" / "c.json", 400, age=100)
    protect(lambda: [registered])
    deleted = enforce_disk_budget(1200, protected=[protected], dirs=[work, cache])
    assert set(deleted) == {oldest, middle}
    assert protected.exists() and registered.exists() and newest.exists()
    assert _total(work, cache) <= 1200
    assert not (cache / "h1").exists() and cache.exists()  # the empty hash folder goes, the root stays


def test_disk_budget_counts_hard_links_once_and_keeps_files_being_written(dirs):
    work, cache = dirs / "w", dirs / "g"
    upload = _file(cache / "h" / "model.safetensors", 600, age=300)
    (work / "uploads").mkdir(parents=True)
    os.link(upload, work / "uploads" / "abc.safetensors")
    partial = _file(cache / "h3" / ".big.json.123.tmp", 600, age=1)
    assert enforce_disk_budget(700, dirs=[work, cache], protected=[work / "uploads" / "abc.safetensors"]) == []
    assert upload.exists() and partial.exists()  # the link is protected, so both names stay
    deleted = enforce_disk_budget(700, dirs=[work, cache])
    assert set(deleted) == {upload, work / "uploads" / "abc.safetensors"}  # both names, or nothing is freed
    assert partial.exists()


def test_writes_run_the_budget(dirs, monkeypatch):
    old = _file(dirs / "work" / "uploads" / "x.safetensors", 5_000_000, age=1000)
    other = _file(dirs / "work" / "notes" / "mine.txt", 5_000_000, age=2000)
    monkeypatch.setenv("PLAYGROUND_DISK_BUDGET_GB", "0.004")
    model = nano_model()
    recipe = save_trained(model, "trained nano")
    assert not old.exists() and os.path.exists(recipe["path"])
    assert load_file(recipe["path"])  # the new checkpoint itself is never evicted
    assert other.exists()  # only the app's own folders of the work dir are managed
