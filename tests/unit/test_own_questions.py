"""The teacher's own classroom question (server.own_questions): its words and the choices typed with it, one a
line. Blank lines are skipped and each choice is trimmed to one line; an empty box means the layer's heads;
one choice, more than 8, a choice over 80 characters, the same choice twice (letter case aside) and a box
that is not text are refused by their keys, each said in English and 中文 with the choice it names."""

import pytest

from playground.i18n import tr_error
from playground.server.own_questions import (
    MAX_CHOICE_CHARS,
    MAX_OWN_CHOICES,
    OwnQuestion,
    OwnQuestionError,
    own_question,
    typed_choices,
)
from playground.server.room_checks import MAX_LABEL_CHARS, check_choices

QUESTION = "Will the model repeat the name?"


def refusal(key, *args) -> OwnQuestionError:
    with pytest.raises(OwnQuestionError) as caught:
        own_question(*args)
    assert caught.value.key == key, (caught.value.key, str(caught.value))
    return caught.value


def test_choices_are_one_a_line_trimmed_with_blank_lines_skipped():
    typed = "  Yes \r\n\n No, never\t\n\nOnly if it saw it twice; maybe\n   \n"
    asked = own_question(f"  {QUESTION}\n", typed)
    assert asked == OwnQuestion(QUESTION, ("Yes", "No, never", "Only if it saw it twice; maybe"))
    assert typed_choices("a\nb") == ("a", "b")
    assert typed_choices("a   b\nc") == ("a b", "c")  # (spacing inside a choice collapsed, as the question's is)
    assert typed_choices("\n".join(str(i) for i in range(MAX_OWN_CHOICES))) == tuple(map(str, range(MAX_OWN_CHOICES)))
    assert typed_choices("x" * MAX_CHOICE_CHARS + "\ny") == ("x" * MAX_CHOICE_CHARS, "y")
    # the choices as the room stores them pass its own check
    assert check_choices([[f"c{i}", c] for i, c in enumerate(asked.choices, 1)])


@pytest.mark.parametrize("typed", [None, "", " ", "\n\n \t\n"])
def test_an_empty_box_means_the_layers_heads(typed):
    assert own_question(QUESTION, typed) == OwnQuestion(QUESTION, ())


def test_the_question_is_checked_first_and_by_its_own_limit():
    assert "Type your question first" in str(refusal("room_ask.empty", "  \n", "yes\nno"))
    e = refusal("room_ask.too_long", "x" * (MAX_LABEL_CHARS + 1), "yes\nno")
    assert e.fields == {"n": MAX_LABEL_CHARS, "got": MAX_LABEL_CHARS + 1}


def test_one_choice_is_refused_with_the_rule_to_type_them_a_line_each():
    e = refusal("room_ask.one_choice", QUESTION, "Yes; No\n\n")
    assert "“Yes; No”" in str(e) and "each on its own line" in str(e)
    assert "每个单独一行" in tr_error("zh-CN", e) and "“Yes; No”" in tr_error("zh-CN", e)


def test_too_many_choices_are_refused_with_the_count():
    e = refusal("room_ask.too_many_choices", QUESTION, "\n".join(f"choice {i}" for i in range(MAX_OWN_CHOICES + 1)))
    assert e.fields == {"cap": MAX_OWN_CHOICES, "n": MAX_OWN_CHOICES + 1}
    assert (
        str(e) == f"A vote takes at most {MAX_OWN_CHOICES} choices; the box has {MAX_OWN_CHOICES + 1} lines with words."
    )
    assert tr_error("zh-CN", e) == f"一次投票最多 {MAX_OWN_CHOICES} 个选项；选项框里有 {MAX_OWN_CHOICES + 1} 行文字。"


def test_a_long_choice_is_refused_by_its_number_and_quoted_short():
    long = "a" * (MAX_CHOICE_CHARS + 1)
    e = refusal("room_ask.choice_too_long", QUESTION, f"Yes\n{long}")
    assert e.fields["number"] == 2 and e.fields["got"] == MAX_CHOICE_CHARS + 1 and e.fields["n"] == MAX_CHOICE_CHARS
    assert len(e.fields["choice"]) <= 40 and e.fields["choice"].endswith("…")
    assert tr_error("zh-CN", e).startswith("第 2 个选项")


@pytest.mark.parametrize(
    "typed, number, first", [("Paris\nLondon\n paris ", 3, 1), ("Yes\nNO\nno", 3, 2), ("a  b\nA B", 2, 1)]
)
def test_the_same_choice_twice_is_refused_letter_case_and_spacing_aside(typed, number, first):
    e = refusal("room_ask.same_choice", QUESTION, typed)
    assert (e.fields["number"], e.fields["first"]) == (number, first)
    assert f"Choice {number}" in str(e) and f"choice {first} again" in str(e)
    assert f"与第 {first} 个重复" in tr_error("zh-CN", e)


@pytest.mark.parametrize("typed", [["yes", "no"], 3, {"yes": 1}])
def test_choices_that_are_not_text_are_refused(typed):
    e = refusal("room_ask.choices_not_text", QUESTION, typed)
    assert type(typed).__name__ in str(e)
