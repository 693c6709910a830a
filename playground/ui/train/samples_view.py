"""The Train tab's samples: before training, now or after, and at every logged step.

The job writes them (playground.server.train_samples); this draws them. A newline is shown as ↵, as
on the token chips, so a sample of mostly newlines reads as such instead of as blank space.
"""

from __future__ import annotations

import html
from types import SimpleNamespace

from playground.server.train_samples import SAMPLE_SEED, SAMPLE_SETTINGS, decoded
from playground.ui import redraw
from playground.ui.common import tr

CSS = """
#pg-train-samples .pg-sample { margin: 4px 0; padding: 6px 10px; border-radius: 6px;
  border-left: 4px solid var(--border-color-primary); font-size: 15px; overflow-wrap: anywhere; }
#pg-train-samples .pg-sample b { display: block; font-size: 13px; opacity: 0.8; }
#pg-train-samples .pg-sample-prompt { font-weight: 600; text-decoration: underline dotted; }
#pg-train-samples .pg-sample[data-kind=after] { border-left-color: #2563eb; }
#pg-train-samples .pg-samples-title { font-size: 14px; margin: 2px 0 6px; }
body.pg-present #pg-train-samples .pg-sample { font-size: 18px !important; }
body.pg-present #pg-train-samples .pg-sample b { font-size: 15px !important; }
"""


def _shown(text: str) -> str:
    return html.escape(text.replace("\n", "↵ "))


def _sample(kind: str, label: str, step: int, prompt: str, ids: list[int]) -> str:
    text = decoded(ids)
    return (
        f"<div class='pg-sample' data-kind='{kind}' data-step='{step}' data-text='{html.escape(text, quote=True)}'>"
        f"<b>{html.escape(label)}</b><span class='pg-sample-prompt'>{_shown(prompt)}</span>{_shown(text)}</div>"
    )


def samples_html(job, lang: str = "en", finished: bool = False) -> str:
    """Before (step 0) and the newest sample (labelled "now" while the run goes on, "after" once it
    has ended: ``finished``), then every logged step's under a fold. Empty-handed before the first."""
    if job is None:
        return f"<div class='pg-samples-title'>{html.escape(tr(lang, 'samples_none'))}</div>"
    samples = list(job.samples)  # the job's thread appends to it
    prompt = decoded(job.sample_prompt)
    title = tr(
        lang,
        "samples_title",
        prompt=prompt.replace("\n", "↵"),
        seed=SAMPLE_SEED,
        temperature=SAMPLE_SETTINGS["temperature"],
        top_k=SAMPLE_SETTINGS["top_k"],
    )
    parts = [
        f"<div class='pg-samples' data-samples='{len(samples)}'>",
        f"<div class='pg-samples-title'>{html.escape(title)}</div>",
    ]
    if samples:
        step, ids = samples[0]
        parts.append(_sample("before", tr(lang, "sample_before"), step, prompt, ids))
    if len(samples) > 1:
        step, ids = samples[-1]
        kind, key = ("after", "sample_after") if finished else ("now", "sample_now")
        parts.append(_sample(kind, tr(lang, key, step=f"{step:,}"), step, prompt, ids))
        rows = "".join(
            _sample("step", tr(lang, "sample_step", step=f"{step:,}"), step, prompt, ids) for step, ids in samples
        )
        parts.append(
            f"<details><summary>{html.escape(tr(lang, 'samples_all', n=len(samples)))}</summary>{rows}</details>"
        )
    parts.append("</div>")
    return "".join(parts)


def samples(request, lang: str, job, finished: bool = False) -> str:
    """The run's samples now, remembered to be drawn again in another language (``redraw``): a copy
    of them, not the job, which holds the model and its optimizer for as long as it is referenced."""
    record = None if job is None else SimpleNamespace(samples=list(job.samples), sample_prompt=list(job.sample_prompt))
    redraw.remember(request, "train_samples", lambda lang, present=False: samples_html(record, lang, finished))
    return samples_html(record, lang, finished)


def samples_again(request, lang: str) -> str:
    """The tab's samples drawn again in ``lang`` (after a change of language, and at every page load):
    the run's, or before any run the note that says they will come."""
    shown = redraw.redraw(request, "train_samples", lang, False, 1)[0]
    return samples(request, lang, None) if isinstance(shown, dict) and shown.get("__type__") == "update" else shown
