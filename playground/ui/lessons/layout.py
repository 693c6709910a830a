"""The Lessons tab's components and their events (its handlers are in ``tab``).

The tab reads the session's model and the Generate tab's prompt, so opening it again after a
change elsewhere draws the step again on what is there now. ``PAGE_JS`` remembers the tab a
visitor last used and opens it on their next visit (a link that names a tab or a lesson wins).
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from playground.ui import listeners
from playground.ui.common import T
from playground.ui.results import outputs
from playground.ui.widgets import Dropdown, Radio

from . import room as lessons_room
from . import room_layout, room_views
from . import tab as lessons_tab

CSS = (
    """
.pg-lesson-toks { display: flex; flex-wrap: wrap; gap: 6px; }
.pg-lesson-tok { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 2px 6px;
  white-space: pre; font-family: var(--font-mono); }
.pg-lesson-tok small { margin-left: 4px; opacity: 0.65; font-size: 0.75em; }
.pg-lesson-reveal { padding: 8px 10px; border-radius: 6px; border-left: 4px solid; }
.pg-lesson-reveal.pg-right { border-color: #2ca02c; background: rgba(44, 160, 44, 0.10); }
.pg-lesson-reveal.pg-wrong { border-color: #d62728; background: rgba(214, 39, 40, 0.08); }
#pg-lesson-choice .wrap { flex-wrap: wrap; }
#pg-lesson-nav { align-items: flex-end; }
#pg-lesson-nav > button { max-height: 3em; }
body.pg-present .pg-lesson-tok { font-size: 22px; }
.pg-lesson-uncut .pg-lesson-text { border: 1px dashed var(--border-color-primary); border-radius: 6px; padding: 4px 8px;
  white-space: pre-wrap; font-family: var(--font-mono); }
/* Until a lesson question that asks for a header figure is answered, the header shows "?" in its place.
   PAGE_JS mirrors the question's data-hide onto the body while the Lessons tab is open: a body:has()
   over the whole page here would be matched again at every style update plotly forces while drawing. */
body[data-pg-hide~=n] #pg-summary .pg-fig-n > span, body[data-pg-hide~=d] #pg-summary .pg-fig-d > span {
  display: none; }
body[data-pg-hide~=n] #pg-summary .pg-fig-n::before, body[data-pg-hide~=d] #pg-summary .pg-fig-d::before {
  content: "?"; }
"""
    + room_views.CSS
)

# After a guess: the verdict in view (on a 1024×768 projector it sits below the first screen's fold).
SCROLL_TO_REVEAL_JS = """() => { const r = document.querySelector('#pg-lesson-reveal');
  if (r) r.scrollIntoView({block: 'nearest', behavior: 'instant'}); }"""

# Runs once in the page: remember the main tab a visitor opens; on the next visit open it again.
PAGE_JS = """
() => {
  const params = new URL(window.location.href).searchParams;
  const get = (k) => { try { return localStorage.getItem(k); } catch (e) { return null; } };
  const put = (k, v) => { try { localStorage.setItem(k, v); } catch (e) {} };
  const mainTabs = () => {
    const root = document.querySelector('#pg-tabs');
    return root ? Array.from(root.querySelectorAll('button[role=tab]')).filter(b => b.closest('.tabs') === root) : [];
  };
  let restored = ['tab', 'lesson', 'prompt', 'room'].some(k => params.has(k));
  // The header figures a lesson's open question asks for (its data-hide), while the Lessons tab is open.
  const asking = document.getElementsByClassName('pg-lesson-asking');
  const hideAsked = () => {
    const tab = document.querySelector('#pg-tabs button[role=tab][data-tab-id=lessons]');
    const open = tab && tab.getAttribute('aria-selected') === 'true';
    const hide = open && asking.length ? asking[0].getAttribute('data-hide') || '' : '';
    if ((document.body.getAttribute('data-pg-hide') || '') !== hide) document.body.setAttribute('data-pg-hide', hide);
  };
  new MutationObserver(hideAsked).observe(document.body, {subtree: true, childList: true, attributes: true,
    attributeFilter: ['aria-selected', 'data-hide']});
  hideAsked();
  document.addEventListener('click', (e) => {
    const b = e.target.closest && e.target.closest('button[role=tab]');
    const i = mainTabs().indexOf(b);
    if (i >= 0) put('pg-tab', String(i));
  }, true);
  const timer = setInterval(() => {
    const summary = document.querySelector('#pg-summary');
    const tabs = mainTabs();
    if (!summary || !summary.innerText.trim() || !tabs.length) return;  // the session has not loaded yet
    clearInterval(timer);
    if (restored) return;
    restored = true;
    const i = parseInt(get('pg-tab') || '0', 10);
    if (i > 0 && i < tabs.length) tabs[i].click();
  }, 250);
}
"""


def layout() -> SimpleNamespace:
    c = SimpleNamespace()
    c.lesson_pos = gr.State(lessons_tab.first_position())
    c.target = gr.State({})  # where the step's view lives in the full tab (ui.show_me)
    # the id of the element that shows it, read by the page's script once it is drawn (a State never
    # reaches the page)
    c.anchor = gr.Textbox(
        "", show_label=False, container=False, elem_id="pg-lesson-anchor", elem_classes=["pg-offscreen"]
    )
    gr.Markdown(T("lesson_intro"), elem_id="pg-lesson-intro")
    c.__dict__.update(vars(room_layout.layout()))  # classroom mode: a room to lead or follow
    with gr.Row(elem_id="pg-lesson-nav"):
        c.lesson_pick = Dropdown(
            lessons_tab.lesson_choices("en"), label=T("lesson_pick"), elem_id="pg-lesson-pick", scale=2, min_width=220
        )
        c.back = gr.Button(T("lesson_back"), elem_id="pg-lesson-back", scale=1, min_width=100)
        c.next = gr.Button(T("lesson_next"), variant="primary", elem_id="pg-lesson-next", scale=1, min_width=100)
    c.progress = gr.Markdown(elem_id="pg-lesson-progress")
    with gr.Row(elem_id="pg-lesson-step"):
        with gr.Column(scale=2, min_width=280):
            c.text = gr.Markdown(elem_id="pg-lesson-text")
            c.question = gr.Markdown(elem_id="pg-lesson-question")
            c.choice = Radio([], label=T("lesson_guess"), elem_id="pg-lesson-choice")
            c.reveal = gr.HTML(elem_id="pg-lesson-reveal")
            c.full = gr.Button(T("lesson_full"), size="sm", elem_id="pg-lesson-full")
        with gr.Column(scale=3, min_width=300):
            c.plot = gr.Plot(lessons_tab.BLANK, show_label=False, elem_id="pg-lesson-plot", visible="hidden")
            c.tokens_html = gr.HTML(elem_id="pg-lesson-tokens", visible=False)
    return c


def wire(page) -> None:
    c, prompt = page.lessons, page.generate.prompt
    shown = outputs(lessons_tab.Shown, c)
    page.demo.load(
        lessons_tab.open_from_link,
        [page.state, prompt],
        shown + [page.tabs],
        api_visibility="private",
    )
    # after a move, a teacher's page publishes the step to its room; a student's has stepped away
    moved = (
        lessons_room.publish_move,
        [page.state, c.room, c.lesson_pos, prompt],
        [c.room, c.room_status, c.choice, c.room_follow],
    )
    c.next.click(lessons_tab.next_step, [page.state, c.lesson_pos, prompt], shown, api_name="lesson_next").then(
        *moved, api_visibility="private"
    )
    c.back.click(lessons_tab.step_back, [page.state, c.lesson_pos, prompt], shown, api_name="lesson_back").then(
        *moved, api_visibility="private"
    )
    c.lesson_pick.input(
        lessons_tab.open_lesson,
        [page.state, c.lesson_pick, prompt],
        shown,
        api_name="lesson_open",
    ).then(*moved, api_visibility="private")
    lessons_room.wire(page)
    c.choice.input(
        lessons_tab.answer,
        [page.state, c.lesson_pos, prompt, c.choice],
        outputs(lessons_tab.Revealed, c),
        api_name="lesson_answer",
    ).then(None, None, None, js=SCROLL_TO_REVEAL_JS)
    # The model or the prompt may have changed in another tab: draw the step on what is there now.
    page.lessons_tab.select(
        lessons_tab.show_here, [page.state, c.lesson_pos, prompt, c.choice], shown, api_visibility="private"
    )
    step_inputs = [c.lesson_pos, prompt, c.choice]
    listeners.on_change(
        page, lessons_tab.redraw, step_inputs, shown, then=(lessons_tab.redrawn_again, step_inputs, shown)
    )
