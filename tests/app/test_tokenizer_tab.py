"""The Tokenizer tab's handlers and API, and the Generate tab's chips for byte fragments (the views
themselves are checked in tests/unit/test_bpe.py)."""

import html
import re

import pytest

from playground.engine.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_api_endpoints_give_plain_numbers(tok):
    from playground.ui.tokenizer.tab import bpe_merges_api, tokenize_api

    out = tokenize_api("从 x")
    assert [t["id"] for t in out["tokens"]] == tok.encode("从 x")
    assert out["tokens"][0]["bytes"] == [0xE4, 0xBB] and out["tokens"][0]["text"] is None
    assert out["groups"][0] == {"index": 0, "positions": [0, 1], "bytes": [0xE4, 0xBB, 0x8E], "text": "从"}
    assert out["n_bytes"] == len("从 x".encode())
    merges = bpe_merges_api("unbelievable")["words"][0]
    assert merges["token_ids"] == tok.encode("unbelievable")
    assert merges["bytes"] == list(b"unbelievable")
    assert all(isinstance(s["rank"], int) and s["merged_id"] == 256 + s["rank"] for s in merges["steps"])
    assert tokenize_api(None)["n_tokens"] == 0
    assert "error" in tokenize_api(5) and "error" in bpe_merges_api("x" * 300)
    assert "20,000" in tokenize_api("a" * 20_001)["error"]


def test_tab_shows_groups_table_and_the_most_split_word(tok):
    from playground.ui.tokenizer.tab import show_tokens

    summary, chips, rows, word, merges = show_tokens("Unbelievable 从")
    ids = tok.encode("Unbelievable 从")
    assert f"data-tokens='{len(ids)}'" in summary and f"{len(ids)} tokens" in summary
    assert [r[1] for r in rows] == ids
    chars = re.findall(r"data-chars='([^']*)'", chips)
    assert [html.unescape(c) for c in chars] == ["从"]
    assert chips.count("class='pg-tok'") == len(ids)
    assert word["value"] == "Unbelievable" and ("␣从", " 从") in word["choices"]  # 9 merges against 0
    assert "data-tokens='4'" in merges and "Un + bel" not in merges  # 4 tokens: Un, bel, iev, able
    assert re.findall(r"data-rank='(\d+)'", merges)
    summary, *rest = show_tokens(3)
    assert "⚠️" in summary and all(isinstance(x, type(rest[0])) for x in rest)


def test_generate_chips_say_which_character_fragments_build(tok):
    from playground.ui.chips import ChipStream, prompt_chips

    chips = prompt_chips(tok.encode("从x"))
    assert "bytes 1–2 of 3 of 从 (U+4ECE)" in chips and "#20015 · 从 1/2" in chips and "#236 · 从 2/2" in chips

    class Step:
        def __init__(self, index, token_id, position):
            self.index, self.token_id, self.position, self.prob = index, token_id, position, 0.5

    stream = ChipStream(tok.encode("Hi"))
    stream.delta()
    stream.add(Step(0, 20015, 1))  # e4 bb: waits for the rest of its character
    assert stream.delta() == ""
    stream.add(Step(1, 236, 2))  # 8e: 从 is complete, both chips go out naming it
    both = stream.delta()
    assert both.count("class='pg-chip") == 2 and "从 1/2" in both and "从 2/2" in both
    stream.add(Step(2, 20015, 3))
    last = stream.delta(final=True)  # the run ended mid-character: the chip is still sent
    assert "data-step='2'" in last and "unfinished character" in last


def test_a_language_redraw_draws_the_text_the_page_last_drew_not_the_one_it_read_when_it_set_off(tok):
    """A page's language switch reads the text box when its events set off; a Show me that drew a lesson's
    text meanwhile must not be drawn over with the old text (it was, now and then, in the browser test)."""
    from types import SimpleNamespace

    from playground.ui.tokenizer import tab as tokenizer_tab

    page, other = SimpleNamespace(session_hash="tok-page"), SimpleNamespace(session_hash="tok-other")
    old, new = "ROMEO:\nWhat light through yonder window breaks?\n", "unbelievable things"
    drawn = tokenizer_tab.show_tokens(new, {"lang": "en"}, request=page)
    assert f"data-tokens='{len(tok.encode(new))}'" in drawn.summary
    again = tokenizer_tab.redraw({"lang": "zh-CN"}, old, None, request=page)
    assert f"data-tokens='{len(tok.encode(new))}'" in again.summary and re.search(r"[\u4e00-\u9fff]", again.summary)
    # a page that has drawn nothing yet (the tab's first view is the layout's) draws its text box's text
    fresh = tokenizer_tab.redraw({"lang": "zh-CN"}, old, None, request=other)
    assert f"data-tokens='{len(tok.encode(old))}'" in fresh.summary
