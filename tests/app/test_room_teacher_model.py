"""Classroom mode (issue 35): students follow the teacher's model, and see the teacher's computed views.

The teacher's page publishes its session's model (its recipe and model cache key); a following student's
page takes it (its session's recipe, the Model tab's form), the model cache holding one model for all of
them. A lesson step drawn for the room is computed once per language on the server (the step's question
asked of the live model once, however many follow) and every follower's figure equals the one the
teacher's page draws; a student who steps away keeps their own model until Follow. One room's drawings
are never another's, and they go when the room ends. Then through the running app: the model a teacher's
run is published with."""

import json

import pytest
from gradio.components.plot import PlotData
from gradio_client import Client

from playground import PRESETS
from playground.server import lessons
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe, recipe_key
from playground.server.room_steps import DRAWN
from playground.ui.common import session_model
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import tab as lessons_tab

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"
FOLLOWERS = 4  # three English pages and one Chinese


def plot_of(value):
    """A plot output's plotly JSON (a figure, or an update holding one), as the page is sent it."""
    value = value.get("value") if isinstance(value, dict) else value
    if isinstance(value, PlotData):
        return json.loads(value.plot)
    return json.loads(value.to_json())


@pytest.fixture
def rooms_pages():
    teacher = {"recipe": random_recipe(PRESETS["nano"], seed=3), "run_id": None, "lang": "en", "session": "t1"}
    students = [
        {"recipe": random_recipe(PRESETS["nano"], seed=0), "run_id": None, "lang": lang, "session": f"s{i}"}
        for i, lang in enumerate(["en"] * (FOLLOWERS - 1) + ["zh-CN"])
    ]
    return teacher, students


def test_followers_take_the_teachers_model_and_its_step_drawn_once(rooms_pages, monkeypatch):
    teacher, students = rooms_pages
    pos = {"lesson": "attention", "step": 0}  # one head's attention row: the live model's numbers
    t_room = lessons_room.start_room(teacher, None, pos, PROMPT).room
    published = lessons_room.ROOMS.state(t_room["code"])["state"]
    assert published["model_key"] == recipe_key(teacher["recipe"]) and published["recipe"] == teacher["recipe"]

    asked = []
    real_ask = lessons.ask
    monkeypatch.setattr(lessons, "ask", lambda *a, **k: asked.append(a[1]) or real_ask(*a, **k))
    rooms = [lessons_room.join_room(s, None, t_room["code"]).room for s in students]
    polled = [lessons_room.poll(s, r, "") for s, r in zip(students, rooms)]
    # the step asked of the live model once per language, for all the followers, on the teacher's model
    assert len(asked) == 2 and all(m is session_model(teacher) for m in asked), len(asked)
    for s, p in zip(students, polled):
        assert p.state["recipe"] == teacher["recipe"] and p.state["session"] == s["session"]
        assert p.weights == "random" and p.seed_init == 3 and p.n_layers == PRESETS["nano"].n_layers  # the form
        assert p.lesson_pos == pos and p.prompt == PROMPT
    # one model for all: each student's session gets the very model the teacher's has
    assert all(session_model(p.state) is session_model(teacher) for p in polled)
    assert sum(1 for k in CACHE.keys() if k == recipe_key(teacher["recipe"])) == 1

    # each follower's figure is the teacher's, number for number (the teacher's page draws its own step)
    mine = lessons_tab.show(teacher, pos, PROMPT)
    want = plot_of(mine.plot)["data"]
    for p in polled[:-1]:
        assert plot_of(p.plot)["data"] == want
    zh = plot_of(polled[-1].plot)
    assert [t.get("y") for t in zh["data"]] == [t.get("y") for t in want]  # the same numbers, in Chinese words
    assert zh["layout"]["title"]["text"] != plot_of(mine.plot)["layout"]["title"]["text"]

    # the teacher moves: once more per language, not once per follower
    moved = lessons_tab.move(teacher, pos, PROMPT, +1)  # (the teacher's page draws its own step)
    lessons_room.publish_move(teacher, t_room, moved.lesson_pos, PROMPT)
    asked.clear()
    rooms = [p.room for p in polled]
    states = [p.state for p in polled]
    polled = [lessons_room.poll(s, r, PROMPT) for s, r in zip(states, rooms)]
    assert len(asked) == 2 and all(p.lesson_pos == moved.lesson_pos for p in polled)
    assert all(p.state == lessons_room.gr.skip() for p in polled)  # the model taken once, not again

    # a student who steps away and builds another model keeps it; Follow takes the teacher's again
    own = {**states[0], "recipe": random_recipe(PRESETS["nano"], seed=7)}
    away = lessons_room.publish_move(own, polled[0].room, moved.lesson_pos, PROMPT)[0]
    lessons_room.publish_move(teacher, t_room, pos, PROMPT)
    assert lessons_room.poll(own, away, PROMPT).state == lessons_room.gr.skip()
    back = lessons_room.follow(own, away)[0]
    assert lessons_room.poll(own, back, PROMPT).state["recipe"] == teacher["recipe"]

    # another room's drawings are its own; a room's go when it ends
    other = lessons_room.start_room({**teacher, "session": "t2"}, None, pos, PROMPT).room
    assert DRAWN.held(other["code"]) == 0 and DRAWN.held(t_room["code"]) > 0
    lessons_room.end_room(teacher, t_room)
    assert DRAWN.held(t_room["code"]) == 0
    lessons_room.end_room(teacher, other)


def test_a_teachers_published_run_names_its_model(app_url):
    teacher, student = Client(app_url, verbose=False), Client(app_url, verbose=False)
    room = teacher.predict(api_name="/room_create")
    code, key = room["code"], room["key"]
    member = student.predict(code, api_name="/room_join")["member"]
    teacher.predict("ROMEO:", 0.8, 40, 1.0, 3, 0, False, api_name="/generate")
    assert "version" in teacher.predict(code, key, api_name="/room_publish_run")
    state = student.predict(code, None, member, "", api_name="/room_state")["state"]
    assert isinstance(state["recipe"], dict) and state["model_key"] == recipe_key(state["recipe"])
    # an API caller cannot name the room's model: it is no field of what a teacher publishes
    refused = teacher.predict(code, key, {"recipe": {"kind": "file", "path": "/etc"}}, api_name="/room_publish")
    assert refused.get("key") == "room.state_unknown", refused
    teacher.predict(code, key, api_name="/room_end")
