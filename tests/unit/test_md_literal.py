"""What a user typed, put into Markdown (ui.messages.md_literal), shows as typed: each character Markdown reads as
formatting is escaped, so a Markdown renderer draws the text back and nothing else (no emphasis, code, link,
heading, list, quote, rule, table, tag or entity), even on a line of its own between two others as in the
teacher's status; plain words stay as they are, and no ``$$`` is left for Gradio's LaTeX."""

import html
import re

import pytest
from markdown_it import MarkdownIt

from playground.ui.messages import md_literal

# CommonMark with GitHub's tables and strikethrough (markdown-it-py's spelling of what Gradio's Markdown takes)
MARKDOWN = MarkdownIt("commonmark", {"breaks": False}).enable(["table", "strikethrough"])

TYPED = [
    "*x*",
    "**bold** and _it_ and __b__",
    "snake_case_name",
    "`code` and ```fence```",
    "# heading",
    "### heading",
    "1. first",
    "1) first",
    "- item",
    "+ item",
    "* item",
    "> quoted",
    "---",
    "===",
    "***",
    "[link](x)",
    "![image](x.png)",
    "<b>y</b>",
    "<script>alert(1)</script>",
    "<!-- note -->",
    "<http://x.org>",
    "a & b < c > d",
    "&amp; &#42; &lt;",
    "~~struck~~",
    "| a | b |",
    "$$x^2$$ and $y$",
    "back\\slash \\* and a trailing \\",
    "www.x.org, http://x.org/a and me@x.org",
    "{braces} ^hat^ %pct @at ;semi ,comma /slash ?q 'single' \"double\" “curly”",
    "中文 *强调* 和 [链接](x)",
]


def shown(markdown: str) -> tuple[str, set[str]]:
    """The text a Markdown renderer shows for ``markdown``, and the tags it draws besides paragraphs."""
    drawn = MARKDOWN.render(markdown)
    tags = set(re.findall(r"</?([a-z0-9]+)", drawn)) - {"p"}
    return html.unescape(re.sub(r"<[^>]+>", "", drawn)).strip(), tags


@pytest.mark.parametrize("typed", TYPED)
def test_typed_text_renders_as_typed(typed):
    escaped = md_literal(typed)
    assert shown(escaped) == (typed, set()), escaped
    # on a line of its own between two others (as the status puts the question): still the text alone
    assert shown(f"before  \n{escaped}  \nafter") == (f"before\n{typed}\nafter", {"br"}), escaped
    assert "$$" not in escaped  # (Gradio's Markdown draws LaTeX only when its text holds "$$")


def test_the_unescaped_text_is_formatting():  # (what the escape is for: each of these renders as more than text)
    for typed in ("*x*", "# heading", "<b>y</b>", "[link](x)", "`code`", "1. first", "> quoted", "| a |\n| - |"):
        assert shown(typed)[1], typed


def test_escaped_forms():
    assert md_literal("*x*") == r"\*x\*"
    assert md_literal("<b>y</b>") == r"\<b\>y\</b\>"
    assert md_literal("a & b") == r"a \& b"
    assert md_literal("$$x$$") == r"\$\$x\$\$"
    assert md_literal("1. first") == r"1\. first"


def test_plain_words_stay_as_they_are():
    for typed in ("Will the model repeat the name?", "Yes", "L2 H0", "第 2 层的哪个头是归纳头？", ""):
        assert md_literal(typed) == typed
    assert md_literal(42) == "42"
