"""Classroom mode (issue 35): the teacher writes a question of their own on the layer its Generate heatmap shows
("which head copies the token after an earlier repeat?"); its choices are the layer's heads and nothing computes
its answer, so the reveal shows the room's counts alone.

In-process, as the pages run it: two students (English and Chinese) see the teacher's words and the layer's heads,
vote once each, and the reveal shows both of them the counts with no answer marked. An empty or too long question,
a layer the model does not have and a student's page or API call are refused with a message; through the running
app's API the teacher's call opens the same vote.

The teacher may type the question's choices too, one a line ("Yes", "No", ...): they are the vote's chips on
every page in every language, the teacher's counts so far and the reveal's bars name them, and a box of one
choice or the same choice twice is refused in the page's language. Through the API the choices are a fifth,
optional input: a caller that sends the four of before still gets the layer's heads.

A question or a choice typed with Markdown's or HTML's characters ("*x*", "<b>y</b>") shows as typed: the
teacher's status, which is Markdown, carries it escaped; the students' radio, plain text, takes it unchanged."""

import html
import re

import pytest
from markdown_it import MarkdownIt

from playground import PRESETS
from playground.server.room_checks import MAX_LABEL_CHARS
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import room_api, room_ask, room_voting
from tests.app.room_clients import a_teacher_and_a_student, nano_sessions

QUESTION = "Which head copies the token after an earlier repeat?"
OWN = "Will the model repeat the name?"
TYPED = ["Yes", "No", "Only if the name came earlier"]


@pytest.fixture
def room():
    teacher, students = nano_sessions("oq")
    t_room = lessons_room.start_room(teacher, None, {"lesson": "attention", "step": 0}, "").room
    rooms = [lessons_room.join_room(s, None, t_room["code"]).room for s in students]
    polled = [lessons_room.poll(s, r, "") for s, r in zip(students, rooms)]
    yield teacher, t_room, [p.state for p in polled], [p.room for p in polled]
    lessons_room.end_room(teacher, t_room)


def test_the_teachers_own_question_takes_the_layers_heads_and_reveals_the_counts(room):
    teacher, t_room, states, rooms = room
    layer, n_heads = 1, PRESETS["nano"].n_heads

    # refused, each with its reason: no words, too many, a layer the model lacks, a student's page or call
    assert "Type your question first" in room_ask.ask_room(teacher, t_room, "own", layer, "  \n ")
    assert f"at most {MAX_LABEL_CHARS} characters" in room_ask.ask_room(
        teacher, t_room, "own", layer, "x" * (MAX_LABEL_CHARS + 1)
    )
    assert "pg-error" in room_ask.ask_room(teacher, t_room, "own", PRESETS["nano"].n_layers, QUESTION)
    assert "pg-error" in room_ask.ask_room(states[0], rooms[0], "own", layer, QUESTION)
    refused = room_api.api_ask_own(states[0], rooms[0]["code"], rooms[0]["member"], QUESTION, layer)
    assert refused["key"] == "room.not_teacher", refused
    assert lessons_room.ROOMS.state(t_room["code"])["vote"] is None  # nothing was opened

    opened = room_ask.ask_room(teacher, t_room, "own", layer, f"  {QUESTION}\n")
    assert "pg-ok" in opened and QUESTION in opened and "no answer is computed" in opened, opened
    polled = [lessons_room.poll(s, r, "") for s, r in zip(states, rooms)]
    rooms = [p.room for p in polled]
    chips = [(f"L{layer} H{h}", f"h{h}") for h in range(n_heads)]
    for p in polled:  # the teacher's words on every page, the layer's heads as its chips
        assert p.room_vote["visible"] and p.room_vote["interactive"] and p.room_vote["label"] == QUESTION
        assert p.room_vote["choices"] == chips
    assert "answer" not in rooms[0]["vote"]

    assert "pg-ok" in room_voting.cast(states[0], rooms[0], "h0")
    assert "pg-ok" in room_voting.cast(states[1], rooms[1], f"h{n_heads - 1}")
    teacher_polled = lessons_room.poll(teacher, t_room, "")
    assert "2 of 2 here answered" in teacher_polled.room_status and QUESTION in teacher_polled.room_status
    assert teacher_polled.room_result == lessons_room.gr.skip()  # its "vote open" line stays on the teacher's page

    assert room_voting.reveal(teacher, t_room) == lessons_room.gr.skip()
    for state, room_, words in zip(states, rooms, ("no computed answer", "没有计算出的答案")):
        shown = lessons_room.poll(state, room_, "").room_result
        assert "data-answer=''" in shown and "✓" not in shown and QUESTION in shown and words in shown, shown
        assert "data-choice='h0' data-count='1'" in shown and f"data-choice='h{n_heads - 1}' data-count='1'" in shown
        assert "data-choice='h1' data-count='0'" in shown
    assert "no computed answer" in lessons_room.poll(teacher, t_room, "").room_result  # the teacher's too, now


def test_a_typed_question_and_choices_show_as_typed_in_the_teachers_status(room):
    teacher, t_room, states, rooms = room
    question, typed = "*x*", ["<b>y</b>", "# z_1"]
    assert "pg-ok" in room_ask.ask_room(teacher, t_room, "own", 1, question, "\n".join(typed))
    polled = [lessons_room.poll(s, r, "") for s, r in zip(states, rooms)]
    for p in polled:  # a radio's label and choices are plain text: as typed
        assert p.room_vote["label"] == question and p.room_vote["choices"] == [(typed[0], "c1"), (typed[1], "c2")]
    assert "pg-ok" in room_voting.cast(states[0], polled[0].room, "c1")

    polled_t = lessons_room.poll(teacher, t_room, "")
    assert r"\*x\*" in polled_t.room_status and "*x*" not in polled_t.room_status, polled_t.room_status
    t_room, status, bars = room_voting.show_counts(teacher, polled_t.room, True)
    assert r"\*x\*" in status and r"“\<b\>y\</b\>” 1 · “\# z\_1” 0" in status and "<b>" not in status, status
    drawn = MarkdownIt("commonmark").render(status)  # as a Markdown renderer draws it: the room's code bold, no more
    assert set(re.findall(r"<([a-z0-9]+)", drawn)) == {"p", "strong", "code", "br"} and drawn.count("<strong>") == 1
    shown = html.unescape(re.sub(r"<[^>]+>", "", drawn))
    assert "*x*\n" in shown and "“<b>y</b>” 1 · “# z_1” 0" in shown, shown
    assert "<span>&lt;b&gt;y&lt;/b&gt;</span>" in bars, bars  # (the bars are HTML: escaped as HTML)


def test_the_api_opens_a_teachers_own_question_and_refuses_a_student(app_url):
    teacher, student, code, key, member = a_teacher_and_a_student(app_url)
    for crafted in (member, code, ""):
        refused = student.predict(code, crafted, QUESTION, 0, api_name="/room_ask_own")
        assert refused.get("key") == "room.not_teacher", refused
    refused = teacher.predict(code, key, "", 0, api_name="/room_ask_own")
    assert refused.get("key") == "room_ask.empty", refused
    opened = teacher.predict(code, key, QUESTION, 0, api_name="/room_ask_own")
    assert opened["question"]["en"] == QUESTION and len(opened["choices"]) >= 2, opened
    vote = student.predict(code, None, member, "", api_name="/room_state")["vote"]
    assert vote["id"] == opened["vote"] and vote["text"]["en"] == QUESTION and "answer" not in vote
    assert teacher.predict(code, key, api_name="/room_end") == {"ended": code}


def test_the_teachers_typed_choices_are_the_chips_every_page_votes_on_and_the_reveal_counts(room):
    teacher, t_room, states, rooms = room
    layer = 1
    typed = f"  {TYPED[0]}\n{TYPED[1]} \n\n{TYPED[2]}\n"  # (blank lines and spaces around a choice dropped)

    # refused in the teacher's language, each naming what to change; nothing is opened
    one = room_ask.ask_room(teacher, t_room, "own", layer, OWN, "Yes; No")
    assert "pg-error" in one and "at least 2 choices, each on its own line" in one and "Yes; No" in one, one
    zh = room_ask.ask_room({**teacher, "lang": "zh-CN"}, t_room, "own", layer, OWN, "Yes; No")
    assert "请至少写 2 个选项，每个单独一行" in zh, zh
    twice = room_ask.ask_room(teacher, t_room, "own", layer, OWN, "Yes\nNo\nyes")
    assert "Choice 3 (“yes”) is choice 1 again" in twice, twice
    nine = "\n".join(f"choice {i}" for i in range(9))
    assert "at most 8 choices; the box has 9 lines" in room_ask.ask_room(teacher, t_room, "own", layer, OWN, nine)
    assert "Type your question first" in room_ask.ask_room(teacher, t_room, "own", layer, " ", typed)
    assert lessons_room.ROOMS.state(t_room["code"])["vote"] is None

    opened = room_ask.ask_room(teacher, t_room, "own", layer, OWN, typed)
    assert "pg-ok" in opened and OWN in opened and "with your 3 choices" in opened, opened
    polled = [lessons_room.poll(s, r, "") for s, r in zip(states, rooms)]
    rooms = [p.room for p in polled]
    chips = [(label, f"c{i}") for i, label in enumerate(TYPED, 1)]
    for p in polled:  # the English and the Chinese page: the teacher's words and choices as typed
        assert p.room_vote["visible"] and p.room_vote["interactive"] and p.room_vote["label"] == OWN
        assert p.room_vote["choices"] == chips, p.room_vote["choices"]
    assert "answer" not in rooms[0]["vote"] and rooms[0]["vote"]["question"] == "own/typed"

    assert "pg-error" in room_voting.cast(states[0], rooms[0], "h0")  # (not a choice of this vote)
    assert "pg-ok" in room_voting.cast(states[0], rooms[0], "c2")
    assert "pg-ok" in room_voting.cast(states[0], rooms[0], "c1")  # (a second choice replaces the first)
    assert "pg-ok" in room_voting.cast(states[1], rooms[1], "c3")
    polled_t = lessons_room.poll(teacher, t_room, "")
    assert "2 of 2 here answered" in polled_t.room_status and OWN in polled_t.room_status
    t_room, status, bars = room_voting.show_counts(teacher, polled_t.room, True)
    assert f"“{TYPED[0]}” 1 · “{TYPED[1]}” 0 · “{TYPED[2]}” 1" in status, status
    for i, (label, n) in enumerate(zip(TYPED, (1, 0, 1)), 1):  # the histogram: a bar per typed choice
        assert f"data-choice='c{i}' data-count='{n}'><span>{label}</span>" in bars, bars
    zh_status = lessons_room.poll({**teacher, "lang": "zh-CN"}, t_room, "").room_status
    assert f"“{TYPED[0]}” 1 · “{TYPED[1]}” 0" in zh_status, zh_status  # the same words on a Chinese page

    assert room_voting.reveal(teacher, t_room) == lessons_room.gr.skip()
    for state, room_, words in zip(states, rooms, ("no computed answer", "没有计算出的答案")):
        shown = lessons_room.poll(state, room_, "").room_result
        assert "data-answer=''" in shown and "✓" not in shown and OWN in shown and words in shown, shown
        for i, (label, n) in enumerate(zip(TYPED, (1, 0, 1)), 1):
            assert f"data-choice='c{i}' data-count='{n}'><span>{label}</span>" in shown, shown
    assert lessons_room.ROOMS.state(t_room["code"])["vote"]["counts"] == {"c1": 1, "c2": 0, "c3": 1}


def test_the_api_takes_typed_choices_as_a_fifth_optional_input(app_url):
    teacher, student, code, key, member = a_teacher_and_a_student(app_url)
    # four inputs, as before: the layer's heads
    heads = teacher.predict(code, key, QUESTION, 0, api_name="/room_ask_own")
    assert [cid for cid, _ in heads["choices"]] == [f"h{h}" for h in range(len(heads["choices"]))], heads
    assert heads["choices"][0][1]["en"] == "L0 H0"
    assert teacher.predict(code, key, QUESTION, 0, "", api_name="/room_ask_own")["choices"] == heads["choices"]

    refused = teacher.predict(code, key, OWN, 0, "Yes\nYES", api_name="/room_ask_own")
    assert refused.get("key") == "room_ask.same_choice" and "Choice 2" in refused["error"], refused
    refused = teacher.predict(code, key, OWN, 0, "Yes", api_name="/room_ask_own")
    assert refused.get("key") == "room_ask.one_choice", refused
    refused = student.predict(code, member, OWN, 0, "Yes\nNo", api_name="/room_ask_own")
    assert refused.get("key") == "room.not_teacher", refused

    opened = teacher.predict(code, key, OWN, 0, "\n".join(TYPED), api_name="/room_ask_own")
    assert opened["question"]["en"] == OWN and opened["vote"] == heads["vote"] + 2, opened  # (after two of heads)
    assert opened["choices"] == [[f"c{i}", {"en": t, "zh-CN": t}] for i, t in enumerate(TYPED, 1)]
    vote = student.predict(code, None, member, "", api_name="/room_state")["vote"]
    assert vote["id"] == opened["vote"] and vote["choices"] == opened["choices"] and "answer" not in vote
    assert student.predict(code, member, opened["vote"], "c3", api_name="/room_vote") == {"voted": "c3"}
    revealed = teacher.predict(code, key, api_name="/room_reveal")
    assert revealed["counts"] == {"c1": 0, "c2": 0, "c3": 1} and revealed["answer"] is None, revealed
    assert teacher.predict(code, key, api_name="/room_end") == {"ended": code}
