"""The Tokenizer tab's BPE replay names the character a merge of bytes builds (从 is e4 bb 8e)."""

import pytest

from playground.engine.tokenizer import load_tokenizer
from playground.inside.bpe import replay_word
from playground.ui.tokenizer.tab import show_merges


@pytest.mark.parametrize("lang, says", [("en", "(bytes of {c})"), ("zh-CN", "（{c} 的字节）")])
def test_byte_merges_name_the_character_they_build(lang, says):
    word = "从前"
    replay = replay_word(word)
    assert replay.token_ids == load_tokenizer().encode(word)  # the replay is GPT-2's own cut
    html = show_merges(word, {"lang": lang})
    rows = html.split("<tr data-rank=")[1:]
    assert len(rows) == len(replay.steps) >= 2
    for row, step in zip(rows, replay.steps):
        merged = step.left + step.right
        char = next(c for c in word if merged in c.encode())  # the character whose UTF-8 holds these bytes
        assert says.format(c=char) in row
    final = html.split("pg-merges-final'>")[1]
    assert final.count(says.format(c="从")) == 2 and final.count(says.format(c="前")) == 2


def test_whole_characters_are_not_annotated():
    assert "bytes of" not in show_merges(" unbelievable")
