"""A lesson step's "Show me in the full tab": the tab that owns the step's view opens on that view, drawn.

The step's question says where its view lives (``Question.target``: the tab, and there the view,
layer and head, the sub-tab, the position, the text, the patching pair). ``prepare`` sets the target
tab's controls and selects it; the events chained after it (``wire``) make a
run of the lesson's prompt for the Generate and Inside tabs (so no view there waits on "Generate
first"), then ``draw_view`` draws the attention view or the step, the lens, the intervention or the
path patching, the tokenizer's chips, or the Compare tab's per-token loss, leaving every other tab's
outputs as they are.

It lives beside ``app`` rather than in the lessons' package because it joins the Lessons tab to the
tabs it opens: no tab's package imports another's.
"""

from __future__ import annotations

import json

import gradio as gr

from playground.server import lessons

from .attention_view import attention_views
from .common import lang_of, session_model
from .compare.tab import SOURCES, Scored, score_a
from .generate.tab import AttentionViews, LastStep, generate_tokens, inspect_step, last_step
from .inside.opening import Opened, open_tab
from .inside.patching import PatchView, patched
from .inside.redraw import note_drawn
from .inside.tab import intervene_view, lens_view
from .lessons.tab import locate, position
from .results import outputs, result, skipped
from .tokenizer.tab import Tokens, show_tokens
from .train.heads_view import recorded_view

# The patching view's controls a target's "patch" fills (its keys: the fields of ``patch``).
PATCH_FIELDS = {"clean": "pt_clean", "corrupted": "pt_corrupted", "answer": "pt_answer", "wrong": "pt_wrong"}
PATCH_FIELDS |= {"sender": "pt_sender", "receiver": "pt_receiver", "via": "pt_via", "target": "pt_target"}
# What "prepare" sets: the target, the page's tab, and the controls of the tab it opens.
Prepared = result(
    "Prepared",
    "target",
    "anchor",
    "prompt",
    "temperature",
    "view",
    "layer",
    "head",
    "span",
    "tok_text",
    "cmp_source",
    "cmp_text",
    "i_zero",
    *PATCH_FIELDS.values(),
)
GenerateDrawn = result("GenerateDrawn", *AttentionViews._fields, *LastStep._fields)
TrainDrawn = result("TrainDrawn", "heads_plot", "heads_facts", "heads_row")
RUN_TABS = ("generate", "inside")  # tabs whose views read the session's run
# The element that shows the step's view in its tab: scrolled into view once drawn.
ANCHORS = {"generate": "pg-heatmap", "inside-lens": "pg-lens", "inside-intervene": "pg-intervene-loss"}
ANCHORS |= {"inside-patching": "pg-patch-exact"}
ANCHORS |= {"train": "pg-train-heads-plot"}
ANCHORS |= {"tokenizer": "pg-tok-chips", "compare": "pg-score-a", "model": "pg-breakdown", "step": "pg-prob-plot"}


def anchor(target: dict) -> str:
    """Where the page looks once the step's view is drawn (``SCROLL_JS``): the tab, the Inside tab's
    sub-tab ("" for the others) and the element id of the view (``ANCHORS``), as JSON."""
    if target.get("tab") == "inside":
        element = ANCHORS[target["sub"]]
    else:
        element = ANCHORS["step" if target.get("step") is not None else target["tab"]]
    return json.dumps({"tab": target.get("tab", ""), "sub": target.get("sub", ""), "id": element})


# Once the chain has drawn the view: the step's tab (and sub-tab) selected, its view scrolled into
# sight. The server selected the tab already; for twenty seconds the page checks that it stays selected
# and selects it again by its button if a redraw under way when Show me was pressed (the page's
# opening, a language or presenter switch) took the selection away, until the visitor clicks or types
# (then the page is theirs). A tab opened by the same event mounts its content a moment later: look
# again until it is there.
SCROLL_JS = """(where) => { let spot = {}, theirs = false;
  try { spot = JSON.parse(where || '{}'); } catch (e) { return; }
  const mine = (e) => { if (e.isTrusted) theirs = true; };
  for (const kind of ['pointerdown', 'keydown']) document.addEventListener(kind, mine, {capture: true, once: true});
  const pick = (root, id) => {
    const box = root && document.querySelector(root);
    const b = id && box && [...box.querySelectorAll('button[role=tab]')].find(b => b.dataset.tabId === id);
    if (!b || b.getAttribute('aria-selected') === 'true') return false;
    b.click();
    return true;
  };
  let tries = 0, scrolled = false;
  const go = () => {
    if (theirs) return;
    if (pick('#pg-tabs', spot.tab) | (spot.sub ? pick('#pg-inside-tabs', spot.sub) : false)) scrolled = false;
    const el = spot.id && document.getElementById(spot.id);
    if (!scrolled && el && el.offsetParent) { el.scrollIntoView({block: 'start', behavior: 'instant'}); scrolled = true; }
    if (tries++ < 200) setTimeout(go, 100);
  };
  go(); }"""


def target_of(state, pos, prompt, request=None) -> dict:
    """The target of the step the page shows, computed on the session's model and prompt ({} when
    the step cannot be asked)."""
    try:
        lesson, index = locate(position(request, pos))
        question, _ = lessons.ask(lesson.steps[index], session_model(state), prompt)
    except Exception:  # the step says why where it is drawn; Show me then opens nothing
        return {}
    return dict(question.target)


def prepare(state, pos, prompt, request: gr.Request = None) -> Prepared:
    """The target tab's controls set to the step's view (the rest left as they are); ``draw_view``
    opens the tab once the view is drawn."""
    target = target_of(state, pos, prompt, request)
    tab = target.get("tab")
    if tab is None:
        return skipped(Prepared)._replace(target={})
    out = {name: gr.skip() for name in Prepared._fields}
    out["target"], out["anchor"] = target, anchor(target)
    if tab == "generate":
        if target.get("text"):
            out["prompt"] = target["text"]
        if target.get("temperature") is not None:
            out["temperature"] = target["temperature"]
        if target.get("view"):
            out.update(view=target["view"], layer=target["layer"], head=target["head"], span=target["span"])
    elif tab == "tokenizer":
        out["tok_text"] = target["text"]
    elif tab == "compare":
        out["cmp_source"], out["cmp_text"] = SOURCES[0], target["text"]
    elif tab == "inside":
        if target.get("zero"):
            out["i_zero"] = target["zero"]
        if target.get("patch"):
            patch = {**target["patch"], "target": "path"}
            out.update({field: patch[key] for key, field in PATCH_FIELDS.items()})
    return Prepared(**out)


def run_for(target, state, prompt, temperature, top_k, top_p, max_new, seed, greedy):
    """A run of the lesson's prompt, for the tabs whose views read a run (outputs: state, chips, status)."""
    if (target or {}).get("tab") not in RUN_TABS:
        yield gr.skip(), gr.skip(), gr.skip()
        return
    yield from generate_tokens(state, prompt, temperature, top_k, top_p, max_new, seed, greedy)


def draw_generate(target, state, view, layer, head, log_scale, span, request: gr.Request = None) -> GenerateDrawn:
    """The Generate tab's attention view of the step (its query on the prompt's last token when the
    step asks about that token), and the step's token: the first generated for a step about the
    next token, else the last."""
    if (target or {}).get("tab") != "generate":
        return skipped(GenerateDrawn)
    attention = attention_views(state, view, layer, head, log_scale, target.get("query"), span, request)
    if target.get("step") is None:
        return GenerateDrawn(*attention, *last_step(state))
    step = last_step(state)
    first = {**step.step_slider, "value": target["step"]} if isinstance(step.step_slider, dict) else step.step_slider
    return GenerateDrawn(*attention, first, *inspect_step(state, target["step"]))


def draw_inside(target, state, seen_run, scroll, layer, position, cols, request: gr.Request = None) -> Opened:
    """The Inside tab opened on the step's view: the lens at the step's position, or the intervention
    the step made (the head removed), drawn for the run just made."""
    target = target or {}
    if target.get("tab") != "inside":
        return skipped(Opened)
    opened = open_tab(state, seen_run, scroll, layer, position, cols, request)._asdict()
    if target.get("sub") == "inside-lens":
        lens = lens_view(state, None, target["layer"], target["position"], cols)._asdict()
        lens["lens_msg"] = lens.pop("msg")
        opened.update(lens, lens_layer=target["layer"], lens_pos=target["position"])
    elif target.get("zero"):
        fields = (target["zero"], "", "", 0.0, "", "", False, target["position"], cols)  # the tab's own fields
        drawn = intervene_view(state, *fields)._asdict()
        if request is not None:  # a language switch draws it again, as one drawn by the tab's button
            note_drawn(request, "intervene", state, *fields)
        opened.update({k: drawn[k] for k in ("i_bars", "i_loss", "i_lens", "i_md")}, i_msg=drawn["msg"])
        opened["i_pos"] = target["position"]
    return Opened(**opened)


def draw_patching(target, state) -> PatchView:
    """The Inside tab's path patching of the step's pair: the grid of receivers and the chosen
    receiver's q, k and v, drawn as its Patch button draws them."""
    patch = (target or {}).get("patch")
    if not patch:
        return skipped(PatchView)
    return patched(state, **patch)


def draw_tokenizer(target, text, state, request: gr.Request = None) -> Tokens:
    if (target or {}).get("tab") != "tokenizer":
        return skipped(Tokens)
    return show_tokens(text, state, request=request)


def draw_compare(target, state, cmp_state, source, text, upload, replace, stride, request: gr.Request = None):
    """The Compare tab's per-token loss of the lesson's prompt (its text scored by the session's model)."""
    if (target or {}).get("tab") != "compare":
        return skipped(Scored)
    return score_a(state, cmp_state, source, text, upload, replace, stride, request=request)


def draw_train(target, state) -> TrainDrawn:
    """The Train tab's heads view of the run the lesson asked about (recorded: the session may have none)."""
    if (target or {}).get("tab") != "train":
        return skipped(TrainDrawn)
    view = recorded_view({"lang": lang_of(state), "present": bool((state or {}).get("present"))})
    return TrainDrawn(*view, gr.update(visible=True))


def draw_view(
    target,
    state,
    view,
    layer,
    head,
    log_scale,
    span,
    seen_run,
    scroll,
    lens_layer,
    lens_pos,
    cols,
    tok_text,
    cmp_state,
    source,
    cmp_text,
    upload,
    replace,
    stride,
    request: gr.Request = None,
) -> tuple:
    """The step's view in its tab, as one event (each queued event costs a round trip): the page's tab
    and the Inside tab's sub-tab selected, then the outputs of the Generate, Inside, Tokenizer and
    Compare views, the Inside tab's patching view and the Train tab's heads in that order, those of the other tabs unchanged. The tab opens only now, with its
    view drawn: a tab's own "opened" event (the Inside tab's) then sees this run, not the last one."""
    target = target or {}
    sub = gr.Tabs(selected=target["sub"]) if target.get("sub") else gr.skip()
    return (
        gr.Tabs(selected=target["tab"]) if target.get("tab") else gr.skip(),
        sub,
        *draw_generate(target, state, view, layer, head, log_scale, span, request),
        *draw_inside(target, state, seen_run, scroll, lens_layer, lens_pos, cols, request),
        *draw_tokenizer(target, tok_text, state, request),
        *draw_compare(target, state, cmp_state, source, cmp_text, upload, replace, stride, request),
        *draw_patching(target, state),
        *draw_train(target, state),
    )


def wire(page) -> None:
    """ "Show me in the full tab": the target tab's controls set (prepare), a run of the
    prompt when the view reads one, then the view drawn (one event for every tab's outputs: the others
    are left as they are), then scrolled into sight."""
    c, g, ins, tok, cmp = page.lessons, page.generate, page.inside, page.tokenizer, page.compare
    state = page.state
    prepared = Prepared(
        target=c.target,
        anchor=c.anchor,
        prompt=g.prompt,
        temperature=g.temperature,
        view=g.view,
        layer=g.layer,
        head=g.head,
        span=g.span,
        tok_text=tok.text,
        cmp_source=cmp.source,
        cmp_text=cmp.text,
        i_zero=ins.i_zero,
        **{field: getattr(ins.patching, field) for field in PATCH_FIELDS.values()},
    )
    private = {"api_visibility": "private"}
    gen_inputs = [c.target, state, g.prompt, g.temperature, g.top_k, g.top_p, g.max_new, g.seed, g.greedy]
    c.full.click(prepare, [state, c.lesson_pos, page.generate.prompt], list(prepared), api_name="lesson_show_me").then(
        run_for,
        gen_inputs,
        [state, g.chips, g.status],
        concurrency_id="generate",
        show_progress="hidden",
        **private,
    ).then(
        draw_view,
        [c.target, state, g.view, g.layer, g.head, g.log_scale, g.span]
        + [ins.seen_run, ins.lens_scroll, ins.lens_layer, ins.lens_pos, ins.lens_cols, tok.text]
        + [cmp.cmp_state, cmp.source, cmp.text, cmp.upload, cmp.replace, cmp.stride],
        [page.tabs, ins.sub_tabs]
        + outputs(GenerateDrawn, g)
        + outputs(Opened, ins)
        + outputs(Tokens, tok)
        + outputs(Scored, cmp)
        + outputs(PatchView, ins.patching)
        + outputs(TrainDrawn, page.train),
        **private,
    ).then(None, c.anchor, None, js=SCROLL_JS)
