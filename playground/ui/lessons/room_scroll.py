"""A following student's page scrolls to the view the teacher shows.

The teacher's page shows a view where the teacher put it: a head sweep sits below the Intervene controls,
the heatmap beside the tokens. A follower's page opens the same tab and draws the same figures, but its
window may be elsewhere (a smaller screen, a student who scrolled), so a follower saw the tab open and not
the figure. Each new view the page follows (a new Inside view, or a view of another run; a new Generate
run; another lesson step, on the Lessons tab) names the element to show in the offscreen ``#pg-room-scroll``; ``SCROLL_JS``, chained after each
poll, brings it into the window once, and only when less than half of it is in sight: a student who
scrolls while a sweep grows is not pulled back at each partial figure.
"""

from __future__ import annotations

import html
import secrets

# Per Inside view (``room_inside.VIEWS``), the element a follower is shown: the view's first figure
INSIDE = {
    "lens": "pg-lens",
    "dla": "pg-dla-heat",
    "maths": "pg-maths-table",
    "intervene": "pg-intervene-bars",
    "dose": "pg-dose",
    "sweep": "pg-sweep",
    "patch": "pg-patch-exact",
}
RUN = "pg-heatmap"  # a followed Generate run: its heatmap (the chips stand beside it)
STEP = "pg-lesson-step"  # the teacher's next lesson step: its text, question and figure

# Waits for the element to be laid out (the tab the poll opened renders after the poll's outputs), up to
# about a second; ``data-n`` names each scroll once, so a poll that changed nothing else never scrolls.
SCROLL_JS = """
() => {
  const mark = document.querySelector('#pg-room-scroll .pg-room-scroll');
  if (!mark || mark.dataset.n === window.pgRoomScrolled) return;
  window.pgRoomScrolled = mark.dataset.n;
  let tries = 0;
  const show = () => {
    const el = document.getElementById(mark.dataset.to);
    const box = el ? el.getBoundingClientRect() : null;
    if (!box || box.height === 0) { if (++tries < 20) setTimeout(show, 50); return; }
    const seen = Math.min(box.bottom, window.innerHeight) - Math.max(box.top, 0);
    if (seen >= Math.min(box.height, window.innerHeight) / 2) return;
    el.scrollIntoView({block: 'nearest', behavior: 'smooth'});
  };
  setTimeout(show, 0);
}
"""


def mark(element_id: str) -> str:
    """What ``SCROLL_JS`` reads: the element to show, under a new name each time."""
    return f"<span class='pg-room-scroll' data-to='{html.escape(element_id)}' data-n='{secrets.token_hex(4)}'></span>"


def scrolled(room: dict, published: dict, followed: dict, inside: dict) -> tuple[dict, str | None]:
    """(the page's room record, the mark to write, or None) after a poll that took ``followed`` (the run's
    outputs) and ``inside`` (the Inside view's) from the room's ``published`` state: a mark when the page
    now shows a view it has not been shown yet (an Inside view or a run is its kind and its run; a lesson
    step, on the Lessons tab, its lesson and step)."""
    view = None
    if "sub_tabs" in inside and isinstance(published.get("inside"), dict):
        record = published["inside"]
        if record.get("view") in INSIDE:
            view = [record["view"], record.get("id")]
    elif "chips" in followed and isinstance(published.get("run"), dict):
        view = ["run", published["run"].get("id")]
    elif published.get("lesson") and published.get("tab") in (None, "lessons"):
        view = ["step", published["lesson"], published.get("step", 0)]
    if view is None or view == room.get("scrolled"):
        return room, None
    to = INSIDE.get(view[0]) or {"run": RUN, "step": STEP}[view[0]]
    return {**room, "scrolled": view}, mark(to)
