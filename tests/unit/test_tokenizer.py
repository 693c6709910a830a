"""The offline GPT-2 tokenizer: known ids, round trips, display pieces, file checks, no network
(issue 2: tokenizer; issue 6: emoji, Chinese, control characters, surrogates)."""

import shutil

import pytest
import tiktoken.load

from playground.engine.tokenizer import ASSETS, END_OF_TEXT, display_text, load_tokenizer
from tests.helpers import TINY_SHAKESPEARE

TEXTS = {
    "english": "Hello, world! The quick brown fox jumps over the lazy dog.\n\tIndented line.",
    "chinese": "你好，世界。机器学习很有趣。",
    "emoji": "I ❤️ 🦙 and 👩‍👩‍👧 families 😀",
    "mixed": "GPT-2 说 «bonjour» — naïve café, Привет, مرحبا, こんにちは 🚀 x² ∑",
    "whitespace": "   \n\n  trailing   ",
    "control": "bell\x07 null\x00 escape\x1b del\x7f",
}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_known_ids(tok):
    assert tok.encode("Hello, I am") == [15496, 11, 314, 716]
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode("\n") == [198]
    assert tok.n_vocab == 50257 and tok.eot_id == 50256


@pytest.mark.parametrize("name", TEXTS)
def test_round_trip(tok, name):
    ids = tok.encode(TEXTS[name])
    assert all(0 <= i < 50257 for i in ids)
    assert tok.decode(ids) == TEXTS[name]


@pytest.mark.parametrize("name", TEXTS)
def test_matches_an_independent_bpe(tok, name):
    """Hugging Face `tokenizers` reading the same two files is a second implementation of GPT-2's BPE."""
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.ByteLevelBPETokenizer(str(ASSETS / "encoder.json"), str(ASSETS / "vocab.bpe"))
    assert tok.encode(TEXTS[name]) == reference.encode(TEXTS[name]).ids


def test_matches_independent_bpe_on_a_corpus(tok):
    tokenizers = pytest.importorskip("tokenizers")
    if not TINY_SHAKESPEARE.is_file():
        pytest.skip("tiny shakespeare not available")
    text = TINY_SHAKESPEARE.read_text()[:20_000]
    reference = tokenizers.ByteLevelBPETokenizer(str(ASSETS / "encoder.json"), str(ASSETS / "vocab.bpe"))
    ids = tok.encode(text)
    assert ids == reference.encode(text).ids
    assert tok.decode(ids) == text


def test_user_typed_end_of_text_is_text(tok):
    ids = tok.encode("a <|endoftext|> b")
    assert 50256 not in ids
    assert tok.decode(ids) == "a <|endoftext|> b"
    assert tok.encode(END_OF_TEXT) == [27, 91, 437, 1659, 5239, 91, 29]  # "<", "|", "end", "of", "text", "|", ">"
    assert tok.decode([50256]) == END_OF_TEXT  # the real special token still decodes


def test_lone_surrogates_do_not_raise(tok):
    for text in ("\ud800", "abc\udfffdef", "x\ud83dy"):  # the last is half of an emoji's pair
        decoded = tok.decode(tok.encode(text))
        # Each surrogate becomes replacement characters; everything around it survives.
        assert "\ufffd" in decoded
        assert decoded.replace("\ufffd", "") == "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


def test_encode_needs_text(tok):
    with pytest.raises(TypeError, match="text must be a str, got int"):
        tok.encode(42)
    assert tok.encode("") == []


# ---------------------------------------------------------------------------------------------
# Display pieces


def test_pieces_show_leading_space_and_newline(tok):
    pieces = tok.pieces(tok.encode("Hello, I am\n"))
    assert [p.display for p in pieces] == ["Hello", ",", "␣I", "␣am", "↵"]
    assert [p.text for p in pieces] == ["Hello", ",", " I", " am", "\n"]
    assert not any(p.is_partial for p in pieces)
    assert pieces[2].id == 314


def test_partial_utf8_pieces_are_flagged(tok):
    for text in ("你好", "😀"):
        ids = tok.encode(text)
        pieces = tok.pieces(ids)
        assert all(p.is_partial and p.text == "" for p in pieces), pieces
        # The display shows the raw bytes, and they add up to the character's UTF-8 encoding.
        shown = b"".join(bytes.fromhex(p.display.strip("⟨⟩").replace(" ", "")) for p in pieces)
        assert shown == text.encode("utf-8")
        assert b"".join(tok.token_bytes(i) for i in ids) == text.encode("utf-8")
    assert [p.display for p in tok.pieces([19526, 254])] == ["⟨e4 bd⟩", "⟨a0⟩"]  # 你 = e4 bd a0


def test_whole_character_tokens_are_not_partial(tok):
    # "é" is one complete two-byte character in a single token: not partial.
    ids = tok.encode(" café")
    pieces = tok.pieces(ids)
    assert "".join(p.text for p in pieces) == " café"
    assert not any(p.is_partial for p in pieces)


def test_display_text_makes_invisible_characters_visible():
    assert display_text(" I") == "␣I"
    assert display_text("a\tb\r\n") == "a⇥b␍↵"
    assert display_text("\x07\x00\x7f") == "⟨07⟩⟨00⟩⟨7f⟩"
    assert display_text("") == "∅"


def test_out_of_range_ids_are_shown_not_raised(tok):
    piece = tok.piece(60000)
    assert piece.display == "⟨id 60000⟩" and piece.is_partial
    assert tok.token_bytes(-1) == b""


# ---------------------------------------------------------------------------------------------
# Files: checked by sha256, never fetched


def _copy_assets(folder):
    for name in ("vocab.bpe", "encoder.json"):
        shutil.copy(ASSETS / name, folder / name)


def test_corrupted_bpe_file_is_refused(tmp_path):
    _copy_assets(tmp_path)
    with open(tmp_path / "vocab.bpe", "a") as f:
        f.write("x y\n")
    with pytest.raises(ValueError, match=r"vocab\.bpe does not match the GPT-2 BPE file \(sha256 mismatch\)"):
        load_tokenizer(str(tmp_path))


def test_corrupted_encoder_json_is_refused(tmp_path):
    _copy_assets(tmp_path)
    data = bytearray((tmp_path / "encoder.json").read_bytes())
    data[100] ^= 1  # one flipped bit
    (tmp_path / "encoder.json").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"encoder\.json does not match"):
        load_tokenizer(str(tmp_path))


def test_missing_bpe_file(tmp_path):
    _copy_assets(tmp_path)
    (tmp_path / "encoder.json").unlink()
    with pytest.raises(FileNotFoundError, match="GPT-2 BPE file missing: .*encoder.json"):
        load_tokenizer(str(tmp_path))


@pytest.mark.parametrize("cache", ["disabled", "fresh"])
def test_loading_never_touches_the_network(tmp_path, monkeypatch, cache):
    """Any URL read through tiktoken (requests or blobfile) fails the test; tiktoken reads no file
    at all (load_tokenizer hands it the rank table)."""
    real_read_file = tiktoken.load.read_file
    seen = []

    def local_only(blobpath):
        seen.append(blobpath)
        if "://" in str(blobpath):
            raise AssertionError(f"tiktoken tried to fetch {blobpath}")
        return real_read_file(blobpath)

    def no_requests(*args, **kwargs):
        raise AssertionError("network access")

    import requests

    monkeypatch.setattr(tiktoken.load, "read_file", local_only)
    monkeypatch.setattr(requests, "get", no_requests)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "" if cache == "disabled" else str(tmp_path / "cache"))
    folder = tmp_path / "assets"
    folder.mkdir()
    _copy_assets(folder)
    tok = load_tokenizer(str(folder))  # a new folder: not served by the lru_cache
    assert tok.encode("Hello, I am") == [15496, 11, 314, 716]
    assert seen == []  # the files are read (and their sha256 checked) by load_tokenizer itself


def test_the_rank_table_read_from_encoder_json_is_tiktokens_own():
    """load_tokenizer reads the byte -> rank table from encoder.json alone (every GPT-2 token's id
    is its merge rank); tiktoken's own reader derives it from vocab.bpe and checks it against
    encoder.json. The two tables are the same, entry for entry."""
    from playground.engine.tokenizer import ENCODER_JSON_SHA256, VOCAB_BPE_SHA256, mergeable_ranks

    ours = mergeable_ranks(ASSETS / "encoder.json")
    theirs = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(ASSETS / "vocab.bpe"),
        encoder_json_file=str(ASSETS / "encoder.json"),
        vocab_bpe_hash=VOCAB_BPE_SHA256,
        encoder_json_hash=ENCODER_JSON_SHA256,
    )
    assert len(ours) == 50256 and ours == theirs
    assert ours[b" the"] == 262 and ours[b"!"] == 0  # a merged token; the first byte in GPT-2's order
