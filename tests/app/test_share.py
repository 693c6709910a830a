"""Links with query parameters (clamped or refused, and said) and the compare tab's text sources."""

import html

import gradio as gr
import pytest

from playground.ui import share
from playground.ui.common import new_state
from playground.ui.compare.tab import score_a, text_from


def outputs(params):
    return dict(zip(share.ORDER + ("tab", "message"), share.prefill(params)))


def test_values_in_range_fill_the_generate_tab():
    out = outputs(
        {
            "prompt": "Hi",
            "temperature": "0.7",
            "top_k": "40",
            "top_p": "0.9",
            "max_new": "60",
            "seed": "42",
            "greedy": "false",
            "tab": "generate",
        }
    )
    assert (
        out["prompt"],
        out["temperature"],
        out["top_k"],
        out["top_p"],
        out["max_new"],
        out["seed"],
        out["greedy"],
    ) == ("Hi", 0.7, 40, 0.9, 60, 42, False)
    assert (
        out["tab"].get("selected") == "generate" if isinstance(out["tab"], dict) else out["tab"].selected == "generate"
    )
    assert "pg-ok" in out["message"]


def test_out_of_range_is_clamped_and_said_garbage_is_ignored_and_said():
    out = outputs(
        {
            "temperature": "9",
            "top_k": "-3",
            "max_new": "1e9",
            "seed": "abc",
            "top_p": "nan",
            "greedy": "maybe",
            "tab": "nowhere",
            "foo": "1",
        }
    )
    assert out["temperature"] == 2.0 and out["top_k"] == 0 and out["max_new"] == 512
    for name in ("seed", "top_p", "greedy"):
        assert isinstance(out[name], type(gr.skip()))
    msg = html.unescape(out["message"])
    for words in (
        "temperature=9 is outside 0.0–2.0; set to 2.0",
        "top_k=-3",
        "seed must be a number, got 'abc'. seed from the link is ignored.",  # the Generate tab's own refusal
        "top_p must be a finite number, got 'nan'",
        "greedy must be true or false, got 'maybe'",
        "tab='nowhere'",
        "Unknown link parameter ignored: foo",
    ):
        assert words in msg, (words, msg)
    assert "pg-error" in msg


@pytest.mark.parametrize("name", sorted(share.PAGE_PARAMS))
def test_parameters_the_page_reads_are_not_called_unknown(name):
    """``?present=1``, ``?lang=zh-CN``, ``?__theme=dark`` and ``?view=`` belong to the page, not the form."""
    out = outputs({name: "1", "temperature": "0.5"})
    msg = html.unescape(out["message"])
    assert "Unknown" not in msg and "pg-ok" in msg, msg
    assert "Unknown link parameter ignored: foo" in html.unescape(outputs({name: "1", "foo": "2"})["message"])


def test_share_query_round_trips():
    from urllib.parse import parse_qsl

    q = share.share_query("ROMEO:\nO", 0.7, 40, 1.0, 60, 42, False)
    out = outputs(dict(parse_qsl(q[1:])))
    assert out["prompt"] == "ROMEO:\nO" and out["temperature"] == 0.7 and out["seed"] == 42


def test_a_file_that_is_not_utf8_is_said_and_replacement_offered(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Roméo et Juliette".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8.*replace undecodable bytes"):
        text_from(new_state(), "upload", "", str(path), False)
    assert text_from(new_state(), "upload", "", str(path), True) == "Rom\ufffdo et Juliette"
    only_bad = tmp_path / "bad.txt"
    only_bad.write_bytes(b"\xff\xfe\xfd")
    message = score_a(new_state(), None, "upload", "", str(only_bad), True, 0, progress=lambda *a, **k: None)[0]
    assert "only undecodable bytes" in message
    assert (
        "Generate something" in score_a(new_state(), None, "run", "", None, False, 0, progress=lambda *a, **k: None)[0]
    )


@pytest.mark.parametrize("tab", ["lessons", "model", "generate", "inside", "train", "compare", "tokenizer"])
def test_a_link_opens_every_tab_it_names(tab):
    """``?tab=tokenizer`` and ``?tab=inside`` opened Lessons (issue 34): every page tab is a link's to open."""
    out = outputs({"tab": tab})
    assert getattr(out["tab"], "selected", None) == tab
    assert "is not one of" not in html.unescape(str(out["message"]))


def test_the_tabs_a_link_may_name_are_the_pages():
    import re
    from pathlib import Path

    source = (Path(share.__file__).parent / "app.py").read_text()
    assert set(re.findall(r'gr\.Tab\(T\("tab_\w+"\), id="(\w+)"\)', source)) == set(share.TABS)


def test_a_seed_past_2_53_in_a_link_fills_the_box_exactly():
    out = outputs({"seed": "9007199254740993"})
    assert out["seed"] == 2**53 + 1 and type(out["seed"]) is int and "pg-ok" in out["message"]
    out = outputs({"seed": "9223372036854775808"})  # 2⁶³: one past the range, clamped and said
    assert out["seed"] == 2**63 - 1 and "outside" in out["message"]


def test_a_link_is_read_by_the_generate_tabs_field_readers_and_said_in_the_pages_language():
    """The same readers as the Generate tab's boxes (a fraction for a whole number is refused, not rounded),
    and every sentence keyed: in 中文 on a Chinese page, with no English left in it."""
    from playground.i18n import EN, ZH

    link = {"top_k": "2.5", "seed": "1e20", "temperature": "9", "greedy": "maybe", "tab": "nowhere", "foo": "1"}
    en, zh = share.prefill(link), share.prefill(link, "zh-CN")
    assert isinstance(en[share.ORDER.index("top_k")], type(gr.skip()))  # 2.5 is not a whole number: ignored
    assert en[share.ORDER.index("seed")] == zh[share.ORDER.index("seed")] == 2**63 - 1  # clamped, exactly
    said = html.unescape(zh[-1])
    for key in ("link_clamped", "link_ignored", "link_bad_tab", "link_unknown"):
        assert key in EN and key in ZH and ZH[key] != EN[key]
    for words in ("top_k 必须是整数", "已忽略链接中的 top_k", "链接中的 seed=1e20 超出", "已忽略未知的链接参数：foo"):
        assert words in said, (words, said)
    for english in ("is outside", "ignored", "must be", "Unknown"):
        assert english not in said, (english, said)
    ok = html.unescape(share.prefill({"seed": "9007199254740993"}, "zh-CN")[-1])
    assert "已从链接填入设置：seed 9007199254740993" in ok
