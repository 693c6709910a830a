"""Classroom mode (issue 35) through the running app's API: a teacher and two students. The students
follow the teacher's step within a second, each vote counts once, the teacher sees counts, the reveal
reaches both; a student cannot drive, reveal or end with the code, a member id or a crafted key; an
ended room refuses a join. Then the Lessons tab's room handlers as the pages run them: a following
student's page draws the teacher's step and steps away on its own Next."""

import re
import time

import gradio as gr
import pytest
from gradio_client import Client

from playground import PRESETS
from playground.server import lessons
from playground.server.recipes import random_recipe
from playground.server.rooms import ROOMS
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import room_redraw, room_voting
from playground.ui.lessons import tab as lessons_tab
from tests.app.room_clients import a_teacher_and_a_student

SKIP = gr.skip()
PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"


def wait_for(client, code, member, version, timeout=1.0):
    """Poll /room_state until its version passes ``version``: (state, seconds it took)."""
    t0 = time.perf_counter()
    while True:
        seen = client.predict(code, version, member, "", api_name="/room_state")
        if seen.get("changed"):
            return seen, time.perf_counter() - t0
        assert time.perf_counter() - t0 < timeout, f"no change within {timeout} s"
        time.sleep(0.05)


def test_a_teacher_and_two_students(app_url):
    teacher, s1, s2 = Client(app_url, verbose=False), Client(app_url, verbose=False), Client(app_url, verbose=False)
    room = teacher.predict(api_name="/room_create")
    code, key = room["code"], room["key"]
    assert room["link"].endswith(f"/?room={code}") and key not in room["link"]
    members = []
    for student in (s1, s2):
        joined = student.predict(code.lower(), api_name="/room_join")
        assert joined["code"] == code
        members.append(joined["member"])
    versions = [s.predict(code, None, m, "", api_name="/room_state")["version"] for s, m in zip((s1, s2), members)]

    lesson = lessons.lessons()[0]
    step = min(2, len(lesson.steps) - 1)
    published = teacher.predict(
        code, key, {"tab": "lessons", "lesson": lesson.id, "step": step, "prompt": PROMPT}, api_name="/room_publish"
    )
    assert "error" not in published, published
    for student, member, version in zip((s1, s2), members, versions):
        seen, took = wait_for(student, code, member, version)
        assert seen["state"]["lesson"] == lesson.id and seen["state"]["step"] == step and took < 1.0

    opened = teacher.predict(code, key, api_name="/room_open_vote")
    assert "error" not in opened, opened
    vote_id, choices = opened["vote"], [cid for cid, _ in opened["choices"]]
    seen = s1.predict(code, None, members[0], "", api_name="/room_state")
    assert seen["vote"]["open"] and "answer" not in seen["vote"] and "counts" not in seen["vote"]
    s1.predict(code, members[0], vote_id, choices[1], api_name="/room_vote")
    s1.predict(code, members[0], vote_id, choices[0], api_name="/room_vote")  # changed: still one vote
    s2.predict(code, members[1], vote_id, choices[0], api_name="/room_vote")
    tally = teacher.predict(code, None, "", key, api_name="/room_state")["tally"]
    assert tally["answered"] == 2 and tally["counts"][choices[0]] == 2 and sum(tally["counts"].values()) == 2
    # a student sees their own vote, never the other's nor the counts
    seen = s2.predict(code, None, members[1], "", api_name="/room_state")
    assert seen["vote"]["mine"] == choices[0] and "counts" not in seen["vote"] and "tally" not in seen

    # a student cannot drive, reveal or end
    for crafted in (code, members[0], "", key[:-1] + ("A" if key[-1] != "A" else "B")):
        for api, args in (
            ("/room_publish", (code, crafted, {"step": 0})),
            ("/room_reveal", (code, crafted)),
            ("/room_end", (code, crafted)),
        ):
            refused = s1.predict(*args, api_name=api)
            assert refused.get("key") == "room.not_teacher", (api, refused)
        if crafted:  # (no key: a follower's read, without the tally)
            seen = s1.predict(code, None, members[0], crafted, api_name="/room_state")
            assert seen.get("key") == "room.not_teacher"

    revealed = teacher.predict(code, key, api_name="/room_reveal")
    assert revealed["counts"][choices[0]] == 2 and revealed["answer"] in choices
    for student, member in zip((s1, s2), members):
        seen = student.predict(code, None, member, "", api_name="/room_state")
        assert seen["vote"]["answer"] == revealed["answer"] and seen["vote"]["counts"] == revealed["counts"]

    assert teacher.predict(code, key, api_name="/room_end") == {"ended": code}
    assert s1.predict(code, api_name="/room_join")["key"] == "room.ended"
    assert s1.predict("ZZZZZ1", api_name="/room_join")["key"] == "room.bad_code"


@pytest.fixture
def pages():
    recipe = random_recipe(PRESETS["nano"], seed=0)
    teacher = {"recipe": recipe, "run_id": None, "lang": "en"}
    student = {"recipe": recipe, "run_id": None, "lang": "zh-CN"}
    return teacher, student


def test_a_wrong_key_from_any_teacher_handler_counts_against_its_address(pages, monkeypatch):
    """Opening a vote, like revealing one, counts a wrong key against the address that sent it: past the
    lockout's limit that address is refused any further guess, and the teacher's key is still served (a whole
    class may share one address behind a proxy)."""
    from playground.server import room_lockout
    from playground.ui.lessons import room_voting

    teacher_state, _ = pages
    start = lessons_tab.first_position()
    room = lessons_room.start_room(teacher_state, None, start, PROMPT).room
    monkeypatch.setattr(room_voting, "client_address", lambda: "198.51.100.9")
    guess = {**room, "key": "guess"}
    for _ in range(room_lockout.MAX_FAILURES):
        assert "pg-err" in room_voting.open_vote(teacher_state, guess, start, PROMPT)
    locked = room_voting.open_vote(teacher_state, guess, start, PROMPT)
    assert "pg-err" in locked and "try again in" in locked, locked
    assert "pg-ok" in room_voting.open_vote(teacher_state, room, start, PROMPT)  # the key, from that address too
    monkeypatch.setattr(room_voting, "client_address", lambda: "192.0.2.1")  # another address: not locked out
    assert "pg-ok" in room_voting.open_vote(teacher_state, room, start, PROMPT)
    ROOMS.end(room["code"], room["key"])


def test_a_wrong_key_is_refused_before_the_steps_answer_is_computed(pages, monkeypatch):
    """Opening a vote checks the teacher's key first, as a question on the view does: a wrong key, from the
    page's button or the API, is refused without the step's question being asked of the model."""
    from playground.server import lessons as server_lessons
    from playground.ui.lessons import room_api

    teacher_state, _ = pages
    start = lessons_tab.first_position()
    room = lessons_room.start_room(teacher_state, None, start, PROMPT).room
    asked, ask = [], server_lessons.ask
    monkeypatch.setattr(server_lessons, "ask", lambda *args, **kwargs: asked.append(args) or ask(*args, **kwargs))
    said = room_voting.open_vote(teacher_state, {**room, "key": "guess"}, start, PROMPT)
    assert "pg-err" in said and "Only the teacher" in said, said
    refused = room_api.api_open_vote(teacher_state, room["code"], "guess")
    assert refused["key"] == "room.not_teacher" and asked == [], refused
    assert "pg-ok" in room_voting.open_vote(teacher_state, room, start, PROMPT) and len(asked) == 1
    assert "vote" in room_api.api_open_vote(teacher_state, room["code"], room["key"]) and len(asked) == 2
    ROOMS.end(room["code"], room["key"])


def test_a_students_page_follows_the_teachers_step_and_steps_away(pages):
    teacher_state, student_state = pages
    start = lessons_tab.first_position()
    entered = lessons_room.start_room(teacher_state, None, start, PROMPT)
    t_room = entered.room
    assert t_room["key"] and t_room["code"] in entered.room_status
    assert t_room["key"] not in entered.room_status  # the link and the code, never the key
    assert entered.room_teacher_row["visible"] and not entered.room_follow["visible"]
    joined = lessons_room.join_room(student_state, None, t_room["code"])
    s_room = joined.room
    assert s_room["member"] and not s_room.get("key") and "教室" in joined.room_status
    assert not joined.room_teacher_row["visible"] and not joined.room_follow["visible"]  # until stepped away

    polled = lessons_room.poll(student_state, s_room, "")
    s_room = polled.room
    assert polled.lesson_pos == start and polled.prompt == PROMPT and polled.choice["visible"] is False

    moved = lessons_tab.move(teacher_state, start, PROMPT, +1)
    lessons_room.publish_move(teacher_state, t_room, moved.lesson_pos, PROMPT)
    polled = lessons_room.poll(student_state, s_room, PROMPT)
    s_room = polled.room
    assert polled.lesson_pos == moved.lesson_pos
    # unchanged: nothing redrawn
    assert all(v == SKIP for v in lessons_room.poll(student_state, s_room, PROMPT)[5:])

    # the teacher's vote on this step: the student's radio shows its choices in the student's language
    assert "pg-ok" in room_voting.open_vote(teacher_state, t_room, moved.lesson_pos, PROMPT)
    polled = lessons_room.poll(student_state, s_room, PROMPT)
    s_room = polled.room
    assert polled.room_vote["visible"] and polled.room_vote["choices"]
    choice = polled.room_vote["choices"][0][1]
    assert "pg-ok" in room_voting.cast(student_state, s_room, choice)
    assert "1 of 1 here answered" in lessons_room.poll(teacher_state, t_room, PROMPT).room_status
    room_voting.reveal(teacher_state, t_room)
    polled = lessons_room.poll(student_state, s_room, PROMPT)
    s_room = polled.room
    assert f"data-choice='{choice}' data-count='1'" in polled.room_result

    # the page's language changes: the room's texts follow
    status, radio, result = room_redraw.redraw({**student_state, "lang": "en"}, s_room)
    assert "following the teacher" in status and f"data-choice='{choice}' data-count='1'" in result
    assert "The answer" in result and radio["choices"]

    # the student moves on their own: away, until Follow
    s_room, status, radio, follow_button = lessons_room.publish_move(student_state, s_room, moved.lesson_pos, PROMPT)
    assert follow_button["visible"]
    assert s_room["follow"] is False and radio["visible"]
    back = lessons_tab.move(teacher_state, moved.lesson_pos, PROMPT, +1)
    lessons_room.publish_move(teacher_state, t_room, back.lesson_pos, PROMPT)
    polled = lessons_room.poll(student_state, s_room, PROMPT)
    s_room = polled.room
    assert polled.lesson_pos == SKIP and polled.room_vote["visible"] is False  # the new step's, without a vote
    s_room, _, follow_button = lessons_room.follow(student_state, s_room)
    assert follow_button["visible"] is False
    polled = lessons_room.poll(student_state, s_room, PROMPT)
    assert polled.lesson_pos == back.lesson_pos

    lessons_room.end_room(teacher_state, t_room)
    gone = lessons_room.poll(student_state, polled.room, PROMPT)
    assert gone.room["code"] is None and "结束" in gone.room_status
    assert ROOMS.count() == 0 or t_room["code"] not in str(ROOMS._rooms)


def test_a_students_page_follows_the_teachers_tab_prompt_run_and_view(pages):
    """Beyond the lesson: the tab, the prompt, the teacher's run (its chips, status and heatmap as the
    teacher's page drew them, sent as they are) and the view's controls; the student's own typing steps away."""
    import json

    from gradio.components.plot import PlotData

    from playground.ui.chips import RESET
    from playground.ui.generate import tab as generate_tab
    from playground.ui.lessons import room_follow

    teacher_state, student_state = pages
    t_room = lessons_room.start_room(teacher_state, None, lessons_tab.first_position(), PROMPT).room
    s_room = lessons_room.join_room(student_state, None, t_room["code"]).room
    s_room = lessons_room.poll(student_state, s_room, "").room

    # the teacher opens the Generate tab and types: the student's page opens it and shows the prompt,
    # without drawing the lesson's step again (the teacher is not on the Lessons tab)
    assert all(v == SKIP for v in room_follow.tab_opened("generate")(teacher_state, t_room))
    room_follow.prompt_typed(teacher_state, t_room, "Hello there")
    polled = lessons_room.poll(student_state, s_room, PROMPT)
    s_room = polled.room
    assert polled.tabs.selected == "generate" and polled.prompt == "Hello there" and polled.lesson_pos == SKIP
    # the page's own select of the tab the poll opened is not a move of the student's
    assert room_follow.tab_opened("generate")(student_state, s_room).room == SKIP

    # the teacher generates: the run is published once it ends, as the teacher's page shows it
    for update in generate_tab.generate_tokens(teacher_state, "Hello there", 0.8, 40, 1.0, 6, 0, False):
        teacher_state = update[0]
    generate_tab.after_run(teacher_state)
    assert all(
        v == SKIP
        for v in room_follow.publish_run(teacher_state, t_room, "Hello there", "one", 0, 0, True, None, "newest")
    )
    polled = lessons_room.poll(student_state, s_room, "Hello there")
    s_room = polled.room
    record = ROOMS._rooms[t_room["code"]].state["run"]
    assert polled.chips.startswith(RESET) and polled.chips.count("pg-gen") == 6
    # sent as it is, drawn in the student's language (Chinese here), not the teacher's
    assert isinstance(polled.heatmap, PlotData) and polled.heatmap.plot is record["figure_zh"]
    titles = [json.loads(record[f])["layout"]["title"]["text"] for f in ("figure", "figure_zh")]
    assert not re.search("[\u4e00-\u9fff]", titles[0]) and re.search("[\u4e00-\u9fff]", titles[1]), titles
    assert json.loads(polled.heatmap.plot)["data"][0]["type"] == "heatmap"
    assert "data-state" in polled.status or "6" in polled.status
    # its status line in the student's own language (the student's page is in Chinese), not the teacher's
    assert polled.status == record["status_zh"] != record["status"]
    assert re.search("[\u4e00-\u9fff]", polled.status) and not re.search("[\u4e00-\u9fff]", record["status"])
    assert polled.view == "one" and polled.layer["value"] == 0 and polled.span == "newest"
    assert student_state.get("run_id") is None  # the student's page ran nothing

    # the teacher changes the head: a new figure, the chips not sent again
    room_follow.publish_run(teacher_state, t_room, "Hello there", "average", 0, 0, True, None, "newest")
    polled = lessons_room.poll(student_state, s_room, "Hello there")
    s_room = polled.room
    assert polled.chips == SKIP and polled.view == "average" and isinstance(polled.heatmap, PlotData)

    # the student types: stepped away; the teacher's next prompt is not followed until Follow
    away = room_follow.prompt_typed(student_state, s_room, "my own")
    s_room = away.room
    assert s_room["follow"] is False and away.room_follow["visible"]
    room_follow.prompt_typed(teacher_state, t_room, "Next prompt")
    assert lessons_room.poll(student_state, s_room, "my own").prompt == SKIP
    s_room, _, follow_button = lessons_room.follow(student_state, s_room)
    assert follow_button["visible"] is False
    polled = lessons_room.poll(student_state, s_room, "my own")
    assert polled.prompt == "Next prompt" and polled.tabs.selected == "generate" and polled.chips.startswith(RESET)

    # a student's page publishes nothing, and cannot publish a run through the rooms
    assert all(
        v == SKIP for v in room_follow.publish_run(student_state, s_room, "x", "one", 0, 0, True, None, "newest")
    )
    with pytest.raises(Exception, match="Only the teacher"):
        ROOMS.publish_run(t_room["code"], s_room["member"], {"id": "1", "chips": "<script>"})
    lessons_room.end_room(teacher_state, t_room)


def test_a_poll_answering_after_a_follow_or_a_step_away_does_not_undo_it(pages):
    """A page's polls run beside its own events: one begun before Follow (or before the student typed)
    answers after it and writes back the room record it began with. The page's next poll still follows
    the teacher after Follow, and still leaves the page alone after it stepped away."""
    from playground.ui.lessons import room_follow

    teacher_state, student_state = pages
    t_room = lessons_room.start_room(teacher_state, None, lessons_tab.first_position(), PROMPT).room
    s_room = lessons_room.join_room(student_state, None, t_room["code"]).room
    s_room = lessons_room.poll(student_state, s_room, "").room

    assert "Students here: 1, all following you" in lessons_room.poll(teacher_state, t_room, PROMPT).room_status
    away = room_follow.prompt_typed(student_state, s_room, "my own").room
    said = lessons_room.poll(teacher_state, t_room, PROMPT).room_status
    assert "Students here: 1; exploring on their own: 1" in said  # (the teacher's page is told)
    room_follow.prompt_typed(teacher_state, t_room, "Next prompt")
    late = lessons_room.poll(student_state, away, "my own")  # begun while away: takes nothing
    assert late.prompt == SKIP and late.room["follow"] is False
    back, status, _ = lessons_room.follow(student_state, away)
    assert back["follow"] is True and "教室" in status
    # the late poll's record lands after Follow's, and the poll chained after Follow reads it
    polled = lessons_room.poll(student_state, late.room, "my own")
    assert polled.prompt == "Next prompt" and polled.room["follow"] is True

    # the other way: a poll begun while following answers after the student typed
    room_follow.prompt_typed(teacher_state, t_room, "Third prompt")
    early = lessons_room.poll(student_state, polled.room, "Next prompt")
    assert early.prompt == "Third prompt" and early.room["follow"] is True
    assert room_follow.prompt_typed(student_state, polled.room, "mine").room["follow"] is False
    room_follow.prompt_typed(teacher_state, t_room, "Fourth prompt")
    after = lessons_room.poll(student_state, early.room, "mine")
    assert after.prompt == SKIP and after.room["follow"] is False
    # with nothing new in the room, a poll still writes the page's record as the room has it
    stale = {**after.room, "follow": True, "moves": early.room["moves"]}
    quiet = lessons_room.poll(student_state, stale, "mine")
    assert quiet.prompt == SKIP and quiet.room["follow"] is False and quiet.room["moves"] == after.room["moves"]
    lessons_room.end_room(teacher_state, t_room)


def test_the_teachers_page_reloaded_leads_its_room_again_with_the_key_its_browser_kept(pages):
    """``?room=new`` gives the page its key once (for the browser's local storage, room_keep.SAVE_JS); the
    page reloaded at ``?room=CODE`` with that key leads the room again and draws its step; a wrong, another
    room's or an ended room's key, or none, is a student's join; a student's page is never given a key (its
    member id, for the browser to keep)."""
    import json
    from types import SimpleNamespace

    from playground.ui.lessons import room_keep

    teacher_state, student_state = pages

    def load(code, saved, state):
        request = SimpleNamespace(query_params={"room": code}, headers={"host": "127.0.0.1:7860"}, url=None)
        return lessons_room.Entered(*lessons_room.from_link(state, None, PROMPT, None, saved, request)[:-2])

    started = load("new", "", teacher_state)
    code, key = started.room["code"], started.room["key"]
    assert json.loads(started.room_secret) == {"code": code, "key": key}
    assert key not in started.room_status and key not in started.room_qr and "<svg" in started.room_qr
    other = load("new", "", teacher_state).room

    again = load(code.lower(), room_keep.secret(code, key), teacher_state)
    assert again.room["key"] == key and again.room["resumed"] and again.room_secret == SKIP
    assert again.room_teacher_row["visible"] and "<svg" in again.room_qr
    lessons_room.publish_move(
        teacher_state, started.room, lessons_tab.move(teacher_state, None, PROMPT, +1).lesson_pos, PROMPT
    )
    polled = lessons_room.poll(teacher_state, again.room, "")
    assert polled.lesson_pos["step"] == 1 and polled.prompt == PROMPT and polled.room["resumed"] is False
    assert lessons_room.poll(teacher_state, polled.room, PROMPT).lesson_pos == SKIP  # drawn once

    for saved in (
        "",
        "not json",
        room_keep.secret(code, other["key"]),
        room_keep.secret(other["code"], key),
        json.dumps({"code": code, "key": ["x"]}),
    ):
        joined = load(code, saved, student_state)
        assert joined.room["member"] and not joined.room.get("key"), saved
        assert json.loads(joined.room_secret) == {"code": code, "member": joined.room["member"]}  # (no key)
        assert not joined.room_teacher_row["visible"] and joined.room_qr == ""

    ended = lessons_room.end_room(teacher_state, again.room)
    assert json.loads(ended.room_secret) == {"code": code, "ended": True} and ended.room_qr == ""
    gone = load(code, room_keep.secret(code, key), teacher_state)
    assert gone.room == SKIP and "ended" in gone.room_status
    lessons_room.end_room(teacher_state, {**other})


def test_a_students_page_loaded_again_joins_as_the_same_member_and_keeps_its_vote(pages):
    """A student's page keeps its member id in the browser (the room_secret box, for room_keep.SAVE_JS) and
    joins with it again when it loads again (LOAD_JS) or Joins the same code typed (JOIN_JS): the same member,
    its vote still its own, in step again, and the teacher's page still counts one student here, one answered.
    An id the room never gave, or one kept for another room, is a new member."""
    import json
    from types import SimpleNamespace

    from playground.ui.lessons import room_follow, room_keep

    teacher_state, student_state = pages
    start = lessons_tab.first_position()
    t_room = lessons_room.start_room(teacher_state, None, start, PROMPT).room
    code = t_room["code"]

    def load(saved):
        request = SimpleNamespace(query_params={"room": code}, headers={"host": "127.0.0.1:7860"}, url=None)
        return lessons_room.Entered(*lessons_room.from_link(student_state, None, PROMPT, None, saved, request)[:-2])

    first = load("")
    member = first.room["member"]
    assert json.loads(first.room_secret) == {"code": code, "member": member}  # for the browser to keep
    s_room = lessons_room.poll(student_state, first.room, "").room
    assert "pg-ok" in room_voting.open_vote(teacher_state, t_room, start, PROMPT)
    s_room = lessons_room.poll(student_state, s_room, "").room
    choice = s_room["vote"]["choices"][0][0]
    assert "pg-ok" in room_voting.cast(student_state, s_room, choice)
    away = room_follow.prompt_typed(student_state, s_room, "my own").room  # stepped away, then reloaded
    assert away["follow"] is False

    again = load(first.room_secret)
    assert again.room["member"] == member and json.loads(again.room_secret) == {"code": code, "member": member}
    polled = lessons_room.poll(student_state, again.room, "")
    assert polled.room_vote["value"] == choice  # its vote, still its own
    assert polled.room["follow"] is True and polled.lesson_pos == start  # a page loads in step
    typed = lessons_room.join_room(student_state, None, code.lower(), room_keep.secret(code, member=member))
    assert typed.room["member"] == member
    status = lessons_room.poll(teacher_state, t_room, PROMPT).room_status
    assert "Students here: 1, all following you" in status and "1 of 1 here answered" in status, status
    assert list(ROOMS._rooms[code].members) == [member]

    for saved in (
        room_keep.secret(code, member="made-up"),
        room_keep.secret("ZZZZZZ", member=member),  # (kept for another room's code)
        json.dumps({"code": code, "member": ["x"]}),
        "not json",
    ):
        fresh = load(saved).room["member"]
        assert fresh and fresh not in (member, "made-up"), saved
    assert len(ROOMS._rooms[code].members) == 5
    lessons_room.end_room(teacher_state, t_room)


def test_the_teachers_page_shows_the_rooms_counts_only_when_the_teacher_chooses(pages):
    """The teacher's page is the class's screen: it says how many of the students here answered, and the
    counts so far only once the teacher ticks "show the answers so far" (in either language); a new vote
    starts with them hidden again (the box unticked). A student's page never has the counts before Reveal."""
    from playground.ui.lessons.room_views import label_in

    teacher_state, student_state = pages
    start = lessons_tab.first_position()
    t_room = lessons_room.start_room(teacher_state, None, start, PROMPT).room
    s_room = lessons_room.join_room(student_state, None, t_room["code"]).room
    s_room = lessons_room.poll(student_state, s_room, "").room
    assert "pg-ok" in room_voting.open_vote(teacher_state, t_room, start, PROMPT)
    s_room = lessons_room.poll(student_state, s_room, "").room
    choice, label = s_room["vote"]["choices"][0]
    assert "pg-ok" in room_voting.cast(student_state, s_room, choice)
    counted = f"“{label_in(label, 'en')}” 1"

    polled = lessons_room.poll(teacher_state, t_room, PROMPT)
    t_room = polled.room
    assert "1 of 1 here answered" in polled.room_status and counted not in polled.room_status
    assert polled.room_show_counts["value"] is False  # a new vote: its counts hidden
    t_room, status, bars = room_voting.show_counts(teacher_state, t_room, True)
    assert t_room["show_counts"] == t_room["vote"]["id"] and f"1 of 1 here answered: {counted}" in status
    # and as the room's histogram: a bar per choice, the chosen one full, no answer marked before Reveal
    assert f"data-choice='{choice}' data-count='1'" in bars and "width:100%" in bars and "✓" not in bars
    assert bars.count("class='pg-room-bar'") == len(t_room["vote"]["choices"])
    again = lessons_room.poll(teacher_state, t_room, PROMPT)  # each poll keeps them, drawn from the newest tally
    assert counted in again.room_status and f"data-choice='{choice}' data-count='1'" in again.room_result
    zh = lessons_room.poll({**teacher_state, "lang": "zh-CN"}, t_room, PROMPT).room_status
    assert f"在场 1 人中已有 1 人作答：“{label_in(label, 'zh-CN')}” 1" in zh, zh
    seen = lessons_room.poll(student_state, s_room, "")
    assert "counts" not in ROOMS.state(t_room["code"], member=s_room["member"])["vote"]
    assert seen.room_result in (SKIP, "") and seen.room_show_counts == SKIP
    t_room, status, bars = room_voting.show_counts(teacher_state, t_room, False)
    assert "1 of 1 here answered" in status and counted not in status and bars == ""
    assert lessons_room.poll(teacher_state, t_room, PROMPT).room_result == SKIP  # hidden: no bars drawn again

    t_room, *_ = room_voting.show_counts(teacher_state, t_room, True)
    assert "pg-ok" in room_voting.open_vote(teacher_state, t_room, start, PROMPT)  # a new vote
    polled = lessons_room.poll(teacher_state, t_room, PROMPT)
    assert polled.room["show_counts"] is None and polled.room_show_counts["value"] is False
    assert "0 of 1 here answered" in polled.room_status and "“" not in polled.room_status
    assert room_voting.show_counts(student_state, s_room, True)[0] == SKIP  # a student's page has no such box
    lessons_room.end_room(teacher_state, t_room)


def test_the_join_link_uses_the_lan_address_when_the_server_listens_beyond_loopback(monkeypatch):
    from types import SimpleNamespace

    from playground.ui.lessons import room_views

    request = SimpleNamespace(headers={"host": "127.0.0.1:7860"}, url=None)
    monkeypatch.setattr(room_views, "lan_address", lambda: "192.168.1.20")
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    assert room_views.join_link("ABCDEF", request) == "http://127.0.0.1:7860/?room=ABCDEF"  # loopback only
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    link = room_views.join_link("ABCDEF", request)
    assert link == "http://192.168.1.20:7860/?room=ABCDEF"
    lan = SimpleNamespace(headers={"host": "10.0.0.5:7860"}, url=None)  # the address the teacher's browser used
    assert room_views.join_link("ABCDEF", lan) == "http://10.0.0.5:7860/?room=ABCDEF"
    qr = room_views.qr_html(link)
    assert f"data-link='{link}'" in qr and "<svg" in qr and "viewBox" in qr  # sized by CSS (large in presenter mode)


def test_the_join_link_takes_the_host_gpt_playground_listens_on(monkeypatch):
    from types import SimpleNamespace

    from playground.ui import serve
    from playground.ui.lessons import room_views

    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")  # (put back as it was after the test)
    monkeypatch.delenv("GRADIO_SERVER_NAME")
    launched = {}
    monkeypatch.setattr(serve, "prepare", lambda: "page")
    monkeypatch.setattr(serve, "serve", lambda page, **launch: launched.update(launch))
    monkeypatch.setattr(room_views, "lan_address", lambda: "192.168.1.20")
    request = SimpleNamespace(headers={"host": "127.0.0.1:7860"}, url=None)  # the teacher's browser on loopback

    serve.main(["--port", "7861"])
    assert launched == {"server_port": 7861}
    assert room_views.join_link("ABCDEF", request) == "http://127.0.0.1:7860/?room=ABCDEF"
    serve.main(["--host", "0.0.0.0"])
    assert launched["server_name"] == "0.0.0.0"
    assert room_views.join_link("ABCDEF", request) == "http://192.168.1.20:7860/?room=ABCDEF"
    serve.main(["--host", "192.168.1.5"])  # one address of the machine: the link takes that one
    assert room_views.join_link("ABCDEF", request) == "http://192.168.1.5:7860/?room=ABCDEF"
    serve.main(["--host", "localhost"])
    assert room_views.join_link("ABCDEF", request) == "http://127.0.0.1:7860/?room=ABCDEF"


class Unroutable:
    """A UDP socket on a LAN with no route out: ``connect`` finds no route."""

    def __init__(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def connect(self, address):
        raise OSError(101, "Network is unreachable")


def interfaces(**named):
    """psutil.net_if_addrs()'s shape: each interface's addresses (IPv4 unless they hold a colon)."""
    import socket
    from types import SimpleNamespace

    family = lambda a: socket.AF_INET6 if ":" in a else socket.AF_INET
    return {name: [SimpleNamespace(family=family(a), address=a) for a in addrs] for name, addrs in named.items()}


def test_on_a_lan_with_no_route_out_the_join_link_takes_an_interfaces_private_address(monkeypatch):
    import socket
    from types import SimpleNamespace

    import psutil

    from playground.ui.lessons import room_views

    monkeypatch.setattr(
        room_views, "socket", SimpleNamespace(socket=Unroutable, AF_INET=socket.AF_INET, SOCK_DGRAM=socket.SOCK_DGRAM)
    )
    found = {}
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: found["addrs"])
    monkeypatch.setattr(psutil, "net_if_stats", lambda: found.get("stats", {}))

    def lan(**named):
        found["addrs"] = interfaces(**named)
        return room_views.lan_address()

    assert (
        lan(
            lo=["127.0.0.1", "::1"],
            eth0=["169.254.7.9", "fe80::1"],  # link-local: nobody answered
            docker0=["172.17.0.1"],
            eth1=["203.0.113.9"],
            wlan0=["192.168.4.7", "fe80::2"],
        )
        == "192.168.4.7"
    )
    assert lan(docker0=["172.17.0.1"], eth1=["203.0.113.9"], eth0=["10.1.2.3"]) == "10.1.2.3"
    assert lan(eth1=["203.0.113.9"], docker0=["172.17.0.1"]) == "172.17.0.1"
    assert lan(eth1=["203.0.113.9"], eth0=["169.254.7.9"]) == "203.0.113.9"  # a public address before none
    assert lan(lo=["127.0.0.1"], eth0=["169.254.7.9", "fe80::1"]) is None
    found["stats"] = {"wlan0": SimpleNamespace(isup=False), "eth0": SimpleNamespace(isup=True)}
    assert lan(wlan0=["192.168.4.7"], eth0=["10.1.2.3"]) == "10.1.2.3"  # an interface that is down is passed over

    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    request = SimpleNamespace(headers={"host": "localhost:7860"}, url=None)
    assert room_views.join_link("ABCDEF", request) == "http://10.1.2.3:7860/?room=ABCDEF"


def test_a_route_out_names_the_lan_address_before_the_interfaces(monkeypatch):
    import socket
    from types import SimpleNamespace

    import psutil

    from playground.ui.lessons import room_views

    class Routed(Unroutable):
        def connect(self, address):
            pass

        def getsockname(self):
            return ("10.0.0.8", 40000)

    monkeypatch.setattr(
        room_views, "socket", SimpleNamespace(socket=Routed, AF_INET=socket.AF_INET, SOCK_DGRAM=socket.SOCK_DGRAM)
    )
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: interfaces(wlan0=["192.168.4.7"]))
    assert room_views.lan_address() == "10.0.0.8"


def test_the_teachers_status_says_when_the_link_opens_on_this_computer_only():
    from playground.ui.lessons import room_views

    room = {"code": "ABCDEF", "key": "k", "link": "http://127.0.0.1:7860/?room=ABCDEF"}
    for lang, words in (("en", "Only this computer"), ("zh-CN", "只有这台电脑")):
        status = room_views.teacher_status(room, lang)  # (a poll's redraw: the link the room holds)
        local = next(line for line in status.split("  \n") if words in line)
        assert "`gpt-playground --host 0.0.0.0`" in local and local != status.split("  \n")[0]
        tally = {"here": 2}
        assert local in room_views.teacher_status(room, lang, "http://[::1]:7860/?room=ABCDEF", tally)
        assert local in room_views.teacher_status(room, lang, "http://localhost:7860/?room=ABCDEF")
        for link in ("http://192.168.1.20:7860/?room=ABCDEF", "https://my-space.hf.space/?room=ABCDEF"):
            assert words not in room_views.teacher_status(room, lang, link, tally)


def test_a_student_cannot_publish_a_run_through_the_api(app_url):
    teacher, student, code, key, member = a_teacher_and_a_student(app_url)
    assert teacher.predict(code, key, api_name="/room_publish_run")["key"] == "room.no_run"  # nothing generated yet
    for crafted in (member, code, "", key[:-1] + ("A" if key[-1] != "A" else "B")):
        assert student.predict(code, crafted, api_name="/room_publish_run")["key"] == "room.not_teacher"
    teacher.predict("ROMEO:", 0.8, 40, 1.0, 4, 0, False, api_name="/generate")
    assert "version" in teacher.predict(code, key, api_name="/room_publish_run")
    run = student.predict(code, None, member, "", api_name="/room_state")["state"]["run"]
    assert run["chips"].count("pg-gen") == 4 and run["figure"] and "data" in run["figure"]
    teacher.predict(code, key, api_name="/room_end")
