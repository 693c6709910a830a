"""Classroom mode (issue 35): the server publishes a teacher's moves as they happen, not after the page hears.

A teacher's Generate run is published to the room the moment it ends (``room_follow.publish_ended``, from the
Generate handler through ``listeners.run_ended``), and a lesson step the moment the page moves to it
(``room_lead.moved``, from the step's own handler): the followers do not wait for the teacher's page to be told
and to ask again. The page's own publication after each (chained in the page, as before) then finds the room
there and sends nothing, or corrects what the server could not know (a view the page shows differently)."""

import json
import time

import pytest

from playground import PRESETS
from playground.server.recipes import random_recipe
from playground.server.rooms import ROOMS
from playground.ui import listeners
from playground.ui.attention_view import SPANS, VIEWS
from playground.ui.chips import all_chips
from playground.ui.common import session_run
from playground.ui.generate import tab as generate_tab
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import room_follow
from playground.ui.lessons import tab as lessons_tab

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"


@pytest.fixture
def teacher_and_student():
    teacher = {"recipe": random_recipe(PRESETS["nano"], seed=3), "run_id": None, "lang": "en", "session": "lead-1"}
    student = {"recipe": random_recipe(PRESETS["nano"], seed=0), "run_id": None, "lang": "zh-CN", "session": "kid-1"}
    t_room = lessons_room.start_room(teacher, None, {"lesson": "attention", "step": 0}, PROMPT).room
    s_room = lessons_room.join_room(student, None, t_room["code"]).room
    yield teacher, t_room, student, s_room
    lessons_room.end_room(teacher, t_room)


def published(code: str) -> dict:
    return ROOMS.state(code)["state"]


def z_of(figure) -> list:
    plot = figure if isinstance(figure, str) else figure.to_json()
    return json.loads(plot)["data"][0]["z"]


def test_a_teachers_run_reaches_the_room_as_it_ends(teacher_and_student, monkeypatch):
    teacher, t_room, student, s_room = teacher_and_student
    code = t_room["code"]
    listeners.on_run_ended(room_follow.publish_ended)  # (what the page's wiring does)
    drawn = []
    real = room_follow._publish_drawn
    monkeypatch.setattr(room_follow, "_publish_drawn", lambda *a: drawn.append(str(a[3].id)) or real(*a))

    updates = list(generate_tab.generate_tokens(teacher, "ROMEO: What light", 0.8, 40, 1.0, 6, 0, False))
    state = updates[-1][0]
    run = session_run(state)
    deadline = time.monotonic() + 30
    while (published(code).get("run") or {}).get("id") != str(run.id) and time.monotonic() < deadline:
        time.sleep(0.02)  # (published from a thread of its own, beside the page's last update)
    record = published(code)["run"]
    assert record["id"] == str(run.id) and drawn == [str(run.id)]
    # what the teacher's page draws after its run (its default view): the same map, chips and end
    mine = generate_tab.after_run(state).heatmap
    assert z_of(record["figure"]) == z_of(record["figure_zh"]) == z_of(mine)
    assert record["chips"] == all_chips(run) and "data-state='done'" in record["status"]
    assert published(code)["tab"] == "generate" and published(code)["view"]["view"] == VIEWS[0]
    version = ROOMS.state(code)["version"]
    assert record["version"] == version  # (the place and the run in one version)

    # the page's own publication after its run: the same run and view, nothing drawn, nothing sent
    room_follow.publish_new_run(state, t_room, None, VIEWS[0], 0, 0, True, SPANS[0])
    assert ROOMS.state(code)["version"] == version and drawn == [str(run.id)]
    # ... though a prompt the page has that the room has not is sent
    room_follow.publish_new_run(state, t_room, "ROMEO: What light", VIEWS[0], 0, 0, True, SPANS[0])
    assert published(code)["prompt"] == "ROMEO: What light" and drawn == [str(run.id)]
    # the page shows another head than the server knew of: its publication corrects the room's map
    room_follow.publish_new_run(state, t_room, None, VIEWS[0], 1, 1, True, SPANS[0])
    again = published(code)["run"]
    assert drawn == [str(run.id)] * 2 and again["version"] > version
    assert z_of(again["figure"]) == z_of(generate_tab.after_run(state, VIEWS[0], 1, 1).heatmap) != z_of(mine)
    # a follower's next poll shows it: the map in its own language, the teacher's numbers
    polled = lessons_room.poll(student, s_room, "")
    assert polled.room_shown == again["version"] and z_of(polled.heatmap.plot) == z_of(again["figure"])


def test_a_run_of_a_page_that_leads_no_room_is_published_nowhere(monkeypatch):
    listeners.on_run_ended(room_follow.publish_ended)
    started = []
    monkeypatch.setattr(room_follow.threading, "Thread", lambda *a, **k: started.append(k) or pytest.fail("a thread"))
    alone = {"recipe": random_recipe(PRESETS["nano"], seed=3), "run_id": None, "lang": "en", "session": "alone-1"}
    assert list(generate_tab.generate_tokens(alone, "ROMEO:", 0.8, 40, 1.0, 3, 0, False)) and not started


def test_a_teachers_step_reaches_the_room_as_the_page_moves(teacher_and_student):
    teacher, t_room, student, s_room = teacher_and_student
    code = t_room["code"]
    at = {"lesson": "attention", "step": 0}
    version = ROOMS.state(code)["version"]
    shown = lessons_tab.next_step(teacher, at, PROMPT)
    assert shown.lesson_pos == {"lesson": "attention", "step": 1}
    assert (published(code)["lesson"], published(code)["step"]) == ("attention", 1)
    assert ROOMS.state(code)["version"] == version + 1
    # the page's own publication after its step: the room is there, nothing is sent
    assert lessons_room.publish_move(teacher, t_room, shown.lesson_pos, PROMPT) == (lessons_room.gr.skip(),) * 4
    assert ROOMS.state(code)["version"] == version + 1
    # Back, and a lesson picked, likewise; an unknown lesson is published nowhere
    lessons_tab.step_back(teacher, shown.lesson_pos, PROMPT)
    assert published(code)["step"] == 0
    lessons_tab.open_lesson(teacher, "embeddings", PROMPT)
    assert (published(code)["lesson"], published(code)["step"]) == ("embeddings", 0)
    version = ROOMS.state(code)["version"]
    lessons_tab.open_lesson(teacher, "no-such-lesson", PROMPT)
    assert ROOMS.state(code)["version"] == version
    # a student's own move publishes nothing (it steps away: ``publish_move`` says so to the room)
    lessons_tab.next_step(student, {"lesson": "embeddings", "step": 0}, PROMPT)
    assert ROOMS.state(code)["version"] == version and published(code)["step"] == 0
    # a room that ended: the teacher's next move is published nowhere and fails nothing
    ROOMS.end(code, t_room["key"])
    assert lessons_tab.next_step(teacher, {"lesson": "embeddings", "step": 0}, PROMPT).lesson_pos["step"] == 1
