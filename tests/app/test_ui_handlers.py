"""UI handlers as plain functions: widget values in, figures / messages / state out."""

import json

import gradio as gr
import numpy as np
import pytest
import torch

from playground import PRESETS, count_parameters
from playground.engine.config import ConfigError
from playground.figures import format_prob
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.server.runs import get_run
from playground.ui import attention_view, model_switch
from playground.ui.chips import RESET, all_chips
from playground.ui.generate import tab as generate_tab
from playground.ui.model import tab as model_tab
from tests.helpers import plain_text

NANO = PRESETS["nano"]


def fields_of(cfg):
    return [getattr(cfg, f) for f in model_switch.FIELDS]


def nano_state(seed=0):
    return {"recipe": random_recipe(NANO, seed=seed), "run_id": None}


def run_of(state):
    """The run a session's state names (the server keeps runs; the state holds only the id)."""
    return get_run(state["run_id"])


def run_outputs(state, prompt="Hello, I am", n=6, **kw):
    args = dict(temperature=0.0, top_k=0, top_p=1.0, seed=1, greedy=True) | kw
    return list(
        generate_tab.generate_tokens(
            state, prompt, args["temperature"], args["top_k"], args["top_p"], n, args["seed"], args["greedy"]
        )
    )


def run_generation(state, prompt="Hello, I am", n=6, **kw):
    outs = run_outputs(state, prompt, n, **kw)
    return outs[-1]


def chip_list(html_text):
    """(text, label, data-step or None) of every chip in the chips HTML."""
    import re
    from html import unescape

    chips = []
    for part in html_text.split("<span class='pg-chip ")[1:]:
        step = re.search(r"data-step='(\d+)'", part.split(">", 1)[0])
        text, label = re.match(r"[^>]*>(.*?)<small>(.*?)</small>", part, re.S).groups()
        chips.append((unescape(text), unescape(label), int(step.group(1)) if step else None))
    return chips


@pytest.mark.parametrize(
    "change, message",
    [
        ({"emb_dim": ""}, "emb_dim is empty"),
        ({"n_layers": "abc"}, "n_layers must be a whole number"),
        ({"n_heads": 2.5}, "n_heads must be a whole number"),
        ({"n_heads": 3}, "divisible by n_heads"),
        ({"n_layers": 0}, "n_layers must be positive"),
        ({"drop_rate": "x"}, "drop_rate must be a number"),
        ({"drop_rate": 1.0}, "drop_rate must be in [0, 1)"),
        ({"vocab_size": 1000}, "smaller than the GPT-2 tokenizer"),
    ],
)
def test_config_form_errors_are_specific(change, message):
    values = dict(zip(model_switch.FIELDS, fields_of(NANO))) | change
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)").replace("(", r"\(")):
        model_switch.config_from_fields(*[values[f] for f in model_switch.FIELDS])


def test_config_form_accepts_float_integers_from_number_widgets():
    values = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in fields_of(NANO)]
    assert model_switch.config_from_fields(*values) == NANO


def test_build_rejects_bad_config_and_keeps_the_previous_model():
    state = nano_state()
    bad = dict(zip(model_switch.FIELDS, fields_of(NANO))) | {"n_heads": 5}
    out = model_tab.build_model(state, "random", 0, "gpt2", None, "float32", *[bad[f] for f in model_switch.FIELDS])
    assert out[0] is state
    assert "divisible by n_heads" in out[1] and "⚠️" in out[1]
    assert all(isinstance(o, type(gr.skip())) for o in out[2:])


def test_build_refuses_a_model_over_the_memory_budget(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "1")
    state = nano_state()
    xl = PRESETS["gpt2-xl"]
    out = model_tab.build_model(state, "random", 0, "gpt2", None, "float32", *fields_of(xl))
    assert out[0] is state
    assert "memory budget" in out[1] and "1,557,611,200 parameters" in out[1]


def test_build_random_model_reports_live_counts():
    out = model_tab.build_model(nano_state(), "random", 5, "gpt2", None, "float32", *fields_of(NANO))
    state, message, summary, tying, table = out[:5]
    model = CACHE.get(state["recipe"])
    assert "Ready" in message
    assert f"{count_parameters(model):,} parameters" in plain_text(summary)
    assert table[-1][2] == table[-1][3] == f"{count_parameters(model):,}"
    assert all(row[4] == "✓" for row in table)
    treemap = out[5]
    assert sum(v for v, p in zip(treemap.data[0].values, treemap.data[0].parents) if p == "") == count_parameters(model)


def test_tying_explanation_uses_the_configs_numbers():
    text = model_tab.preset_fields("textbook-124m")[-1]
    assert "163,009,536" in text and "124,412,160" in text and "38,597,376" in text


def test_generate_streams_and_ends_with_views():
    state = nano_state()
    outs = run_outputs(state, n=6)
    final = outs[-1]
    assert len(final) == 3  # state, chips, status: no figure is re-sent while a run streams
    views = generate_tab.after_run(final[0])
    last = generate_tab.last_step(final[0])
    new_state, chips, status = final[:3]
    run = run_of(new_state)
    chips = all_chips(run)
    assert len(run.steps) == 6
    assert "Done: 6 tokens" in status and "data-state='done'" in status and "data-tokens='6'" in status
    chip_values = chip_list(chips)
    assert len(chip_values) == len(run.prompt_ids) + 6
    assert chip_values[0] == ("Hello", "#15496", None)
    assert chip_values[-1][1].startswith(f"{run.steps[-1].token_id} · ")
    assert [c[2] for c in chip_values[len(run.prompt_ids) :]] == list(range(6))
    heatmap = views[0]
    assert heatmap.data[0].type == "heatmap"
    assert views[2]["value"] == len(run.token_ids) - 1  # the query on the newest token
    assert last[0]["maximum"] == 5 and last[0]["value"] == 5  # the step slider on the last step
    assert "**Step 5**" in last[3]


def test_streamed_chips_are_deltas_that_add_up_to_the_run(monkeypatch):
    """Each streamed update carries only the chips made since the previous one (O(new) per update);
    the first starts with RESET, and together they are every chip of the run, in order."""
    import playground.ui.generate.tab as gt

    monkeypatch.setattr(gt, "update_interval", lambda active: 0.0)  # an update after every token
    outs = run_outputs(nano_state(), n=30)
    deltas = [o[1] for o in outs]
    run = run_of(outs[-1][0])
    assert deltas[0].startswith(RESET) and not any(d.startswith(RESET) for d in deltas[1:])
    assert "".join(deltas) == all_chips(run)
    per_update = [d.count("class='pg-chip") for d in deltas[1:]]
    # The decode loop may make several tokens while the handler shows one update: each streamed update
    # carries the chips made since the previous one (at least one), the final one whatever is left.
    assert sum(per_update) == 30 and all(n >= 1 for n in per_update[:-1])


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"temperature": -1, "greedy": False}, "Temperature must be 0 (greedy) or positive"),
        ({"temperature": float("nan"), "greedy": False}, "finite"),
        ({"top_k": -3}, "top-k must be 0 (off) or a positive"),
        ({"top_p": 0}, "top-p must be in (0, 1]"),
        ({"top_p": 1.5}, "top-p must be in (0, 1]"),
        ({"seed": "abc"}, "Sampling seed must be a whole number"),
        ({"seed": 2**63}, "Sampling seed must be between 0 and"),
        ({"seed": -1}, "Sampling seed must be between 0 and"),
        ({"greedy": "maybe"}, "Greedy must be true or false"),
    ],
)
def test_bad_sampling_values_get_a_message_and_keep_the_last_run(kw, message):
    state = nano_state()
    good = run_generation(state, n=3)[0]
    final = run_generation(good, n=3, **kw)
    assert final[0] is good  # state untouched: the last results stay
    assert message in final[2]


def test_prompt_limits():
    state = nano_state()
    assert "prompt is empty" in run_generation(state, prompt="")[2]
    assert "prompt is empty" in run_generation(state, prompt=" \n\t ")[2]
    assert "limit is 20,000" in run_generation(state, prompt="a" * 20_001)[2]
    assert "at most 512" in run_generation(state, n=100_000)[2]
    assert "at least one new token" in run_generation(state, n=0)[2]


def test_long_prompt_is_cropped_and_said():
    state = nano_state()
    from playground import load_tokenizer

    prompt = "word " * 400
    final = run_generation(state, prompt=prompt, n=2)
    expected = len(load_tokenizer().encode(prompt)) - NANO.context_length
    assert expected > 0
    assert run_of(final[0]).n_cropped == expected
    assert f"cropped by {expected} tokens" in final[2]


def test_inspect_step_and_select_token():
    state = run_generation(nano_state(), n=5, greedy=False, temperature=1.0, top_k=20, top_p=0.9)[0]
    run = run_of(state)
    bars, stages, text = generate_tab.inspect_step(state, 2)
    step = run.steps[2]
    assert np.asarray(bars.data[0].x, dtype=float).tolist() == pytest.approx([p for _, p in step.top])
    assert f"rank **{step.rank}**" in text and f"p = **{format_prob(step.prob)}**" in text
    position = len(run.prompt_ids) + 2
    evt = gr.EventData(None, {"position": position})
    step_update, bars, stages, text, query_update = generate_tab.pick_token(state, evt)
    assert step_update["value"] == 2 and "**Step 2**" in text
    assert query_update["value"] == position  # the attention query follows the chosen token
    heat, query_fig, _, msg = attention_view.attention_views(
        state, attention_view.VIEWS[0], 1, 0, True, query_update["value"]
    )
    assert f"Where position {position}" in query_fig["value"].layout.title.text
    prompt_pick = generate_tab.pick_token(state, gr.EventData(None, {"position": 0}))
    assert "part of the prompt" in prompt_pick[3] and prompt_pick[4]["value"] == 0
    bad = generate_tab.pick_token(state, gr.EventData(None, {"position": float("nan")}))
    assert "Token position must be a whole number" in bad[3]


@pytest.mark.parametrize("view", attention_view.VIEWS)
def test_every_attention_view_draws(view):
    state = run_generation(nano_state(), n=4)[0]
    fig, query_fig, query_update, msg = attention_view.attention_views(state, view, 1, 3, True, 2)
    assert len(fig.data) >= 1 and msg == ""
    assert query_update["maximum"] == len(run_of(state).token_ids) - 1
    if view.startswith("overview"):  # about every head and position: no single-query chart
        assert query_fig["visible"] is False
        return
    row = np.asarray(query_fig["value"].data[0].y, dtype=float)
    assert row.sum() == pytest.approx(1.0, abs=1e-4)


def test_attention_data_matches_a_direct_forward():
    state = run_generation(nano_state(), n=4)[0]
    data = attention_view.attention_data(state, 1, 2)
    model = CACHE.get(state["recipe"])
    with torch.no_grad():
        _, trace = model(torch.tensor([data["token_ids"]]), return_attention=True)
    assert np.allclose(data["attention"], trace.layer(1)[0, 2].numpy(), atol=1e-6)
    assert "error" in attention_view.attention_data(state, 7, 0)


def test_exports_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_WORK_DIR", str(tmp_path))
    state = run_generation(nano_state(seed=4), n=3)[0]
    path, msg = generate_tab.export_run_file(state, "json")
    data = json.loads(open(path).read())
    T = len(run_of(state).token_ids)
    att = np.array(data["attention"])
    assert att.shape == (NANO.n_layers, NANO.n_heads, T, T)
    assert np.allclose(att.sum(-1), 1, atol=1e-3)
    path = generate_tab.export_run_file(state, "npz")[0]
    npz = np.load(path)
    assert npz["attention"].shape == (NANO.n_layers, NANO.n_heads, T, T)
    assert npz["token_ids"].tolist() == run_of(state).token_ids
    model_path, msg = generate_tab.export_model_file(state)
    assert "upload box accepts it back" in msg
    out = model_tab.build_model(state, "upload", 0, "gpt2", model_path, "float32", *fields_of(NANO))
    assert "Ready" in out[1]
    original, reloaded = CACHE.get(state["recipe"]), CACHE.get(out[0]["recipe"])
    ids = torch.tensor([run_of(state).token_ids])
    with torch.no_grad():
        assert torch.equal(original(ids), reloaded(ids))


def test_upload_of_a_non_safetensors_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_WORK_DIR", str(tmp_path / "work"))
    bad = tmp_path / "evil.safetensors"
    torch.save({"x": torch.zeros(2)}, bad)  # a pickle in disguise
    state = nano_state()
    out = model_tab.build_model(state, "upload", 0, "gpt2", str(bad), "float32", *fields_of(NANO))
    assert out[0] is state
    assert "not a readable safetensors file" in out[1]
    out = model_tab.build_model(state, "upload", 0, "gpt2", None, "float32", *fields_of(NANO))
    assert "Choose a .safetensors file" in out[1]


def test_hub_offline_message(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    state = nano_state()
    out = model_tab.build_model(state, "hub", 0, "gpt2", None, "float32", *fields_of(NANO))
    assert out[0] is state
    assert "not reachable" in out[1] and "openai-community/gpt2" in out[1]
    # The form goes back to the model still loaded, and the message names it.
    sw = model_switch.Switch(*out)
    assert (sw.weights, sw.preset, sw.seed_init, sw.dtype) == ("random", "nano", 0, "float32")
    assert [getattr(sw, f) for f in model_switch.FIELDS] == fields_of(NANO)
    assert "Still loaded: " in out[1] and "The form shows it again" in out[1]


def _form(outputs, start):
    weights, preset, seed, hub, dtype, *fields = outputs[start : start + 5 + len(model_switch.FIELDS)]
    return weights, preset, seed, hub, dtype, fields


def test_the_form_describes_the_loaded_model():
    """Page load, a build and "use the trained model" all set the Model tab's form from the model itself."""
    out = model_tab.load_session()
    model = CACHE.get(out[0]["recipe"])
    weights, preset, _, _, dtype, fields = _form(out, out._fields.index("weights"))
    assert weights == model_switch.WEIGHT_CHOICES[0] and dtype == "float32"
    kernels_box = out.kernels_md  # what this process measured, the loaded model's shapes among it
    d = model.cfg.emb_dim
    assert f"weight layout ({d}, {d})" in kernels_box and "ms" in kernels_box
    assert fields == [getattr(model.cfg, f) for f in model_switch.FIELDS]  # the bundled model's, not the default preset
    assert out[-1]["visible"] is True  # the bundled model's head examples
    out = model_tab.build_model(nano_state(), "random", 7, "gpt2", None, "bfloat16", *fields_of(NANO))
    weights, preset, seed, _, dtype, fields = _form(out, out._fields.index("weights"))
    assert (weights, preset, seed, dtype) == ("random", "nano", 7, "bfloat16")
    assert fields == fields_of(NANO)
    assert out[-1]["visible"] is False  # head examples belong to the bundled model only
    from playground.server.files import work_dir

    model = CACHE.get(out[0]["recipe"])
    trained = {
        "kind": "file",
        "path": str(work_dir() / "trained" / "t.safetensors"),
        "label": "mine",
        "dtype": "float32",
    }
    assert model_switch.WEIGHT_CHOICES[4] == model_switch.form_values(model, trained)[0]
    # An upload is an upload, even one its owner named "trained…".
    upload = {**trained, "path": str(work_dir() / "uploads" / "u.safetensors"), "label": "trained-by-me.safetensors"}
    assert model_switch.WEIGHT_CHOICES[3] == model_switch.form_values(model, upload)[0]


def test_one_layer_one_head_and_one_token_models_work():
    """Gradio refuses a slider whose minimum equals its maximum: single choices hide the slider."""
    one = NANO.replace(n_layers=1, n_heads=1, emb_dim=32)
    out = model_tab.build_model(nano_state(), "random", 0, "gpt2", None, "float32", *fields_of(one))
    assert "Ready" in out[1]
    layer_update, head_update = out[2 + 6], out[2 + 7]
    assert layer_update["visible"] is False and head_update["visible"] is False
    assert layer_update["maximum"] > layer_update["minimum"]
    state = run_generation(out[0], n=1)[0]
    step_update = generate_tab.last_step(state)[0]
    assert step_update["visible"] is False and step_update["maximum"] > step_update["minimum"]
    fig, _, query_update, msg = generate_tab.after_run(state)
    assert fig.data[0].type == "heatmap" and msg == ""


@pytest.mark.parametrize(
    "layer, head, query, view, message",
    [
        (float("nan"), 0, 2, attention_view.VIEWS[0], "Layer must be a whole number"),
        (0, float("inf"), 2, attention_view.VIEWS[0], "Head must be a whole number"),
        (0, 0, float("nan"), attention_view.VIEWS[0], "Query position must be a whole number"),
        (9, 0, 2, attention_view.VIEWS[0], "Layer must be between 0 and 1"),
        (0, 0, 2, None, "Attention view must be one of"),
        (0, 0, 2, "<img src=x onerror=alert(1)>", "&lt;img src=x"),
    ],
)
def test_attention_inputs_get_specific_messages(layer, head, query, view, message):
    state = run_generation(nano_state(), n=3)[0]
    fig, query_fig, query_update, msg = attention_view.attention_views(state, view, layer, head, True, query)
    assert message in msg and "<img" not in msg


def test_step_inputs_get_specific_messages():
    state = run_generation(nano_state(), n=3)[0]
    assert "Step must be a whole number" in generate_tab.inspect_step(state, float("nan"))[2]
    assert "Step must be between 0 and 2" in generate_tab.inspect_step(state, 7)[2]


def test_an_error_mid_run_keeps_the_tokens_and_says_why(monkeypatch):
    """A failure at some step (e.g. non-finite logits) ends the stream with a message, not a crash."""
    import playground.ui.generate.tab as gt

    real_start = gt.start_run

    def failing_start(*args, **kwargs):
        run, gen = real_start(*args, **kwargs)
        real_advance = gen.advance

        def advance(result, *made):  # the generation, failing at its third step
            if len(gen.steps) == 2:
                raise ValueError("Step 3: the model produced NaN logits; generation stopped.")
            return real_advance(result, *made)

        gen.advance = advance
        return run, gen

    monkeypatch.setattr(gt, "start_run", failing_start)
    final = run_generation(nano_state(), n=6)
    assert len(run_of(final[0]).steps) == 2
    assert "data-state='error'" in final[2] and "Ended early: 2 tokens" in final[2]
    assert "Step 3: the model produced NaN logits" in final[2]


def test_attention_of_a_run_that_grew_after_its_forward_keeps_its_labels(monkeypatch):
    """A chip clicked mid-run: the run may gain a token between the forward and the labels."""
    from playground.server import attention_views as views
    from playground.server.runs import run_attention

    state = run_generation(nano_state(), n=4)[0]
    run = run_of(state)
    stale = run_attention(CACHE.get(state["recipe"]), run)  # the forward for the tokens so far
    run.steps.append(run.steps[-1])  # one more token arrives before the figure is drawn
    monkeypatch.setattr(views, "run_attention", lambda model, run: stale)
    fig, query_fig, query_update, msg = attention_view.attention_views(state, attention_view.VIEWS[0], 0, 0, True, None)
    assert msg == "" and fig.data[0].type == "heatmap"
    assert len(fig.layout.xaxis.ticktext) == len(run.token_ids) - 1  # the forward's positions


def test_warm_up_runs_the_generate_path_greedy_and_sampled_and_leaves_nothing_running(monkeypatch):
    """app.py pays the first run's one-off costs at start-up through the Generate tab's own handlers:
    a greedy run (its row summary is compiled once per machine) and a sampled one."""
    from playground.ui import app

    calls, temperatures = [], []
    for name in ("generate_tokens", "after_run", "last_step"):
        real = getattr(generate_tab, name)
        monkeypatch.setattr(
            generate_tab, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k)
        )
    real_generate = generate_tab.generate_tokens
    monkeypatch.setattr(
        generate_tab,
        "generate_tokens",
        lambda state, prompt, t, *a: temperatures.append(t) or real_generate(state, prompt, t, *a),
    )
    seconds = app.warm_up()
    assert calls == ["generate_tokens", "generate_tokens", "after_run", "last_step"]
    assert temperatures == [0.0, 0.8]
    assert 0 < seconds < 600
    assert generate_tab.LOOP.active() == 0  # every run left the server's decode loop


def test_a_refused_build_in_a_full_budget_answers_instead_of_raising(monkeypatch):
    """When the budget is so full that the session's previous model cannot even be leased again to
    redraw the form (other sessions hold the rest), a refused build still returns its message."""
    from playground.runtime.holdings import in_use

    def full(state):
        raise in_use("a generation with nano", 1_459_472, 2**30, 2**30, [])

    state = nano_state()
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "1")
    monkeypatch.setattr(model_tab, "session_model", full)
    out = model_tab.build_model(state, "random", 0, "gpt2", None, "float32", *fields_of(PRESETS["gpt2-xl"]))
    assert out[0] is state and "memory budget" in out[1] and "1,557,611,200 parameters" in out[1]
