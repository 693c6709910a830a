"""The tokenizer view (issue 12): tokens with their bytes, byte fragments grouped under the
character they build (checked against tiktoken's own byte decoding), and the BPE merge replay from
vocab.bpe, which must end in exactly tiktoken's tokens."""

import pytest

from playground.engine.tokenizer import load_tokenizer
from playground.inside.bpe import (
    MAX_REPLAY_BYTES,
    TokenizerViewError,
    merge_ranks,
    pretokens,
    replay_text,
    replay_word,
    token_view,
    tokenize_view,
    utf8_segments,
)
from tests.helpers import TINY_SHAKESPEARE

TEXTS = {
    "chinese": "从前有一座山，山上有一座庙，注意力机制让模型在生成每个词时",
    "emoji": "I ❤️ 🦙 and 👩‍👩‍👧 families 😀🚀",
    "mixed": "GPT-2 说 «bonjour» — naïve café, Привет, مرحبا, こんにちは 🚀 x² ∑\n\tend",
    "english": "Hello, world! The quick brown fox jumps over the lazy dog.",
}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


@pytest.mark.parametrize("name", TEXTS)
def test_tokens_carry_tiktokens_own_bytes_and_groups_rebuild_the_text(tok, name):
    text = TEXTS[name]
    view = tokenize_view(text)
    ids = tok.encoding.encode_ordinary(text)
    assert [t.id for t in view.tokens] == ids
    assert [t.bytes for t in view.tokens] == [tok.encoding.decode_single_token_bytes(i) for i in ids]
    # groups cover every token once, in order, and each group decodes to whole characters
    assert [p for g in view.groups for p in g.positions] == list(range(len(ids)))
    assert "".join(g.text for g in view.groups) == text
    for g in view.groups:
        assert g.bytes == b"".join(tok.encoding.decode_single_token_bytes(ids[p]) for p in g.positions)
        assert g.text == g.bytes.decode("utf-8")
    # nothing is ever shown as the replacement character
    assert not any("\ufffd" in t.display or "\ufffd" in t.note for t in view.tokens)
    assert not any("\ufffd" in g.display for g in view.groups)


@pytest.mark.parametrize("name", ["chinese", "emoji"])
def test_fragments_are_exactly_the_tokens_that_do_not_decode_alone(tok, name):
    view = tokenize_view(TEXTS[name])
    n_fragments = 0
    for t in view.tokens:
        raw = tok.encoding.decode_single_token_bytes(t.id)
        try:
            alone = raw.decode("utf-8")
        except UnicodeDecodeError:
            alone = None
        assert t.text == alone
        assert t.is_fragment == (alone is None)
        n_fragments += t.is_fragment
        if t.is_fragment:
            assert t.display.count("⟨") >= 1 and "of" in t.note  # "bytes 1–2 of 3 of 从 (U+4ECE)"
    assert n_fragments >= 4


def test_cong_is_two_tokens_under_one_character(tok):
    view = tokenize_view("从")
    assert len(view.groups) == 1 and view.groups[0].text == "从"
    first, second = view.tokens
    assert first.bytes + second.bytes == "从".encode() == b"\xe4\xbb\x8e"
    assert first.display == "⟨e4 bb⟩" and second.display == "⟨8e⟩"
    assert first.note == "bytes 1–2 of 3 of 从 (U+4ECE)" and second.note == "byte 3 of 3 of 从 (U+4ECE)"


def test_emoji_groups_and_invisible_characters_are_named(tok):
    view = tokenize_view(" 🦙\u200d")
    shown = [g.display for g in view.groups]
    assert "␣🦙" in shown and "⟨U+200D⟩" in shown
    llama = next(g for g in view.groups if g.display == "␣🦙")
    assert len(llama.positions) >= 2  # the 4 emoji bytes are split over tokens


def test_utf8_segments_handle_invalid_and_unfinished_bytes():
    segs = utf8_segments(b"a\xe4\xbb\x8e\x80\xe4\xbb")
    assert [(s.start, s.end, s.char, s.complete) for s in segs] == [
        (0, 1, "a", True),
        (1, 4, "从", True),
        (4, 5, None, True),
        (5, 7, None, False),
    ]
    # a generated sequence may end mid-character: the last group says it is unfinished
    view = token_view([20015])  # e4 bb
    assert view.groups[-1].complete is False and view.groups[-1].text is None
    assert "unfinished" in view.tokens[0].note


def test_unbelievable_replay_from_vocab_bpe(tok):
    ranks = merge_ranks()
    assert len(ranks) == 50000
    # rank r makes token 256 + r: the first merge line "Ġ t" is token 256, " t"
    assert ranks[(b" ", b"t")] == 0 and tok.encoding.encode_single_token(b" t") == 256
    w = replay_word("unbelievable")
    assert [tok.encoding.decode_single_token_bytes(i) for i in w.token_ids] == [b"un", b"bel", b"iev", b"able"]
    rank_list = [s.rank for s in w.steps]
    assert rank_list == sorted(rank_list)  # a pair's rank never beats one merged before it here
    for s in w.steps:
        assert ranks[(s.left, s.right)] == s.rank
        assert tok.encoding.encode_single_token(s.left + s.right) == 256 + s.rank
        assert b"".join(s.parts) == b"unbelievable"
    assert w.steps[-1].parts == [b"un", b"bel", b"iev", b"able"]


def _words_for_replay():
    text = " ".join(TEXTS.values()) + " antidisestablishmentarianism  tokenization 1234567 ...!!! \n\n"
    if TINY_SHAKESPEARE.is_file():
        text += TINY_SHAKESPEARE.read_text()[:60_000]
    return sorted(set(pretokens(text)))


def test_replay_ends_in_tiktokens_tokens_on_many_words(tok):
    words = _words_for_replay()
    assert len(words) > 200 or not TINY_SHAKESPEARE.is_file()
    mismatched = [w for w in words if replay_word(w).token_ids != tok.encoding.encode_ordinary(w)]
    assert mismatched == []
    # and a whole text, word by word, is tiktoken's encoding of it
    for text in TEXTS.values():
        assert [i for w in pretokens(text) for i in replay_word(w).token_ids] == tok.encode(text)


def test_replay_refuses_what_it_cannot_show():
    with pytest.raises(TokenizerViewError, match="Type or pick a word"):
        replay_text("")
    with pytest.raises(TokenizerViewError, match=f"up to {MAX_REPLAY_BYTES} bytes"):
        replay_word("a" * (MAX_REPLAY_BYTES + 1))
    with pytest.raises(TokenizerViewError, match="up to 16"):
        replay_text(" a" * 40)
    with pytest.raises(TokenizerViewError, match="must be a string"):
        replay_text(12)
