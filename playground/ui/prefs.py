"""The page's language and presenter mode: read them from the page, store them, have every tab redraw.

The browser decides the language: Gradio translates labels by the browser's locale or the one chosen
in its Settings, and a hidden "probe" button (its label is the language code in each language)
shows which one is active. A script in the page watches the probe and the presenter toggle; when
either changes it remembers the choice (localStorage and the address: ``?lang=zh-CN``,
``?present=1``, so a reload or a shared link keeps it) and clicks a hidden button, whose event
tells the server. The server keeps both in the session state, writes the header and the tabs'
titles again, then runs every redraw the tabs registered with ``listeners.on_change``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import gradio as gr

from playground.i18n import EN, ZH, normalize_lang

from . import listeners, redraw, skipped_outputs
from .common import T, tr


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


def apply_prefs(prefs, state, train_state):
    """Store the page's language and presenter mode, and write the header in it (title, toggle).

    The two session states are updated in place, not returned: an event that returned them could
    overwrite what a generation running at the same time stores there (its run's id). The tabs'
    redraws, chained after this event, read them from there."""
    lang, present = parse_prefs(prefs)
    for holder in (state, train_state):
        if isinstance(holder, dict):
            holder.update(lang=lang, present=present)
    return f"# {EN['title']} · {ZH['title']}\n{tr(lang, 'subtitle')}", gr.update(value=present)


def tab_titles(lang: str, names) -> list[str]:
    """The tabs' titles (key "tab_<name>") in ``lang``."""
    return [tr(lang, f"tab_{name}") for name in names]


# In the page's head, as soon as Gradio has set up its languages (before the tabs are drawn): a page
# asked for another language than the browser's (``?lang=``, or the one remembered) is switched at
# once and kept hidden until the probe shows that language, so no English label flashes on a
# Chinese page. PAGE_JS reveals it; a timer does too, should the switch fail.
HEAD = """<script>
(() => {
  const norm = (l) => (l || '').toLowerCase().startsWith('zh') ? 'zh-CN' : 'en';
  let stored = null;
  try { stored = localStorage.getItem('pg-lang'); } catch (e) {}
  const wanted = new URL(window.location.href).searchParams.get('lang') || stored;
  if (!wanted || norm(wanted) === norm(navigator.language)) return;
  const root = document.documentElement;
  root.style.visibility = 'hidden';
  window.pgReveal = () => { root.style.visibility = ''; };
  setTimeout(window.pgReveal, 10000);
  // Shown once the probe and every tab title are in that language (Gradio keeps a title it has
  // drawn; the server sends the titles again once it knows the page's language).
  const cjk = /[\u4e00-\u9fff]/;
  const settled = () => {
    const probe = document.querySelector('#pg-lang-probe');
    const tabs = [...document.querySelectorAll('button[role=tab]')].map(b => b.textContent.trim()).filter(Boolean);
    return probe && norm(probe.textContent.trim()) === norm(wanted) && tabs.length > 0
      && tabs.every(t => cjk.test(t) === (norm(wanted) === 'zh-CN'));
  };
  const shown = setInterval(() => { if (settled()) { clearInterval(shown); window.pgReveal(); } }, 50);
  const core = performance.getEntriesByType('resource').map(e => e.name)
    .find(n => /\\/assets\\/core-[^\\/]*\\.js$/.test(n));
  if (core) import(core).then(m => m.changeLocale(norm(wanted))).catch(e => console.warn('language', e));
})();
</script>"""

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
  window.pgPrefs = () => ({lang: norm(probe()?.textContent.trim()), present: document.body.classList.contains('pg-present')});
  async function setLocale(lang) {
    const core = performance.getEntriesByType('resource').map(e => e.name)
      .find(n => /\\/assets\\/core-[^\\/]*\\.js$/.test(n));
    if (!core) return;
    try { (await import(core)).changeLocale(lang); } catch (e) { console.warn('language', e); }
  }
  let applied = null;
  // A switch asked for and not yet shown by the probe: Gradio loads a language's messages on its
  // own time, and a tick that read the old language meanwhile would store it over the one asked for.
  let pending = null;
  async function tick() {
    const p = probe(), box = toggle();
    // The session's load ends before a preference is sent: its answer replaces the session's state, so
    // a language stored in the state before it would be lost (the summary's own text is no sign: it
    // shows Gradio's "processing" while it loads). Should the load fail, the page goes on after 30 s.
    if (!p || !box || !(window.pgSessionLoaded || performance.now() > 30000)) return;
    if (wanted !== null) {
      const lang = norm(wanted);
      wanted = null;
      if (lang !== norm(p.textContent.trim())) {
        pending = {lang, until: Date.now() + 15000};
        await setLocale(lang);
        return;
      }
    }
    if (pending) {
      if (norm(p.textContent.trim()) !== pending.lang && Date.now() < pending.until) return;
      pending = null;
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

# Chained after the page's session is made (model.tab.load_session): PAGE_JS sends no preference before.
LOADED_JS = "() => { window.pgSessionLoaded = true; }"

# The hidden "apply" button's event reads the page's preferences as it is sent.
READ_PREFS_JS = "(prefs, ...rest) => [JSON.stringify(window.pgPrefs ? window.pgPrefs() : {}), ...rest]"


def wire(page) -> None:
    """Call after every tab's ``wire``: the redraws they registered run after the header's."""
    h = page.header
    # The toggle acts in the page at once (CSS); the watcher then tells the server (figures' type size).
    h.present.input(None, h.present, None, js="(v) => { document.body.classList.toggle('pg-present', v); }")
    # (after a room's link has given the page the room's model, when the Lessons tab wired one)
    getattr(page, "room_entered", page.session_loaded).then(None, None, None, js=LOADED_JS)
    event = h.apply.click(
        apply_prefs,
        [h.prefs, page.state, page.train_state],
        [h.title, h.present],
        js=READ_PREFS_JS,
        api_visibility="private",
        show_progress="hidden",
        trigger_mode="always_last",
    )
    # Every tab's title: page.<name>_tab, key "tab_<name>".
    tabs = [(name[:-4], tab) for name, tab in vars(page).items() if name.endswith("_tab") and isinstance(tab, gr.Tab)]
    names = [name for name, _ in tabs]
    titles = {lang: tab_titles(lang, names) for lang in ("en", "zh-CN")}
    event.then(None, None, [tab for _, tab in tabs], js=listeners.titles_js(titles))
    page.demo.unload(redraw.forget)  # a closed page's drawn views (kept for redrawing them) are dropped
    # Every registered redraw in one event, and what runs after their answer in a second: the page's first
    # preferences run them all, and as events of their own they cost the server a few ms each.
    parts, afters = [], []
    for fn, inputs, outputs, then in listeners.registered(page):
        if isinstance(fn, str):  # a script run in the page (listeners.on_change_titles)
            event.then(None, None, outputs, js=fn)
            continue
        parts.append((fn, inputs, outputs))
        if then is not None:
            afters.append(then)
    quiet = {"api_visibility": "private", "show_progress": "hidden"}
    redrawn = event.then(*listeners.combined(page.state, parts), **quiet)
    # (the choices and labels a redraw sets are mostly those the page shows: a page's first preferences are
    # nearly always the language it was drawn in)
    skipped_outputs.same_props_sent(page.demo, redrawn)
    if afters:
        skipped_outputs.same_props_sent(page.demo, redrawn.then(*listeners.combined(page.state, afters), **quiet))
