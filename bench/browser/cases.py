"""The cases the browser benchmark runs: Chromium's path, the models, the prompts, the targets, a run's figures."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1600, "height": 1000}

MODELS = {
    "bundled": {"label": "bundled (Tiny Shakespeare, 7.7M)"},
    "gpt2-small": {
        "label": "GPT-2 small shape, random init (124M)",
        "preset": "gpt2-small",
        "summary": "12 layers × 12 heads, d=768",
    },
}
SHORT_PROMPT = "ROMEO:\n"

# Targets of issue 9.
RATIO_TARGET = 1.3  # browser time / API time for the same run
LONGTASK_TARGET_S = 0.2  # the page's main thread is never busy longer than this at a time
STOP_TARGET_S = 0.5  # click Stop -> no new chips and the status says stopped
UPDATE_GROWTH_TARGET = 1.5  # largest streamed update per new token, of the longest run / of the shortest run


def long_prompt(n_words: int = 300, seed: int = 9) -> str:
    """A fixed, procedurally generated English paragraph of ``n_words`` words (not Shakespeare)."""
    rng = random.Random(seed)
    subjects = [
        "the engineer",
        "a small team",
        "the new library",
        "our visitor",
        "the old bridge",
        "every student",
        "the committee",
        "a quiet neighbour",
        "the morning train",
        "the city council",
        "my sister",
        "the research group",
    ]
    verbs = [
        "reviewed",
        "described",
        "repaired",
        "questioned",
        "measured",
        "painted",
        "explained",
        "opened",
        "carried",
        "followed",
        "planned",
        "improved",
    ]
    objects = [
        "the long report",
        "a careful plan",
        "the broken window",
        "several maps",
        "the spring garden",
        "a box of letters",
        "the weekly budget",
        "the village road",
        "an unusual idea",
        "the museum hall",
        "the harbour lights",
        "a simple question",
    ]
    tails = [
        "before the rain began",
        "after a long discussion",
        "with great patience",
        "without any help",
        "during the summer holidays",
        "because nobody else would",
        "in the early evening",
        "while the others waited outside",
        "for the first time in years",
        "as the clock struck nine",
    ]
    words: list[str] = []
    while len(words) < n_words:
        sentence = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)}"
        if rng.random() < 0.4:
            sentence += f", and {rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
        words.extend((sentence[0].upper() + sentence[1:] + ".").split())
    text = " ".join(words[:n_words])
    return text if text.endswith(".") else text.rstrip(",") + "."


# Installed before any page script runs: long tasks, the SSE messages, clicks, and (once the app


@dataclass
class RunResult:
    model: str
    prompt: str  # "short" | "300 words"
    max_new: int
    api_s: float | None = None
    api_first_s: float | None = None
    api_updates: int | None = None
    api_error: str | None = None
    browser_s: float | None = None
    first_chip_s: float | None = None
    heatmap_s: float | None = None
    timed_out_s: float | None = None
    chips_at_end: int | None = None
    status_tokens: int | None = None
    longest_task_s: float | None = None
    long_task_total_s: float | None = None
    long_tasks: int | None = None
    updates: int | None = None
    update_bytes_median: float | None = None
    update_bytes_max: int | None = None
    update_token_bytes_max: float | None = None  # the largest update after the first, per new token it carries
    update_bytes_last: int | None = None
    final_bytes: int | None = None
    first_update_bytes: int | None = None
    done_s: float | None = None  # status done with every chip (browser_s also waits for the heatmap)
    total_bytes: int | None = None
    cdp_bytes: int | None = None
    view_switch_s: float | None = None
    view_switch_longest_task_s: float | None = None
    error: str | None = None
    notes: list = field(default_factory=list)

    @property
    def ratio(self):
        if self.browser_s is None or not self.api_s:
            return None
        return self.browser_s / self.api_s
