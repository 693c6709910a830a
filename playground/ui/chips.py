"""Token chips and the status line as HTML that only grows while a run streams.

Gradio sends a streamed output as a diff against the previous one, and a string that extends
the previous string travels as an "append" of the new part. So the chips are one HTML string
built in order: each update costs the network and the browser the new chips, not the whole run
(a HighlightedText resent and re-laid-out every chip on every token: quadratic in the run).
"""

from __future__ import annotations

import html

from ..figures import format_prob
from ..tokenizer import load_tokenizer

# Chip colours by how sure the model was; white text on each is at least 4.5:1 (WCAG AA).
PROMPT_COLOR = "#4b5563"
SURE, UNSURE, SURPRISE = "#1d4ed8", "#b45309", "#b91c1c"


def chip_color(prob: float) -> str:
    return SURE if prob >= 0.5 else UNSURE if prob >= 0.1 else SURPRISE


def prompt_chips(prompt_ids: list[int], start_position: int = 0) -> str:
    tok = load_tokenizer()
    return "".join(
        f"<span class='pg-chip pg-prompt' data-pos='{start_position + i}' title='position {start_position + i} · "
        f"id {p.id} (prompt)'>{html.escape(p.display)}<small>#{p.id}</small></span>"
        for i, p in enumerate(tok.pieces(prompt_ids))
    )


def step_chip(step) -> str:
    """One generated token: its text, id and probability; data-step lets a click find its step."""
    piece = load_tokenizer().piece(step.token_id)
    pct = format_prob(step.prob)
    return (
        f"<span class='pg-chip pg-gen' style='background:{chip_color(step.prob)}' data-pos='{step.position}' "
        f"data-step='{step.index}' title='step {step.index} · position {step.position} · id {step.token_id} · "
        f"p {pct}'>{html.escape(piece.display)}<small>{step.token_id} · {pct}</small></span>"
    )


class ChipStream:
    """The chips of one run, extended a step at a time (each chip is formatted once)."""

    def __init__(self, prompt_ids: list[int]):
        self._parts = [prompt_chips(prompt_ids)]

    def add(self, step) -> None:
        self._parts.append(step_chip(step))

    def html(self) -> str:
        return "".join(self._parts)


def all_chips(run) -> str:
    stream = ChipStream(run.prompt_ids)
    for step in run.steps:
        stream.add(step)
    return stream.html()


def status_html(run, elapsed: float, state: str) -> str:
    """state: running | done | stopped. The element carries it (and the count) for tests and tools."""
    n = len(run.steps)
    rate = n / elapsed if elapsed > 0 else 0.0
    head = {"running": "Generating", "done": "Done", "stopped": "Stopped by you"}[state]
    parts = [f"{head}: {n} token{'s' if n != 1 else ''} · {rate:.1f} tokens/s"]
    if state == "stopped":
        asked = run.settings.get("max_new_tokens")
        parts[0] = f"{head} after {n} of {asked} tokens · {rate:.1f} tokens/s"
    if run.n_cropped:
        parts.append(f"the prompt was cropped by {run.n_cropped} tokens from the left to fit the "
                     f"{len(run.prompt_ids)}-token context window")
    if run.steps and run.steps[-1].context_start:
        parts.append(f"the window now starts at position {run.steps[-1].context_start} (older tokens fall out)")
    return (f"<div class='pg-status' data-state='{state}' data-tokens='{n}'>"
            f"{html.escape(' · '.join(parts))}</div>")


LEGEND = (
    "Grey: prompt tokens (with their ids). Generated tokens show id · probability: "
    f"<span class='pg-swatch' style='background:{SURE}'></span> ≥ 50% · "
    f"<span class='pg-swatch' style='background:{UNSURE}'></span> 10–50% · "
    f"<span class='pg-swatch' style='background:{SURPRISE}'></span> < 10%. Click a token to inspect it."
)

# Runs in the browser once: a click on a chip marks it, keeps the marking across re-renders, and
# sends its position to the server ("pick" event). While a run streams, the box follows the
# newest chip unless the reader has scrolled up.
CHIPS_JS = """
let selected = null;
let follow = true;
const box = () => element.querySelector('.pg-chipbox') || element;
function mark() {
  element.querySelectorAll('.pg-chip.pg-selected').forEach(c => c.classList.remove('pg-selected'));
  if (selected === null) return;
  const chip = element.querySelector(`.pg-chip[data-pos="${selected}"]`);
  if (chip) chip.classList.add('pg-selected');
}
element.addEventListener('scroll', () => {
  const b = box();
  follow = b.scrollTop + b.clientHeight >= b.scrollHeight - 24;
}, true);
element.addEventListener('click', (event) => {
  const chip = event.target.closest('.pg-chip');
  if (!chip) return;
  selected = Number(chip.dataset.pos);
  mark();
  trigger('pick', {position: selected});
  const details = document.getElementById('pg-step-md');
  if (details) details.scrollIntoView({block: 'nearest', behavior: 'smooth'});
});
watch('value', () => {
  if (!element.querySelector('.pg-gen')) selected = null;  // a new run
  mark();
  const b = box();
  if (follow) b.scrollTop = b.scrollHeight;
});
"""
