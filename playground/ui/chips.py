"""Token chips and the status line; while a run streams, each update carries only the new chips.

The chips component's value is a *delta*: the HTML of the chips made since the last update (the
first one of a run starts with RESET, which clears the box). A few lines of JavaScript in the page
append each delta to the box, so an update costs the network and the browser the new chips, not
the whole run. (A HighlightedText resent and re-laid-out every chip on every token: quadratic in
the run's length; even an HTML string that only grows is re-parsed and re-compared whole by gr.HTML.)
"""

from __future__ import annotations

import html

from playground.figures import format_prob
from playground.i18n import tr
from playground.server.tokens import gpt2_tokenizer, token_view

# Chip colours by how sure the model was; white text on each is at least 4.5:1 (WCAG AA).
PROMPT_COLOR = "#4b5563"
SURE, UNSURE, SURPRISE = "#1d4ed8", "#b45309", "#b91c1c"


def chip_color(prob: float) -> str:
    return SURE if prob >= 0.5 else UNSURE if prob >= 0.1 else SURPRISE


def prompt_chips(prompt_ids: list[int], start_position: int = 0, tok=None) -> str:
    """``tok``: the tokenizer the ids mean (``engine.tokenizer.tokenizer_of``); GPT-2's when None."""
    tok = tok or gpt2_tokenizer()
    view = token_view(prompt_ids, tok)
    return "".join(
        _prompt_chip(start_position + t.position, t.id, *_fragment_label(t, view), tok=tok) for t in view.tokens
    )


def _prompt_chip(position: int, token_id: int, badge: str = "", note: str = "", tok=None) -> str:
    piece = (tok or gpt2_tokenizer()).piece(token_id)
    return (
        f"<span class='pg-chip pg-prompt{' pg-frag' if badge else ''}' data-pos='{position}' "
        f"title='position {position} · id {token_id} (prompt){html.escape(note, quote=True)}'>"
        f"{html.escape(piece.display)}<small>#{token_id}{html.escape(badge)}</small></span>"
    )


def step_chip(step, badge: str = "", note: str = "", tok=None) -> str:
    """One generated token: its text, id and probability; data-step lets a click find its step.
    badge/note: for a token that is only part of a character, which character (see _fragment_label)."""
    piece = (tok or gpt2_tokenizer()).piece(step.token_id)
    pct = format_prob(step.prob)
    return (
        f"<span class='pg-chip pg-gen{' pg-frag' if badge else ''}' style='background:{chip_color(step.prob)}' "
        f"data-pos='{step.position}' data-step='{step.index}' title='step {step.index} · position {step.position} · "
        f"id {step.token_id} · p {pct}{html.escape(note, quote=True)}'>{html.escape(piece.display)}"
        f"<small>{step.token_id} · {pct}{html.escape(badge)}</small></span>"
    )


def _fragment_label(token, view) -> tuple[str, str]:
    """(" · 从 1/2", " · bytes 1–2 of 3 of 从 (U+4ECE)") for a token that shares a character with
    its neighbours (from 从 = e4 bb + 8e); ("", "") for a token of whole characters."""
    group = view.groups[token.group]
    if len(group.positions) == 1 and not token.is_fragment:
        return "", ""
    if group.text is None:  # bytes that never became a character (a model can generate those)
        return " · ?", f" · {token.note}" if token.note else ""
    return (
        f" · {group.display} {group.positions.index(token.position) + 1}/{len(group.positions)}",
        f" · {token.note}" if token.note else "",
    )


RESET = "<!--reset-->"  # a delta that starts a new run: the page clears the box first


class ChipStream:
    """The chips of one run, extended a step at a time (each chip is formatted once).

    A token that ends inside a UTF-8 character (the first bytes of 从) waits for the token that
    finishes it, so both chips can say which character they build; the final delta sends any
    token still waiting."""

    def __init__(self, prompt_ids: list[int], tok=None):
        self._tok = tok or gpt2_tokenizer()  # the run's tokenizer: a checkpoint folder's own, else GPT-2's
        self._parts = [RESET]
        self._waiting: list = [(None, int(i), p) for p, i in enumerate(prompt_ids)]  # (step or None, id, position)
        self._sent = 0

    def add(self, step) -> None:
        self._waiting.append((step, int(step.token_id), step.position))

    def _format(self, final: bool) -> None:
        if not self._waiting:
            return
        view = token_view([i for _, i, _ in self._waiting], self._tok)
        last = view.groups[-1]
        n_ready = len(view.tokens) if final or last.complete else last.positions[0]
        for token, (step, token_id, position) in zip(view.tokens[:n_ready], self._waiting):
            label = _fragment_label(token, view)
            self._parts.append(
                _prompt_chip(position, token_id, *label, tok=self._tok)
                if step is None
                else step_chip(step, *label, tok=self._tok)
            )
        self._waiting = self._waiting[n_ready:]

    def delta(self, final: bool = False) -> str:
        """The chips not sent yet (the first delta of a run starts with RESET); ``final`` also sends
        a token still waiting for the rest of its character."""
        self._format(final)
        new = "".join(self._parts[self._sent :])
        self._sent = len(self._parts)
        return new

    def html(self) -> str:
        self._format(True)
        return "".join(self._parts)


def all_chips(run) -> str:
    """Every chip of a run as one value (RESET first): what the page shows for a finished run."""
    stream = ChipStream(run.prompt_ids, run.tokenizer)
    for step in run.steps:
        stream.add(step)
    return stream.html()


def status_html(
    run, elapsed: float, state: str, lang: str = "en", context_length: int | None = None, others: int = 0
) -> str:
    """state: running | done | stopped | error. The element carries it (and the count) for tests and tools.
    ``others``: how many other runs shared the run's latest decode step (said while it runs, so a slow
    rate in a full room reads as the room's, not the app's).

    The window it names is the one the attention views show (the run's last ``context_length``
    positions, run.window), so the status line and the figures' titles give the same start."""
    n = len(run.steps)
    rate = n / elapsed if elapsed > 0 else 0.0
    head = tr(lang, {"running": "st_running", "done": "st_done", "stopped": "st_stopped", "error": "st_error"}[state])
    count = (
        tr(lang, "st_after", n=n, max=run.settings.get("max_new_tokens"))
        if state == "stopped"
        else tr(lang, "st_token" if n == 1 else "st_tokens", n=n)
    )
    # (no rate before the first token: a run stopped before it started made none, at no speed)
    parts = [f"{head}{count} · {tr(lang, 'st_rate', rate=f'{rate:.1f}')}" if n else f"{head}{count}"]
    if state == "running" and others > 0:
        parts.append(tr(lang, "st_other" if others == 1 else "st_others", n=others))
    if run.n_cropped:
        parts.append(tr(lang, "st_cropped", n=run.n_cropped, context=len(run.prompt_ids)))
    start = run.steps[-1].context_start if run.steps else 0
    if context_length is not None:
        start = max(0, len(run.token_ids) - context_length)
    if start:
        parts.append(tr(lang, "st_window", start=start))
    return f"<div class='pg-status' data-state='{state}' data-tokens='{n}'>{html.escape(' · '.join(parts))}</div>"


def legend(lang: str = "en") -> str:
    swatch = "<span class='pg-swatch' style='background:{}'></span>".format
    return (
        "<div class='pg-legend'>"
        + html.escape(tr(lang, "legend", sure="\0", unsure="\1", surprise="\2"))
        .replace("\0", swatch(SURE))
        .replace("\1", swatch(UNSURE))
        .replace("\2", swatch(SURPRISE))
        + "</div>"
    )


LEGEND = legend()

CHIPS_TEMPLATE = "<div class='pg-chipbox'></div>"  # static: the script below fills it

# Runs in the browser once per page. Each new value is a delta: appended to the box (after clearing
# it when the delta starts a new run); chips already there are never re-parsed. A click on a chip
# marks it and sends its position to the server ("pick" event). While a run streams, the box
# follows the newest chip unless the reader has scrolled up.
CHIPS_JS = """
let follow = true;
let lastPos = -1;
const box = () => element.querySelector('.pg-chipbox');
function apply(delta) {
  const b = box();
  if (!b) return;
  if (!delta) return;  // nothing new since the last update
  if (delta.startsWith('RESET')) { b.replaceChildren(); lastPos = -1; follow = true; }
  const t = document.createElement('template');
  t.innerHTML = delta;
  const fresh = [];
  for (const chip of t.content.querySelectorAll('.pg-chip')) {
    const pos = Number(chip.dataset.pos);
    if (pos > lastPos) { fresh.push(chip); lastPos = pos; }  // a value delivered twice adds nothing
  }
  b.append(...fresh);
  if (follow) b.scrollTop = b.scrollHeight;
}
element.addEventListener('scroll', () => {
  const b = box();
  if (b) follow = b.scrollTop + b.clientHeight >= b.scrollHeight - 24;
}, true);
element.addEventListener('click', (event) => {
  const chip = event.target.closest('.pg-chip');
  if (!chip) return;
  element.querySelectorAll('.pg-chip.pg-selected').forEach(c => c.classList.remove('pg-selected'));
  chip.classList.add('pg-selected');
  trigger('pick', {position: Number(chip.dataset.pos)});
  const details = document.getElementById('pg-step-md');
  if (details) details.scrollIntoView({block: 'nearest', behavior: 'smooth'});
});
watch('value', () => apply(props.value));
apply(props.value);
""".replace("RESET", RESET)
