"""The page's language and presenter mode, and everything that follows them.

The browser decides the language: Gradio translates labels by the browser's locale or the one chosen
in its Settings, and a hidden "probe" button (its label is the language code in each language)
shows which one is active. A script in the page watches the probe and the presenter toggle; when
either changes it remembers the choice (localStorage and the address: ``?lang=zh-CN``,
``?present=1``, so a reload or a shared link keeps it) and clicks a hidden button, whose event
tells the server. The server keeps both in the session state and redraws every text it built:
tab titles, choice labels, the summary, tables, status line, step text and figures.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import gradio as gr

from playground.i18n import EN, ZH

from . import generate_tab, model_tab, train_tab
from .attention_view import VIEW_KEYS, attention_views
from .chips import legend, status_html
from .common import T, choices, lang_of, session_model, session_run, tr
from .i18n import normalize_lang


def header() -> SimpleNamespace:
    """Title and subtitle, the presenter toggle, the language probe and the hidden "apply" button."""
    c = SimpleNamespace()
    with gr.Row(elem_id="pg-header", equal_height=True):
        c.title = gr.Markdown(f"# {EN['title']} · {ZH['title']}\n{EN['subtitle']}", elem_id="pg-title")
        c.present = gr.Checkbox(
            False, label=T("present"), elem_id="pg-present", scale=0, min_width=180, container=False
        )
    c.probe = gr.Button(T("lang_code"), elem_id="pg-lang-probe", elem_classes=["pg-offscreen"])
    c.apply = gr.Button("apply", elem_id="pg-prefs-apply", elem_classes=["pg-offscreen"])
    c.prefs = gr.Textbox(visible=False)
    return c


def parse_prefs(text) -> tuple[str, bool]:
    try:
        prefs = json.loads(text or "{}")
    except (TypeError, ValueError):
        prefs = {}
    prefs = prefs if isinstance(prefs, dict) else {}
    return normalize_lang(prefs.get("lang")), bool(prefs.get("present"))


def apply_prefs(prefs, state, train_state, view, layer, head, log_scale, query, step, depth):
    """Redraw every server-built text in the page's language (and figures at the presenter's size).

    The two session states are updated in place, not returned: an event that returned them could
    overwrite what a generation running at the same time stores there (its run's id)."""
    lang, present = parse_prefs(prefs)
    for holder in (state, train_state):
        if isinstance(holder, dict):
            holder.update(lang=lang, present=present)
    model = session_model(state)
    views = model_tab.model_views(
        model, state["recipe"], depth if isinstance(depth, (int, float)) else 3, lang, present
    )
    page = (
        f"# {EN['title']} · {ZH['title']}\n{tr(lang, 'subtitle')}",
        gr.update(value=present),
        gr.update(label=tr(lang, "tab_model")),
        gr.update(label=tr(lang, "tab_generate")),
        gr.update(label=tr(lang, "tab_train")),
    )
    breakdown, tree = (
        model_tab.table(views[i], key, lang, relabel=True) for i, key in ((2, "breakdown_headers"), (5, "tree_headers"))
    )
    model_part = (
        views[0],
        gr.update(choices=choices(model_tab.WEIGHT_KEYS, lang)),
        gr.update(choices=model_tab.preset_choices(lang)),
        gr.update(info=tr(lang, "dtype_info")),
        views[1],
        breakdown,
        views[3],
        views[4],
        tree,
    )
    return (
        page
        + model_part
        + _generate_part(state, lang, present, view, layer, head, log_scale, query, step)
        + _train_part(train_state, lang)
    )


def _generate_part(state, lang, present, view, layer, head, log_scale, query, step):
    """View choices, legend, head examples, status, attention figures and the step's text."""
    run = None
    try:
        run = session_run(state)
    except ValueError:
        pass
    if run is not None and run.id in generate_tab.STOP_FLAGS:  # still streaming: it redraws itself in the new language
        return (gr.update(choices=choices(VIEW_KEYS, lang)), legend(lang), gr.skip()) + (gr.skip(),) * 8
    _, head_labels = model_tab.head_examples(view, lang)
    fixed = (
        gr.update(choices=choices(VIEW_KEYS, lang)),
        legend(lang),
        gr.update(sample_labels=head_labels, label=tr(lang, "heads_label")) if head_labels else gr.skip(),
    )
    if run is None:  # nothing generated yet: the empty figures say so in the new language
        att = attention_views(state, view, layer, head, log_scale, None)
        return fixed + (gr.skip(),) + att + (gr.skip(), gr.skip(), gr.skip())
    status = status_html(run, run.elapsed, "stopped" if run.stopped else "done", lang)
    att = attention_views(state, view, layer, head, log_scale, query)
    steps = generate_tab.inspect_step(state, step) if run.steps else (gr.skip(),) * 3
    return fixed + (status,) + att + tuple(steps)


def _train_part(train_state, lang):
    from playground.server.jobs import JOBS

    job = JOBS.get((train_state or {}).get("job") or "")
    bool((train_state or {}).get("present"))
    progress = (
        (train_tab._loss_figure(job, train_state), train_tab._progress_html(job, lang))
        if job
        else (gr.skip(), gr.skip())
    )
    return (gr.update(choices=choices(train_tab.CORPUS_KEYS, lang)),) + progress


def on_change(page, fn, inputs: list, outputs: list) -> None:
    """For a tab of its own: ``fn(state, *inputs)`` redraws ``outputs`` after the page's language or
    presenter mode changed (read them with ``lang_of(state)`` and ``state.get("present")``). Call it
    from the tab's ``wire(page)``; the redraw runs after this module's own."""
    page.__dict__.setdefault("prefs_listeners", []).append((fn, inputs, outputs))


# Runs once in the page (``launch(js=...)``). Finds Gradio's own locale switch (the Settings
# panel's) to restore a remembered language, then watches the probe and the presenter toggle.
PAGE_JS = """
() => {
  const params = new URL(window.location.href).searchParams;
  const get = (k) => { try { return localStorage.getItem(k); } catch (e) { return null; } };
  const put = (k, v) => { try { localStorage.setItem(k, v); } catch (e) {} };
  const norm = (l) => (l || '').toLowerCase().startsWith('zh') ? 'zh-CN' : 'en';
  const probe = () => document.querySelector('#pg-lang-probe');
  const toggle = () => document.querySelector('#pg-present input[type=checkbox]');
  let wanted = params.get('lang') || get('pg-lang');
  const on = (v) => ['1', 'true', 'yes', 'on'].includes(String(v).toLowerCase());
  document.body.classList.toggle('pg-present', params.has('present') ? on(params.get('present')) : on(get('pg-present')));
  window.pgPrefs = () => ({lang: norm(probe()?.innerText.trim()), present: document.body.classList.contains('pg-present')});
  async function setLocale(lang) {
    const core = performance.getEntriesByType('resource').map(e => e.name)
      .find(n => /\\/assets\\/core-[^\\/]*\\.js$/.test(n));
    if (!core) return;
    try { (await import(core)).changeLocale(lang); } catch (e) { console.warn('language', e); }
  }
  let applied = null;
  async function tick() {
    const p = probe(), box = toggle();
    const summary = document.querySelector('#pg-summary');
    if (!p || !box || !summary || !summary.innerText.trim()) return;  // the session has not loaded yet
    if (wanted !== null) {
      const lang = norm(wanted);
      wanted = null;
      if (lang !== norm(p.innerText.trim())) { await setLocale(lang); return; }
    }
    const prefs = window.pgPrefs();
    const key = JSON.stringify(prefs);
    if (key === applied) return;
    applied = key;
    put('pg-lang', prefs.lang);
    put('pg-present', prefs.present ? '1' : '0');
    const url = new URL(window.location.href);
    url.searchParams.set('lang', prefs.lang);
    if (prefs.present) url.searchParams.set('present', '1'); else url.searchParams.delete('present');
    window.history.replaceState(null, '', url);
    document.querySelector('#pg-prefs-apply')?.click();
    setTimeout(() => window.dispatchEvent(new Event('resize')), 300);
  }
  setInterval(tick, 250);
}
"""

# The hidden "apply" button's event reads the page's preferences as it is sent.
READ_PREFS_JS = "(prefs, ...rest) => [JSON.stringify(window.pgPrefs ? window.pgPrefs() : {}), ...rest]"


def wire(page) -> None:
    m, g, t, h = page.model, page.generate, page.train, page.header
    inputs = [
        h.prefs,
        page.state,
        page.train_state,
        g.view,
        g.layer,
        g.head,
        g.log_scale,
        g.query,
        g.step_slider,
        m.tree_depth,
    ]
    outputs = [
        h.title,
        h.present,
        page.model_tab,
        page.generate_tab,
        page.train_tab,
        page.summary,
        m.weights,
        m.preset,
        m.dtype,
        m.tying_md,
        m.breakdown_df,
        m.treemap,
        m.memory_plot,
        m.tree_df,
        g.view,
        g.legend,
        g.head_examples.dataset if g.head_examples else g.head_box,
        g.status,
        g.heatmap,
        g.query_plot,
        g.query,
        g.att_msg,
        g.prob_plot,
        g.stages_plot,
        g.step_md,
        t.corpus_source,
        t.loss_plot,
        t.progress,
    ]
    # The toggle acts in the page at once (CSS); the watcher then tells the server (figures' type size).
    h.present.input(None, h.present, None, js="(v) => { document.body.classList.toggle('pg-present', v); }")
    event = h.apply.click(
        apply_prefs,
        inputs,
        outputs,
        js=READ_PREFS_JS,
        api_visibility="private",
        show_progress="hidden",
        trigger_mode="always_last",
    )
    # Every other tab's title (tabs added by their own modules: page.<name>_tab, key "tab_<name>"): a
    # title Gradio translated once would otherwise stay in the old language until the tab is opened.
    others = [
        (name[:-4], tab)
        for name, tab in vars(page).items()
        if name.endswith("_tab")
        and isinstance(tab, gr.Tab)
        and tab not in (page.model_tab, page.generate_tab, page.train_tab)
    ]
    if others:
        event.then(
            lambda state: tuple(gr.update(label=tr(lang_of(state), f"tab_{name}")) for name, _ in others),
            page.state,
            [tab for _, tab in others],
            api_visibility="private",
            show_progress="hidden",
        )
    from . import redraw

    page.demo.unload(redraw.forget)  # a closed page's drawn views (kept for redrawing them) are dropped
    for fn, extra_inputs, extra_outputs in getattr(page, "prefs_listeners", []):
        event.then(
            fn, [page.state] + list(extra_inputs), extra_outputs, api_visibility="private", show_progress="hidden"
        )
