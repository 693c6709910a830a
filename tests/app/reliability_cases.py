"""The bad-input table for the app's handlers: every case is a value a browser or a ``gradio_client``
caller can send, with the message it must get. ``tests/app/test_reliability.py`` runs them; and
``python -m tests.app.reliability_cases`` writes docs/reliability.md from the messages they really get.

A case is (area, what is sent, call, expected fragment or a tuple of acceptable ones). ``call`` takes a fresh session state
(a nano model with one finished run) and returns the message text the user sees.
"""

from __future__ import annotations

import html
import re
from html import unescape

NAN, INF = float("nan"), float("inf")


def _text(html_or_text) -> str:
    return unescape(re.sub(r"<[^>]+>", "", str(html_or_text))).strip()


def _gen(**kw):
    args = dict(prompt="Hello", temperature=0.8, top_k=40, top_p=1.0, max_new_tokens=3, seed=1, greedy=False) | kw

    def call(state):
        from playground.ui.generate import tab as generate_tab

        # A copy without the run id: this generation must not replace the run the other cases use.
        outs = list(
            generate_tab.generate_tokens(
                {**state, "run_id": None},
                args["prompt"],
                args["temperature"],
                args["top_k"],
                args["top_p"],
                args["max_new_tokens"],
                args["seed"],
                args["greedy"],
            )
        )
        return outs[-1][2]

    return call


def _build(weights="random", seed=0, dtype="float32", **fields):
    def call(state):
        from playground import PRESETS
        from playground.ui import model_switch
        from playground.ui.model import tab as model_tab

        cfg = {f: getattr(PRESETS["nano"], f) for f in model_switch.FIELDS} | fields  # the switches at GPT-2's values
        out = model_tab.build_model(state, weights, seed, "gpt2", None, dtype, *[cfg[f] for f in model_switch.FIELDS])
        return out[1]

    return call


def _upload(make, name):
    """Build from an uploaded checkpoint that ``make(path)`` writes (under the file name a user chose)."""

    def call(state):
        import tempfile
        from pathlib import Path

        from playground import PRESETS
        from playground.ui import model_switch
        from playground.ui.model import tab as model_tab

        folder = Path(tempfile.mkdtemp(prefix="pg-upload-"))
        path = folder / name
        make(path)
        fields = [getattr(PRESETS["nano"], f) for f in model_switch.FIELDS]
        return model_tab.build_model(state, "upload", 0, "gpt2", str(path), "float32", *fields)[1]

    return call


def _nano_checkpoint(poison=None):
    def make(path):
        import torch

        from playground import PRESETS, GPTModel
        from playground.engine.weights import save_checkpoint

        model = GPTModel(PRESETS["nano"])
        if poison is not None:
            with torch.no_grad():
                model.trf_blocks[0].att.W_query.weight[0, :3] = poison
        save_checkpoint(model, path)

    return make


def _xl_header_one_tensor(path):
    """A tiny file whose header declares a gpt2-xl config and holds one tensor."""
    import torch
    from safetensors.torch import save_file

    from playground import PRESETS
    from playground.engine.weights import CHECKPOINT_FORMAT

    save_file(
        {"final_norm.scale": torch.ones(4)},
        str(path),
        metadata={"format": CHECKPOINT_FORMAT, "config": PRESETS["gpt2-xl"].to_json()},
    )


def _header_of(cfg_changes):
    """A tiny file whose header declares a nano config with ``cfg_changes`` and holds one tensor."""

    def make(path):
        import torch
        from safetensors.torch import save_file

        from playground import PRESETS
        from playground.engine.weights import CHECKPOINT_FORMAT

        cfg = PRESETS["nano"].replace(**cfg_changes)
        save_file(
            {"final_norm.scale": torch.ones(4)},
            str(path),
            metadata={"format": CHECKPOINT_FORMAT, "config": cfg.to_json()},
        )

    return make


def _pickle(path):
    import torch

    torch.save({"x": torch.zeros(2)}, path)


def _attention(view="one", layer=0, head=0, query=1, log_scale=True):
    def call(state):
        from playground.ui import attention_view

        return attention_view.attention_views(state, view, layer, head, log_scale, query)[3]

    return call


def _step(value):
    def call(state):
        from playground.ui.generate import tab as generate_tab

        return generate_tab.inspect_step(state, value)[2]

    return call


def _pick(position):
    def call(state):
        import gradio as gr

        from playground.ui.generate import tab as generate_tab

        return generate_tab.pick_token(state, gr.EventData(None, {"position": position}))[3]

    return call


def _attention_data(layer, head):
    def call(state):
        from playground.ui import attention_view

        return str(attention_view.attention_data(state, layer, head).get("error", "ok"))

    return call


def _train(steps=10, lr=1e-3, source="paste", pasted=None, preset="nano"):
    def call(state):
        from playground.ui.train import settings as train_settings
        from playground.ui.train import tab as train_tab

        text = pasted if pasted is not None else "To be, or not to be, that is the question. " * 200
        outs = list(
            train_tab.train_model(
                {"job": None, "recipe": None},
                preset,
                train_settings.CORPUS_CHOICES[source] if isinstance(source, int) else source,
                None,
                text,
                steps,
                lr,
            )
        )
        return outs[-1][3]

    return call


def _export(fmt):
    def call(state):
        from playground.ui.generate import tab as generate_tab

        return generate_tab.export_run_file(state, fmt)[1]

    return call


LESSON_PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"


def _lesson_open(lesson_id, prompt=LESSON_PROMPT):
    def call(state):
        from playground.ui.lessons import tab as lessons_tab

        return lessons_tab.show(state, {"lesson": lesson_id, "step": 0}, prompt).reveal

    return call


def _lesson_answer(choice, prompt=LESSON_PROMPT):
    def call(state):
        from playground.ui.lessons import tab as lessons_tab

        return lessons_tab.answer(state, {"lesson": "attention", "step": 0}, prompt, choice).reveal

    return call


def _room_join(code):
    def call(state):
        from playground.ui.lessons import room as lessons_room

        return lessons_room.join_room(state, None, code).room_status

    return call


def _ended_room(state):
    from playground.server.rooms import ROOMS
    from playground.ui.lessons import room as lessons_room

    code, key = ROOMS.create()
    ROOMS.end(code, key)
    return lessons_room.join_room(state, None, code).room_status


def _room_vote_alone(state):
    from playground.ui.lessons import room_voting

    return room_voting.cast(state, None, "yes")


def _student_opens_a_vote(state):
    from playground.server.rooms import ROOMS
    from playground.ui.lessons import room as lessons_room
    from playground.ui.lessons import room_voting

    code, key = ROOMS.create()
    try:
        room = lessons_room.join_room(state, None, code).room
        return room_voting.open_vote(state, room, {"lesson": "attention", "step": 0}, LESSON_PROMPT)
    finally:
        ROOMS.end(code, key)


def _busy_address(state):
    """A generation from an address that already runs its most work at once (the cap set to 1 here)."""
    import os

    from playground.runtime.holdings import acting_for
    from playground.runtime.memory import BUDGET

    before = os.environ.get("PLAYGROUND_MAX_WORK_PER_CLIENT")
    os.environ["PLAYGROUND_MAX_WORK_PER_CLIENT"] = "1"
    try:
        with acting_for(None, "203.0.113.7"):
            with BUDGET.take(1, "another generation of this address", "generation"):
                return _gen()(state)
    finally:
        if before is None:
            os.environ.pop("PLAYGROUND_MAX_WORK_PER_CLIENT")
        else:
            os.environ["PLAYGROUND_MAX_WORK_PER_CLIENT"] = before


def _no_run(fn):
    """The same handler on a session that has not generated anything yet."""

    def call(state):
        return fn({**state, "run_id": None})

    return call


CASES = [
    # --- Generate: the prompt
    ("generate", "empty prompt", _gen(prompt=""), "The prompt is empty"),
    ("generate", "whitespace-only prompt", _gen(prompt=" \n\t "), "The prompt is empty"),
    ("generate", "prompt of 20,001 characters", _gen(prompt="a" * 20_001), "the limit is 20,000"),
    ("generate", "prompt None", _gen(prompt=None), "The prompt is empty"),
    ("generate", "prompt with emoji", _gen(prompt="Hi 😀🎉"), "Done: 3 tokens"),
    ("generate", "Chinese prompt", _gen(prompt="你好，世界"), "Done: 3 tokens"),
    ("generate", "control characters", _gen(prompt="a\x00\x07\x1b[31m b"), "Done: 3 tokens"),
    ("generate", "lone surrogate", _gen(prompt="x \ud800 y"), "Done: 3 tokens"),
    ("generate", "<|endoftext|> typed", _gen(prompt="<|endoftext|> hi"), "Done: 3 tokens"),
    ("generate", "HTML in the prompt", _gen(prompt="<img src=x onerror=alert(1)>"), "Done: 3 tokens"),
    ("generate", "prompt longer than the context", _gen(prompt="word " * 400), "cropped by"),
    # --- Generate: temperature
    ("generate", "temperature −1", _gen(temperature=-1), "Temperature must be 0 (greedy) or positive"),
    ("generate", "temperature NaN", _gen(temperature=NAN), "finite"),
    ("generate", "temperature +inf", _gen(temperature=INF), "finite"),
    ("generate", "temperature 'warm'", _gen(temperature="warm"), "Temperature must be a number"),
    ("generate", "temperature None", _gen(temperature=None), "Temperature must be a number"),
    ("generate", "temperature 0 (greedy)", _gen(temperature=0), "Done: 3 tokens"),
    ("generate", "temperature 10⁶", _gen(temperature=1e6), "Done: 3 tokens"),
    # --- Generate: top-k / top-p
    ("generate", "top-k −1", _gen(top_k=-1), "top-k must be 0 (off) or a positive"),
    ("generate", "top-k 2.5", _gen(top_k=2.5), "top-k must be a whole number"),
    ("generate", "top-k 'many'", _gen(top_k="many"), "top-k must be a number"),
    ("generate", "top-k NaN", _gen(top_k=NAN), "top-k must be a whole number"),
    ("generate", "top-k 10⁶ (more than the vocabulary)", _gen(top_k=10**6), "Done: 3 tokens"),
    ("generate", "top-p 0", _gen(top_p=0), "top-p must be in (0, 1]"),
    ("generate", "top-p 1.01", _gen(top_p=1.01), "top-p must be in (0, 1]"),
    ("generate", "top-p NaN", _gen(top_p=NAN), "top-p"),
    ("generate", "top-p 'x'", _gen(top_p="x"), "top-p must be a number"),
    # --- Generate: length, seed, greedy
    ("generate", "max new tokens 0", _gen(max_new_tokens=0), "at least one new token"),
    ("generate", "max new tokens 1 (the slider's minimum)", _gen(max_new_tokens=1), "Done: 1 token"),
    ("generate", "max new tokens 9,999", _gen(max_new_tokens=9999), "at most 512"),
    ("generate", "max new tokens 2.5", _gen(max_new_tokens=2.5), "Max new tokens must be a whole number"),
    ("generate", "max new tokens NaN", _gen(max_new_tokens=NAN), "Max new tokens must be a whole number"),
    ("generate", "max new tokens None", _gen(max_new_tokens=None), "Max new tokens must be a whole number"),
    ("generate", "seed 2⁶³", _gen(seed=2**63), "Sampling seed must be between 0 and"),
    ("generate", "seed −1", _gen(seed=-1), "Sampling seed must be between 0 and"),
    ("generate", "seed 1.5", _gen(seed=1.5), "Sampling seed must be a whole number"),
    ("generate", "seed 2⁵³ + 1 (kept exact, not rounded through a float)", _gen(seed=2**53 + 1), "Done: 3 tokens"),
    (
        "generate",
        "seed '9223372036854775807' (2⁶³ − 1, as the seed box sends it)",
        _gen(seed=str(2**63 - 1)),
        "Done: 3 tokens",
    ),
    ("generate", "seed 2⁶⁰ sent as a float", _gen(seed=float(2**60)), "is past 2⁵³"),
    ("generate", "seed 'abc'", _gen(seed="abc"), "Sampling seed must be a whole number"),
    ("generate", "seed NaN", _gen(seed=NAN), "Sampling seed must be a whole number"),
    ("generate", "seed empty (no seed)", _gen(seed=""), "Done: 3 tokens"),
    ("generate", "greedy 'false'", _gen(greedy="false", temperature=0.8), "Done: 3 tokens"),
    ("generate", "greedy 'maybe'", _gen(greedy="maybe"), "Greedy must be true or false"),
    ("generate", "greedy None", _gen(greedy=None), "Greedy must be true or false"),
    # --- Model tab: the config form
    ("build", "n_layers 2.5", _build(n_layers=2.5), "n_layers must be a whole number, got 2.5"),
    ("build", "n_layers 0", _build(n_layers=0), "n_layers must be positive"),
    ("build", "n_layers −3", _build(n_layers=-3), "n_layers must be positive"),
    ("build", "n_layers 'abc'", _build(n_layers="abc"), "n_layers must be a whole number"),
    ("build", "n_layers NaN", _build(n_layers=NAN), "n_layers must be a whole number"),
    ("build", "n_layers empty", _build(n_layers=""), "n_layers is empty"),
    ("build", "n_layers 1 (one layer)", _build(n_layers=1), "Ready"),
    ("build", "n_heads 1 (one head)", _build(n_heads=1), "Ready"),
    ("build", "n_heads 3 for emb_dim 64", _build(n_heads=3), "divisible by n_heads"),
    ("build", "n_heads 1.5", _build(n_heads=1.5), "n_heads must be a whole number"),
    ("build", "n_kv_heads 3 for 4 heads (GQA)", _build(n_kv_heads=3), "n_kv_heads (3) must divide n_heads (4)"),
    ("build", "n_kv_heads 2 with per-head modules", _build(n_kv_heads=2, attention_impl="per_head"), "needs the fused"),
    ("build", "RoPE on 15-dim heads", _build(pos_encoding="rope", fixed_head_dim=15), "even head_dim"),
    ("build", "norm 'batchnorm'", _build(norm="batchnorm"), "norm must be one of layernorm, rmsnorm"),
    ("build", "rope_theta 1", _build(pos_encoding="rope", rope_theta=1), "rope_theta must be a number above 1"),
    ("build", "sliding_window −4", _build(sliding_window=-4), "sliding_window must be positive"),
    ("build", "qk_norm 'maybe'", _build(qk_norm="maybe"), "qk_norm must be true or false"),
    (
        "build",
        "Llama-style switches together",
        _build(pos_encoding="rope", norm="rmsnorm", ff="swiglu", n_kv_heads=2, bias=False),
        "Ready",
    ),
    ("build", "emb_dim 0", _build(emb_dim=0), "emb_dim must be positive"),
    ("build", "emb_dim None", _build(emb_dim=None), "emb_dim is empty"),
    ("build", "context_length −1", _build(context_length=-1), "context_length must be positive"),
    ("build", "vocab_size 1000", _build(vocab_size=1000), "smaller than the GPT-2 tokenizer"),
    ("build", "vocab_size 'lots'", _build(vocab_size="lots"), "vocab_size must be a whole number"),
    ("build", "drop_rate 1.0", _build(drop_rate=1.0), "drop_rate must be in [0, 1)"),
    ("build", "drop_rate −0.1", _build(drop_rate=-0.1), "drop_rate must be in [0, 1)"),
    ("build", "drop_rate 'x'", _build(drop_rate="x"), "drop_rate must be a number"),
    ("build", "drop_rate as HTML", _build(drop_rate="<img src=x onerror=alert(1)>"), "drop_rate must be a number"),
    ("build", "qkv_bias 'false'", _build(qkv_bias="false"), "Ready"),
    ("build", "qkv_bias 'perhaps'", _build(qkv_bias="perhaps"), "qkv_bias must be true or false"),
    ("build", "activation 'swish'", _build(activation="swish"), "activation must be one of"),
    ("build", "pos_encoding 'rotary'", _build(pos_encoding="rotary"), "pos_encoding must be one of"),
    ("build", "norm_placement None", _build(norm_placement=None), "norm_placement must be one of"),
    ("build", "attention_impl 'flash'", _build(attention_impl="flash"), "attention_impl must be one of"),
    ("build", "n_layers 10⁷ (over the memory budget)", _build(n_layers=10**7), "budget"),
    ("build", "10,000 layers of d128", _build(n_layers=10_000, emb_dim=128, n_heads=2), "at most 256 layers"),
    (
        "build",
        "gpt2-xl widths with 100 layers (3.2 B parameters)",
        _build(vocab_size=50257, context_length=1024, emb_dim=1600, n_heads=25, n_layers=100),
        ("builds at most", "more than the memory budget"),
    ),  # which check answers first depends on the RAM
    ("build", "emb_dim 10,240", _build(emb_dim=10_240, n_heads=16, n_layers=1), "at most 8,192 dimensions"),
    ("build", "init seed 2⁶³", _build(seed=2**63), "Init seed must be between 0 and"),
    ("build", "init seed 'x'", _build(seed="x"), "Init seed must be a whole number"),
    ("build", "weights choice 'magic'", _build(weights="magic"), "Weights must be one of"),
    ("build", "precision 'float8'", _build(dtype="float8"), "Precision must be one of"),
    ("build", "uploaded checkpoint with no file", _build(weights="upload"), "Choose a .safetensors file"),
    (
        "build",
        "trained model before any training",
        _build(weights="trained"),
        "Train a model in the Train tab first",
    ),
    # --- Model tab: uploaded checkpoints
    ("upload", "a pickle renamed .safetensors", _upload(_pickle, "evil.safetensors"), "evil.safetensors"),
    (
        "upload",
        "an empty file",
        _upload(lambda p: p.write_bytes(b""), "empty.safetensors"),
        "empty.safetensors is empty",
    ),
    (
        "upload",
        "random bytes",
        _upload(lambda p: p.write_bytes(bytes(range(256)) * 40), "noise.safetensors"),
        "noise.safetensors",
    ),
    (
        "upload",
        "header declares gpt2-xl, holds one tensor",
        _upload(_xl_header_one_tensor, "xl.safetensors"),
        "missing",
    ),
    (
        "upload",
        "header declares 300 layers",
        _upload(_header_of({"n_layers": 300}), "deep.safetensors"),
        "at most 256 layers",
    ),
    ("upload", "NaN in W_query", _upload(_nano_checkpoint(float("nan")), "nan.safetensors"), "NaN or infinity"),
    ("upload", "+inf in W_query", _upload(_nano_checkpoint(float("inf")), "inf.safetensors"), "NaN or infinity"),
    ("upload", "a good checkpoint", _upload(_nano_checkpoint(), "mine.safetensors"), "Ready"),
    # --- Attention views
    ("attention", "layer NaN", _attention(layer=NAN), "Layer must be a whole number"),
    ("attention", "layer 9 of 2", _attention(layer=9), "Layer must be between 0 and 1"),
    ("attention", "layer −1", _attention(layer=-1), "Layer must be between 0 and 1"),
    ("attention", "layer 0.5", _attention(layer=0.5), "Layer must be a whole number"),
    ("attention", "head +inf", _attention(head=INF), "Head must be a whole number"),
    ("attention", "head 4 of 4", _attention(head=4), "Head must be between 0 and 3"),
    ("attention", "query NaN", _attention(query=NAN), "Query position must be a whole number"),
    ("attention", "query 10⁹", _attention(query=10**9), "Query position must be between 0 and"),
    ("attention", "query −2", _attention(query=-2), "Query position must be between 0 and"),
    ("attention", "view None", _attention(view=None), "Attention view must be one of"),
    ("attention", "view as HTML", _attention(view="<script>x</script>"), "Attention view must be one of"),
    ("attention", "every view with valid input", _attention(view="overview-entropy"), ""),
    ("attention", "no run yet", _no_run(_attention()), ""),
    ("attention data", "layer 7 (API)", _attention_data(7, 0), "layer must be between 0 and 1"),
    ("attention data", "head 'x' (API)", _attention_data(0, "x"), "head must be a whole number"),
    # --- Steps and chips
    ("step", "step NaN", _step(NAN), "Step must be a whole number"),
    ("step", "step 99 of 3", _step(99), "Step must be between 0 and 2"),
    ("step", "step −1", _step(-1), "Step must be between 0 and 2"),
    ("step", "step 'x'", _step("x"), "Step must be a whole number"),
    ("step", "no run yet", _no_run(_step(0)), "Generate some tokens, then pick one"),
    ("chip", "position NaN", _pick(NAN), "Token position must be a whole number"),
    ("chip", "position 10⁶", _pick(10**6), "Token position must be between 0 and"),
    ("chip", "position None", _pick(None), "Token position must be a whole number"),
    ("chip", "a prompt token", _pick(0), "part of the prompt"),
    # --- Exports
    ("export", "format 'exe'", _export("exe"), "Export format must be one of"),
    ("export", "no run yet", _no_run(_export("json")), "Generate something first"),
    # --- Train tab
    ("train", "steps 0", _train(steps=0), "Steps must be between 1 and 5,000"),
    ("train", "steps 10⁶", _train(steps=10**6), "Steps must be between 1 and 5,000"),
    ("train", "steps 'many'", _train(steps="many"), "Steps must be a number"),
    ("train", "learning rate −1", _train(lr=-1), "learning rate must be in (0, 1]"),
    ("train", "learning rate 5", _train(lr=5), "learning rate must be in (0, 1]"),
    ("train", "pasted text too short", _train(pasted="too short"), "too short"),
    ("train", "pasted text empty", _train(pasted="   "), "empty"),
    ("train", "upload chosen, no file", _train(source="upload"), "No file was uploaded"),
    ("train", "unknown model", _train(preset="gpt-5"), "Unknown model"),
    # --- Lessons (/lesson_open, /lesson_answer)
    ("lesson", "lesson id 'nope'", _lesson_open("nope"), "There is no lesson 'nope'"),
    ("lesson", "lesson id as HTML", _lesson_open("<img src=x onerror=alert(1)>"), "There is no lesson"),
    ("lesson", "a known lesson", _lesson_open("attention"), ""),
    ("lesson", "prompt of 10 MB", _lesson_open("attention", "word " * 2_000_000), "10,000,000 characters"),
    ("lesson", "prompt of 300 tokens", _lesson_open("attention", " word" * 300), "up to"),
    ("lesson", "choice 'no-such-choice'", _lesson_answer("no-such-choice"), "is not one of this question's choices"),
    ("lesson", "choice as HTML", _lesson_answer("<script>x</script>"), "is not one of this question's choices"),
    ("lesson", "choice 7 (a number)", _lesson_answer(7), "is not one of this question's choices"),
    ("lesson", "no choice (cleared)", _lesson_answer(None), ""),
    # --- Classroom rooms (the Lessons tab's Classroom, /room_join ...)
    ("room", "room code 'nope'", _room_join("nope"), "is not a room code"),
    ("room", "room code as HTML", _room_join("<img src=x onerror=alert(1)>"), "is not a room code"),
    ("room", "a code no room has", _room_join("ZZZZZZ"), "No room has the code ZZZZZZ"),
    ("room", "the code of an ended room", _ended_room, "has ended"),
    ("room", "a vote with no room joined", _room_vote_alone, "Join a room first"),
    ("room", "a student's page opens a vote", _student_opens_a_vote, "Start a room first"),
    # --- Memory: one address's share
    ("memory", "a generation while the address runs its most work at once", _busy_address, "Try again in about"),
]


def nano_state():
    """A session on a nano model with a finished 3-token run (what most cases start from)."""
    from playground import PRESETS
    from playground.server.recipes import random_recipe
    from playground.ui import common
    from playground.ui.generate import tab as generate_tab

    state = {**common.new_state(), "recipe": random_recipe(PRESETS["nano"], seed=0)}
    outs = list(generate_tab.generate_tokens(state, "Hello, I am", 0, 0, 1.0, 3, 1, True))
    return outs[-1][0]


def raw_outcome(call, state) -> str:
    """The message as the handler returns it (HTML for the app's message boxes)."""
    return str(call(state))


def outcome(call, state) -> str:
    """The message as the user reads it."""
    return _text(raw_outcome(call, state))


def write_table(path="docs/reliability.md") -> int:
    """Run every case and write the table of what each gets (returns the number of cases)."""
    from pathlib import Path

    state = nano_state()
    rows = []
    for area, sent, call, _expected in CASES:
        said = []
        for lang in ("en", "zh-CN"):
            message = re.sub(r" · [\d.]+ tokens/s", "", outcome(call, {**state, "lang": lang}))  # the rate varies
            said.append(message if message else "(no message: handled, the view is drawn)")
        cells = [html.escape(x, quote=False).replace("|", "\\|").replace("\n", " ") for x in (area, sent, *said)]
        rows.append("| " + " | ".join(cells) + " |")
    text = Path(path).read_text() if Path(path).exists() else ""
    start, end = "<!-- cases:start -->", "<!-- cases:end -->"
    head = "| area | what is sent | what the user reads | 中文 |"
    table = "\n".join([start, head, "|---|---|---|---|", *rows, end])
    if start in text and end in text:
        text = text[: text.index(start)] + table + text[text.index(end) + len(end) :]
    else:
        text = text + "\n" + table + "\n"
    Path(path).write_text(text)
    return len(rows)


if __name__ == "__main__":
    import os
    import sys

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    print(f"{write_table()} cases written to docs/reliability.md")
