"""bench --browser reads a run's token ids from its chips in the page: the chips the app draws,
prompt and generated, whole characters and UTF-8 fragments, give back exactly the run's ids; and it
clicks the Inside views asked for (--inside-views, --inside-reps)."""

from html.parser import HTMLParser
from types import SimpleNamespace

import pytest

from bench.browser.inside_views import ids_from_chip_titles
from playground.engine.tokenizer import load_tokenizer
from playground.ui.chips import ChipStream


class _Titles(HTMLParser):
    def __init__(self):
        super().__init__()
        self.titles = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "pg-chip" in (attrs.get("class") or "") and "data-pos" in attrs:
            self.titles.append(attrs["title"])


def _chip_titles(prompt_ids, generated_ids):
    stream = ChipStream(prompt_ids)
    for i, token_id in enumerate(generated_ids):
        stream.add(SimpleNamespace(token_id=token_id, position=len(prompt_ids) + i, index=i, prob=0.25))
    parser = _Titles()
    parser.feed(stream.html())
    return parser.titles


def test_the_chips_titles_give_back_the_runs_ids():
    tok = load_tokenizer()
    prompt = tok.encode("The cat said 从前 to the dog")  # 从 is two tokens: fragment chips
    generated = tok.encode(" and then 从 sat")
    titles = _chip_titles(prompt, generated)
    assert len(titles) == len(prompt) + len(generated)
    assert ids_from_chip_titles(titles) == prompt + generated


def test_a_gap_in_the_positions_is_refused():
    titles = _chip_titles([464, 3797, 531], [257])
    with pytest.raises(RuntimeError, match="not one run"):
        ids_from_chip_titles(titles[:1] + titles[2:])


def test_bench_clicks_the_chosen_inside_views_after_opening_the_tab():
    from bench.browser.inside_views import chosen_views, views

    every = views(256, 12, 12)
    names = [v["name"] for v in chosen_views(every, ["intervention", "dose"], reps=2)]
    assert names[0] == every[0]["name"] and every[0]["tab"] is None  # the lens: opening the tab, once
    assert [n.split(" ")[0] for n in names[1:]] == ["intervention", "intervention", "dose-response", "dose-response"]
    assert chosen_views(every) == every
