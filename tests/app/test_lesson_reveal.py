"""Predict, then reveal, and "Show me" through the Lessons tab's handlers: before a guess no step's view
carries its answer (bar heights and colours, heatmap cells, chip counts, the header's figures); after it
the view draws the answer; and each step's Show me opens its tab on that step's view, drawn for a run
of the lesson's prompt. Every expected value is read from the model, never typed here."""

import re
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest

from playground import PRESETS
from playground.engine.tokenizer import load_tokenizer
from playground.inside.inspection import count_parameters
from playground.server import lessons
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.ui import common, show_me
from playground.ui.compare.tab import SOURCES
from playground.ui.lessons import tab as lessons_tab
from playground.ui.model_words import summary_line
from playground.ui.share import prefill
from tests.lesson_figures import library_answer

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"


def state_of(lang="en"):
    return {**common.new_state(lang), "recipe": random_recipe(PRESETS["nano"], seed=0), "run_id": None}


def steps():
    return [(lesson, i, step) for lesson in lessons.lessons() for i, step in enumerate(lesson.steps)]


def figure_of(update) -> go.Figure | None:
    fig = update.get("value") if isinstance(update, dict) else update
    return None if fig is None else go.Figure(fig)


def on_the_page(fig: go.Figure) -> bool:
    """Drawn as the page's figures are: transparent, so the page's light or dark theme shows through (and
    the dark theme's light text stays readable) in the project's template."""
    clear = "rgba(0,0,0,0)"
    return fig.layout.paper_bgcolor == clear and fig.layout.plot_bgcolor == clear


def answer_bearing(fig: go.Figure) -> list[str]:
    """The traces of a figure that show values: anything not marked as context with a non-zero bar,
    a coloured bar, printed numbers, a filled heatmap cell, or a line."""
    found = []
    for trace in fig.data:
        if trace.meta == "context":
            continue
        if trace.type == "bar":
            value = trace.x if trace.orientation == "h" else trace.y
            values = np.asarray([np.nan if v is None else v for v in value], dtype=float)
            if np.nan_to_num(values).any() or isinstance(trace.marker.color, (list, tuple, np.ndarray)):
                found.append(f"bar {trace.name}")
            if trace.text is not None:
                found.append("bar text")
        elif trace.type == "heatmap":
            if np.isfinite(np.asarray(trace.z, dtype=float)).any():
                found.append("heatmap cells")
        else:
            found.append(trace.type)
    return found


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_before_the_guess_no_view_shows_its_answer_and_after_it_the_view_draws_it(lang):
    state = state_of(lang)
    model = CACHE.get(state["recipe"])
    for lesson, index, step in steps():
        pos, where = {"lesson": lesson.id, "step": index}, (lesson.id, index)
        shown = lessons_tab.show(state, pos, PROMPT)
        question, _ = lessons.ask(step, model, PROMPT)
        expected = library_answer(step, model, PROMPT, question)
        assert "pg-lesson-asking" in shown.reveal and "data-right" not in shown.reveal, where
        before = figure_of(shown.plot)
        if step.view == "tokens":  # the text uncut: no chips to count
            html = shown.tokens_html["value"]
            assert "pg-lesson-tok'" not in html and "data-tokens" not in html, where
        else:
            assert answer_bearing(before) == [], (where, answer_bearing(before))
            assert on_the_page(before), where
            label = question.answer_label  # a figure such as 7,655,552 is in none of the view's text
            if len(label) >= 4 and re.fullmatch(r"[\d,.]+M?", label):
                assert label not in str(before), where
        # The header's figures: masked (by the page's CSS) while the step asks for one of them.
        hidden = set(shown.reveal.split("data-hide='")[1].split("'")[0].split())
        if step.question in ("param_count", "embedding_params"):
            assert "n" in hidden, where
        if step.question == "embedding_width":
            assert "d" in hidden, where
        wrong = next(cid for cid, _ in question.choices if cid != expected)
        after = lessons_tab.answer(state, pos, PROMPT, wrong)
        assert f"data-answer='{expected}'" in after.reveal, where
        if step.view == "tokens":
            assert f"data-tokens='{len(question.view['ids'])}'" in after.tokens_html["value"], where
        else:
            assert answer_bearing(figure_of(after.plot)) or step.view == "treemap", where
            assert on_the_page(figure_of(after.plot)), where
            if question.view.get("kind") == "components" and question.fields.get("preset"):
                # a named preset's parts, not the model's: the title says which
                assert question.fields["preset"] in figure_of(after.plot).layout.title.text, where
            if step.view == "treemap":
                assert figure_of(after.plot).data[0].type == "treemap", where


def test_the_header_carries_the_figures_the_page_masks():
    state = state_of()
    model = CACHE.get(state["recipe"])
    line = summary_line(model, state["recipe"])
    assert f"<span class='pg-fig-n'><span>{count_parameters(model):,}</span></span>" in line
    assert f"<span class='pg-fig-d'><span>{model.cfg.emb_dim}</span></span>" in line


def _skipped(x) -> bool:
    return isinstance(x, dict) and x.get("__type__") == "update" and len(x) == 1


def _drawn_title(update) -> str:
    fig = figure_of(update)
    return (fig.layout.title.text or "") if fig is not None else ""


def test_every_show_me_opens_its_tab_on_the_steps_view_drawn():
    state = state_of()
    model = CACHE.get(state["recipe"])
    request = SimpleNamespace(session_hash="lesson-show-me")
    kinds = (show_me.GenerateDrawn, show_me.Opened, show_me.Tokens, show_me.Scored)
    sizes = [len(r._fields) for r in kinds]
    for lesson, index, step in steps():
        pos, where = {"lesson": lesson.id, "step": index}, (lesson.id, index)
        question, _ = lessons.ask(step, model, PROMPT)
        ready = show_me.prepare(state, pos, PROMPT)
        target = ready.target
        assert target["tab"] == question.target["tab"], where
        prompt = target.get("text") if target["tab"] == "generate" and target.get("text") else PROMPT
        if target["tab"] in show_me.RUN_TABS:
            temperature = target.get("temperature", 0.8)
            runs = list(show_me.run_for(target, state, prompt, temperature, 40, 1.0, 4, 1, False))
            state = runs[-1][0]
            assert state["run_id"], where
        view = target.get("view", "one")
        tok_text = ready.tok_text if isinstance(ready.tok_text, str) else ""
        out = show_me.draw_view(
            target,
            state,
            *(view, target.get("layer", 0), target.get("head", 0), True, target.get("span", "newest")),
            *(None, None, None, None, 40, tok_text),
            *({"recipe": None}, SOURCES[0], PROMPT, None, False, 0),
            request=request,
        )
        tabs, sub, out = out[0], out[1], out[2:]
        assert tabs.selected == target["tab"] and (sub.selected == target["sub"] if "sub" in target else _skipped(sub))
        g, o, t, c = sizes
        parts = {
            "generate": show_me.GenerateDrawn(*out[:g]),
            "inside": show_me.Opened(*out[g : g + o]),
            "tokenizer": show_me.Tokens(*out[g + o : g + o + t]),
            "compare": show_me.Scored(*out[g + o + t : g + o + t + c]),
        }
        p = len(show_me.PatchView._fields)
        patched = show_me.PatchView(*out[g + o + t + c : g + o + t + c + p])
        parts["train"] = show_me.TrainDrawn(*out[g + o + t + c + p :])
        for tab, part in parts.items():  # the other tabs' outputs are left as they are
            assert (tab == target["tab"]) != all(_skipped(x) for x in part), (where, tab)
        assert ("patch" in target) != all(_skipped(x) for x in patched), where
        if target["tab"] == "generate":
            drawn = parts["generate"]
            if target.get("view"):
                assert (ready.view, ready.layer, ready.head) == (target["view"], target["layer"], target["head"])
            title = _drawn_title(drawn.heatmap)
            if target.get("view") == "one":
                assert f"{target['layer']}" in title and f"{target['head']}" in title, (where, title)
                if target.get("query") is not None:
                    assert drawn.query["value"] == target["query"], where
            elif target.get("view", "").startswith("overview"):
                metric = "first-token" if target["view"] == "overview-first" else "previous-token"
                assert metric in title, (where, title)
            if target.get("step") is not None:
                assert drawn.step_slider["value"] == target["step"] and figure_of(drawn.prob_plot).data, where
            if target.get("text"):  # the sentence said twice is the Generate tab's prompt now
                assert ready.prompt == target["text"] and load_tokenizer().encode(target["text"])
        elif target["tab"] == "inside":
            opened = parts["inside"]
            if target["sub"] == "inside-lens":
                assert opened.lens_pos == target["position"] and figure_of(opened.lens_plot).data, where
                assert opened.lens_layer == model.cfg.n_layers, where
            elif target["sub"] == "inside-patching":  # the step's pair in the fields, its path drawn
                patch = target["patch"]
                assert (ready.pt_clean, ready.pt_sender, ready.pt_target) == (patch["clean"], patch["sender"], "path")
                assert (ready.pt_answer, ready.pt_receiver, ready.pt_via) == (patch["answer"], patch["receiver"], "k")
                d = patched.pt_shown
                assert patched.pt_msg == "" and figure_of(patched.pt_exact).data, (where, patched.pt_msg)
                assert d["by_input"]["k"] == pytest.approx(question.view["values"]["k"][question.view["mark"]])
                assert f"{d['sender'][0]}.{d['sender'][1]}" == question.fields["sender"], where
                assert figure_of(patched.pt_attr).data[0].x == ("q", "k", "v"), where
            else:
                assert ready.i_zero == target["zero"] == question.fields["head"], where
                md = opened.i_md.replace("L", "").replace("H", ".")
                assert figure_of(opened.i_loss).data and target["zero"] in md, where
        elif target["tab"] == "tokenizer":
            n = len(load_tokenizer().encode(tok_text))
            assert f"data-tokens='{n}'" in parts["tokenizer"].summary, where
        elif target["tab"] == "compare":
            assert ready.cmp_text == PROMPT and figure_of(parts["compare"].figure).data, where
        elif target["tab"] == "train":  # the recorded run's heads, its phase change marked where the lesson said
            assert parts["train"].heads_row["visible"] is True, where  # (hidden until a run or a lesson shows it)
            drawn = figure_of(parts["train"].heads_plot)
            head = "L{} H{}".format(*target["head"].split("."))
            assert head in {trace.name for trace in drawn.data}, where
            assert any(str(target["heads_step"]) in (a.text or "") for a in drawn.layout.annotations), where
            assert "data-recorded" in parts["train"].heads_facts, where


def test_a_link_names_every_tab_of_the_page():
    for tab in ("lessons", "model", "generate", "inside", "train", "compare", "tokenizer"):
        assert prefill({"tab": tab}).tabs.selected == tab
