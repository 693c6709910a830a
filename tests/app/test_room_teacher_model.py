"""Classroom mode (issue 35): students follow the teacher's model, and see the teacher's computed views.

The teacher's page publishes its session's model (its recipe and model cache key); a following student's
page takes it (its session's recipe, the Model tab's form), the model cache holding one model for all of
them. A lesson step drawn for the room is computed once per language on the server (the step's question
asked of the live model once, however many follow) and every follower's figure equals the one the
teacher's page draws; a student who steps away keeps their own model until Follow. One room's drawings
are never another's, and they go when the room ends. The teacher's Inside view (its sub-tab, selection and
figures) reaches every follower the same way: drawn on the server once per language. Then through the
running app: the model a teacher's run is published with."""

import json

import pytest
from gradio.components.plot import PlotData

from playground import PRESETS
from playground.server import lessons
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe, recipe_key
from playground.server.room_steps import DRAWN
from playground.ui.common import session_model
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import tab as lessons_tab
from playground.ui.results import skipped
from tests.app.room_clients import a_teacher_and_a_student

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


def room_after_a_run(rooms_pages, followers: int | None = None):
    """The teacher generates 5 tokens and starts a room on the attention lesson; ``followers`` students (all
    by default) join and poll once: (teacher's state, teacher's room, students' states, students' rooms)."""
    from playground.ui.generate import tab as generate_tab

    teacher, students = rooms_pages
    for update in generate_tab.generate_tokens(teacher, "ROMEO: What light", 0.8, 40, 1.0, 5, 0, False):
        teacher = update[0]
    t_room = lessons_room.start_room(teacher, None, {"lesson": "attention", "step": 0}, PROMPT).room
    students = students[:followers]
    rooms = [lessons_room.join_room(s, None, t_room["code"]).room for s in students]
    polled = [lessons_room.poll(s, r, "") for s, r in zip(students, rooms)]
    return teacher, t_room, [p.state for p in polled], [p.room for p in polled]


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
        assert p.layer["maximum"] == PRESETS["nano"].n_layers - 1  # the Generate tab's sliders: its ranges
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
    polled = lessons_room.poll(own, back, PROMPT)
    assert polled.state["recipe"] == teacher["recipe"]
    # the teacher builds another model in the Model tab: published as it is built, and taken
    from playground.ui.lessons import room_follow

    rebuilt = {**teacher, "recipe": random_recipe(PRESETS["nano"], seed=5)}
    assert all(v == lessons_room.gr.skip() for v in room_follow.model_built(rebuilt, t_room))
    again = lessons_room.poll(polled.state, polled.room, PROMPT)
    assert again.state["recipe"] == rebuilt["recipe"] and again.seed_init == 5
    assert again.lesson_pos == pos and again.plot != lessons_room.gr.skip()  # the step drawn again, on it

    # another room's drawings are its own; a room's go when it ends
    other = lessons_room.start_room({**teacher, "session": "t2"}, None, pos, PROMPT).room
    assert DRAWN.held(other["code"]) == 0 and DRAWN.held(t_room["code"]) > 0
    lessons_room.end_room(teacher, t_room)
    assert DRAWN.held(t_room["code"]) == 0
    lessons_room.end_room(teacher, other)


def test_a_teachers_published_run_names_its_model(app_url):
    teacher, student, code, key, member = a_teacher_and_a_student(app_url)
    teacher.predict("ROMEO:", 0.8, 40, 1.0, 3, 0, False, api_name="/generate")
    assert "version" in teacher.predict(code, key, api_name="/room_publish_run")
    state = student.predict(code, None, member, "", api_name="/room_state")["state"]
    assert isinstance(state["recipe"], dict) and state["model_key"] == recipe_key(state["recipe"])
    # an API caller cannot name the room's model: it is no field of what a teacher publishes
    refused = teacher.predict(code, key, {"recipe": {"kind": "file", "path": "/etc"}}, api_name="/room_publish")
    assert refused.get("key") == "room.state_unknown", refused
    teacher.predict(code, key, api_name="/room_end")


def test_followers_see_the_teachers_inside_view_drawn_on_the_server_once(rooms_pages, monkeypatch):
    """The teacher's attention maths (layer, head, position) and lens reach every follower as the teacher's
    page drew them: the view drawn twice (English, 中文) on the teacher's run, however many follow."""
    from playground.ui.inside import opening
    from playground.ui.inside import tab as inside_tab
    from playground.ui.lessons import room_inside

    teacher, t_room, states, rooms = room_after_a_run(rooms_pages)
    students = rooms_pages[1]

    drawn = []
    maths = lambda state, *a: drawn.append(state["lang"]) or inside_tab.maths_view(state, *a)  # noqa: E731
    names = ("m_layer", "m_head", "m_pos")
    publish = room_inside.publisher("maths", maths, names)
    assert all(v == lessons_room.gr.skip() for v in publish(teacher, t_room, 1, 1, 4))
    polled = [lessons_room.poll(s, r, PROMPT) for s, r in zip(states, rooms)]
    assert sorted(drawn) == ["en", "zh-CN"]  # once per language, for all four followers
    mine = inside_tab.maths_view(teacher, 1, 1, 4)
    for p, s in zip(polled, students):
        assert p.tabs.selected == "inside" and p.sub_tabs.selected == "inside-maths"
        assert (p.m_layer, p.m_head, p.m_pos) == (1, 1, 4) and p.room_followed
        figure = json.loads(p.m_plot.plot)
        assert [t.get("y") for t in figure["data"]] == [t.get("y") for t in json.loads(mine.m_plot.to_json())["data"]]
        assert p.m_table.values.tolist() == mine.m_table.values.tolist() or s["lang"] != "en"
        assert p.state == lessons_room.gr.skip() or p.state.get("run_id") is None  # the student ran nothing
    zh = json.loads(polled[-1].m_plot.plot)["layout"]["title"]["text"]
    assert zh != json.loads(polled[0].m_plot.plot)["layout"]["title"]["text"]
    # the page's own opening of the tab it followed to draws nothing over the teacher's view
    opened = opening.open_tab(students[0], None, None, None, None, None, followed=polled[0].room_followed)
    assert opened.room_followed is None  # (this once: the student's own next opening draws the page's)
    assert all(v == lessons_room.gr.skip() for v in opened._replace(room_followed=lessons_room.gr.skip()))
    # unchanged: not sent again; the teacher's lens next: the lens tab and the teacher's cell
    rooms = [p.room for p in polled]
    assert lessons_room.poll(states[0], rooms[0], PROMPT).m_plot == lessons_room.gr.skip()
    lens = room_inside.publisher("lens", inside_tab.lens_view, (None, "lens_layer", "lens_pos"))
    lens(teacher, t_room, None, 2, 3, None)
    p = lessons_room.poll(states[0], rooms[0], PROMPT)
    assert p.sub_tabs.selected == "inside-lens" and (p.lens_layer, p.lens_pos) == (2, 3)
    want = inside_tab.lens_view(teacher, None, 2, 3, None)
    assert json.loads(p.lens_plot.plot)["data"][0]["z"] == json.loads(want.lens_plot.to_json())["data"][0]["z"]
    assert p.cell_md == want.cell_md
    # the English page switches to 中文: the teacher's lens in Chinese, as the room holds it (nothing drawn)
    redrawn = room_inside.Followed(*room_inside.redrawn({**states[0], "lang": "zh-CN"}, p.room))
    zh_title = json.loads(redrawn.lens_plot.plot)["layout"]["title"]["text"]
    assert zh_title != json.loads(p.lens_plot.plot)["layout"]["title"]["text"]
    assert redrawn.sub_tabs == lessons_room.gr.skip() and redrawn.lens_layer == 2
    # the student draws a view of their own: stepped away
    away = room_inside.publisher("maths", inside_tab.maths_view, names)(states[0], p.room, 0, 0, 1)
    assert away.room["follow"] is False
    lessons_room.end_room(teacher, t_room)


def test_followers_see_the_teachers_finished_long_views_measured_once(rooms_pages, monkeypatch):
    """The dose-response curve, the head sweep and activation patching stream on the teacher's page; once
    finished, every follower gets the teacher's figure drawn from the numbers that page measured (each
    measured once, however many follow); a stopped one is not published."""
    from playground.server import patching_views as pv
    from playground.server.inside_views import effects
    from playground.ui.inside import layout as inside_layout
    from playground.ui.inside import live, patching
    from playground.ui.lessons import room_inside

    teacher, t_room, states, rooms = room_after_a_run(rooms_pages)
    measured = []
    for module, name in ((effects, "dose_response_points"), (effects, "head_sweep_layers"), (pv, "patching_steps")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _r=real, _n=name, **k: measured.append(_n) or _r(*a, **k))

    def follow(key, view, args, names):
        """The teacher's page publishes view ``key``; every follower polls: (their outputs, their rooms)."""
        assert all(v == lessons_room.gr.skip() for v in room_inside.publisher(key, view, names)(teacher, t_room, *args))
        out = [lessons_room.poll(s, r, PROMPT) for s, r in zip(states, rooms)]
        return out, [p.room for p in out]

    # the dose-response curve: the teacher's last streamed figure is every follower's
    dose_args = ("1.1", None, "")
    *_, last = live.dose_live(None, teacher, *dose_args)
    dose_view = live.finished_view("dose", live.draw_dose)
    polled, rooms = follow("dose", dose_view, dose_args, ("i_scale", "i_pos", "i_target"))
    assert measured == ["dose_response_points"]  # measured once, by the teacher's page
    want = json.loads(last.dose_plot.to_json())["data"]
    assert len(want[0]["y"]) == live.N_ALPHAS
    for p in polled:
        assert p.sub_tabs.selected == "inside-intervene" and p.i_scale == "1.1"
        assert [t.get("y") for t in json.loads(p.dose_plot.plot)["data"]] == [t.get("y") for t in want]
    assert (
        json.loads(polled[-1].dose_plot.plot)["layout"]["title"]["text"]
        != json.loads(last.dose_plot.to_json())["layout"]["title"]["text"]
    )  # (in 中文 for the Chinese page)

    # the head sweep: the teacher's final heatmap and text
    *_, swept = live.sweep_live(None, teacher)
    polled, rooms = follow("sweep", live.finished_view("sweep", inside_layout.draw_sweep), (), ())
    assert measured == ["dose_response_points", "head_sweep_layers"]
    z = json.loads(swept.sweep_plot.to_json())["data"][0]["z"]
    assert len(z) == PRESETS["nano"].n_layers and len(z[0]) == PRESETS["nano"].n_heads
    for p in polled[:-1]:
        assert json.loads(p.sweep_plot.plot)["data"][0]["z"] == z and p.sweep_md == swept.sweep_md
    assert json.loads(polled[-1].sweep_plot.plot)["data"][0]["z"] == z and polled[-1].sweep_md != swept.sweep_md

    # activation patching on a suggested pair: the teacher's grid, and the page's own result forgotten
    pair = pv.SUGGESTED_PAIRS[0]
    pt_args = (pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"], "resid_pre", 0, "0.2", "1.3", "k")
    *_, patched = patching.patch_live(None, teacher, *pt_args)
    names = room_inside.VIEWS["patch"][1]
    polled, rooms = follow("patch", live.finished_view("patch", patching.draw), pt_args, names)
    assert measured == ["dose_response_points", "head_sweep_layers", "patching_steps"]
    exact = json.loads(patched.pt_exact.to_json())["data"][0]["z"]
    for p in polled:
        assert p.sub_tabs.selected == "inside-patching" and p.pt_clean == pair["clean"] and p.pt_via == "k"
        assert json.loads(p.pt_exact.plot)["data"][0]["z"] == exact and p.pt_shown is None
    assert polled[0].pt_md == patched.pt_md and polled[-1].pt_md != patched.pt_md

    # a sweep that finishes nothing (stopped before its first layer) is not published
    monkeypatch.setattr(live, "sweep_steps", lambda state, stop=None: iter(()))
    list(live.sweep_live(None, teacher))
    assert live.finished(teacher, "sweep") is None
    follow("sweep", live.finished_view("sweep", inside_layout.draw_sweep), (), ())
    p = lessons_room.poll(states[0], rooms[0], PROMPT)
    assert p.sweep_plot == lessons_room.gr.skip() and p.sub_tabs == lessons_room.gr.skip()
    lessons_room.end_room(teacher, t_room)


def test_followers_see_the_teachers_long_views_grow(rooms_pages):
    """While the dose-response curve, the head sweep and activation patching stream on the teacher's page, each
    partial figure is the room's: a follower polling mid-way sees the curve with the points so far, the sweep
    with the layers so far (and how far it is, in the page's language) and the grid's cells so far; a room that
    ended gets nothing more."""
    from playground.server import patching_views as pv
    from playground.ui import listeners
    from playground.ui.inside import live, patching
    from playground.ui.lessons import room_inside, room_lead

    listeners.on_streamed(room_inside.publish_streamed)  # (what wiring the page does)
    teacher, t_room, states, rooms = room_after_a_run(rooms_pages, followers=2)
    states[1]["lang"] = "zh-CN"

    # (each partial figure is published once the teacher's page took it: the last partial is the room's)
    *partial, _ = list(live.dose_live(None, teacher, "1.1", None, ""))
    assert partial, "the curve streamed no partial figure"
    y = json.loads(partial[-1].dose_plot.to_json())["data"][0]["y"]
    assert 0 < len(y) < live.N_ALPHAS
    polled = [lessons_room.poll(s, r, PROMPT) for s, r in zip(states, rooms)]
    for p in polled:
        assert p.sub_tabs.selected == "inside-intervene" and p.i_scale == "1.1"
        assert json.loads(p.dose_plot.plot)["data"][0]["y"] == y
    rooms = [p.room for p in polled]

    *partial, _ = list(live.sweep_live(None, teacher))
    assert partial, "the sweep streamed no partial figure"
    z = json.loads(partial[-1].sweep_plot.to_json())["data"][0]["z"]
    assert any(v is None for row in z for v in row)  # (the last layer not swept yet)
    polled = [lessons_room.poll(s, r, PROMPT) for s, r in zip(states, rooms)]
    for p in polled:
        assert p.sub_tabs.selected == "inside-intervene"
        assert json.loads(p.sweep_plot.plot)["data"][0]["z"] == z and p.sweep_md.startswith("⏳")
    assert polled[0].sweep_md != polled[1].sweep_md  # (each in its page's language)
    rooms = [p.room for p in polled]

    pair = pv.SUGGESTED_PAIRS[0]
    pt_args = (pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"], "resid_pre", 0, "0.2", "1.3", "k")
    *partial, _ = list(patching.patch_live(None, teacher, *pt_args))
    assert partial, "patching streamed no partial grid"
    exact = json.loads(partial[-1].pt_exact.to_json())["data"][0]["z"]
    for p in [lessons_room.poll(s, r, PROMPT) for s, r in zip(states, rooms)]:
        assert p.sub_tabs.selected == "inside-patching" and p.pt_clean == pair["clean"]
        assert json.loads(p.pt_exact.plot)["data"][0]["z"] == exact

    lessons_room.end_room(teacher, t_room)
    assert len(list(live.dose_live(None, teacher, "0.1", None, ""))) > 1  # (published to no room: nothing fails)
    assert room_lead._LEADING.get(teacher["session"], "room") is None


def test_the_room_a_page_leads_is_the_pages_whatever_its_state(monkeypatch):
    """A page's load events run at once and one of them gives the page a new state (a new session id): the
    room the page leads is kept under Gradio's id of the page, so its later events still publish to it. Outside
    a request (a test, the library) it is the state's session id."""
    from types import SimpleNamespace

    from gradio.context import LocalContext

    from playground.ui.common import page_id, session_id
    from playground.ui.lessons import room_lead
    from playground.ui.state import new_state

    loaded, later = {}, new_state("en")  # (what room.from_link saw; what the page's other events see)
    assert session_id(loaded) != session_id(later)
    token = LocalContext.request.set(SimpleNamespace(session_hash="a-page", client=None))
    try:
        room_lead.leading(loaded, "ROOM42", "key")
        assert page_id(later) == page_id(loaded) and page_id(later).startswith("page:")
        assert "a-page" not in page_id(later)  # (Gradio's hash is the key to the page's state: not kept)
        assert room_lead._LEADING.get(page_id(later), "room") == {"code": "ROOM42", "key": "key"}
        room_lead.leading(later, None)
        assert room_lead._LEADING.get(page_id(loaded), "room") is None
    finally:
        LocalContext.request.reset(token)
    assert page_id(later) == session_id(later)


def test_a_followers_attention_map_follows_the_pages_language(rooms_pages):
    """The teacher's run's map is published in en and 中文: a following page that switches language shows
    the room's in the new one (nothing drawn again) and its own Generate tab draws nothing over it."""
    from playground.ui.attention_view import SPANS, VIEWS
    from playground.ui.generate import tab as generate_tab
    from playground.ui.lessons import room_follow

    teacher, t_room, states, rooms = room_after_a_run(rooms_pages, followers=2)
    version = room_follow.published_run(
        teacher, t_room["code"], t_room["key"], None, VIEWS[0], 1, 2, True, None, SPANS[0]
    )
    en = lessons_room.poll(states[0], rooms[0], PROMPT)
    assert en.room_shown == version and en.room["run_version"] == version
    mine = generate_tab.attention_views(teacher, VIEWS[0], 1, 2, True, None, SPANS[0]).heatmap
    assert json.loads(en.heatmap.plot)["data"][0]["z"] == json.loads(mine.to_json())["data"][0]["z"]
    # the page switches to 中文: the room's map in Chinese, the same numbers; its own Generate tab draws none
    zh_state = {**states[0], "lang": "zh-CN"}
    heatmap, status = room_follow.redrawn_run(zh_state, en.room, en.room_shown)
    zh = json.loads(heatmap.plot)
    assert zh["data"][0]["z"] == json.loads(mine.to_json())["data"][0]["z"]
    assert zh["layout"]["title"]["text"] != json.loads(en.heatmap.plot)["layout"]["title"]["text"]
    assert status != en.status and status
    relabelled = generate_tab.relabel(zh_state, VIEWS[0], 1, 2, True, None, SPANS[0], 0, en.room_shown)
    assert relabelled.heatmap == relabelled.status == lessons_room.gr.skip()
    assert relabelled.span != lessons_room.gr.skip()  # (its own labels still change)
    # a page that stepped away to another tab still shows the room's map: in the new language too
    away = room_follow.tab_opened("model")(states[0], en.room).room
    assert away["follow"] is False
    assert (
        json.loads(room_follow.redrawn_run(zh_state, away, en.room_shown)[0].plot)["data"][0]["z"] == zh["data"][0]["z"]
    )
    # one whose own hand drew its map: the room's map is not redrawn, the page's own is
    moved = room_follow.moved_by_hand(states[0], en.room)
    assert moved[-1] is None and moved[0]["follow"] is False
    assert room_follow.redrawn_run(zh_state, moved[0], moved[-1]) == (lessons_room.gr.skip(), lessons_room.gr.skip())
    assert hasattr(generate_tab.relabel(zh_state, VIEWS[0], 1, 2, True, None, SPANS[0], 0, None).heatmap, "to_json")
    lessons_room.end_room(teacher, t_room)


def test_a_redraw_that_set_off_before_the_page_took_the_teachers_model_draws_the_teachers(rooms_pages):
    """A page's events each read the session's state as they set off. A late joiner's page loads on the
    default model, its poll then takes the teacher's, and a language redraw that set off before the poll
    (the page's preferences applied at load) answered after it with the default model's summary: the
    page said one model while its session held another. The redraw draws the model the page took."""
    from types import SimpleNamespace

    from playground.server.catalog import count_parameters
    from playground.ui.model import tab as model_tab

    teacher, _ = rooms_pages
    page = SimpleNamespace(session_hash="late-joiner", client=None)
    loaded = model_tab.load_session(None, request=page).state  # the default (bundled) model
    assert recipe_key(loaded["recipe"]) != recipe_key(teacher["recipe"])
    t_room = lessons_room.start_room(teacher, None, {"lesson": "attention", "step": 0}, PROMPT).room
    room = lessons_room.join_room(loaded, None, t_room["code"]).room
    polled = lessons_room.poll(loaded, room, "", request=page)
    assert polled.state["recipe"] == teacher["recipe"]
    teachers = f"{count_parameters(session_model(teacher)):,}"
    assert teachers in polled.summary and teachers != f"{count_parameters(session_model(loaded)):,}"

    # the redraws read the state as it was when they set off: the default model's
    zh = {**loaded, "lang": "zh-CN"}
    assert teachers in model_tab.relabel(page, zh, 3).summary
    assert teachers in model_tab.in_use(page, zh)
    # another page (or a call outside a page) draws the model its state names
    other = SimpleNamespace(session_hash="another-page", client=None)
    assert teachers not in model_tab.relabel(other, zh, 3).summary
    # the page builds a model of its own: that is the one its redraws draw
    own = random_recipe(PRESETS["nano"], seed=11)
    built = model_tab.switch_model(CACHE.get(own), own, "", polled.state, page)
    assert model_tab.relabel(page, polled.state, 3).summary == built.summary
    lessons_room.end_room(teacher, t_room)


def test_a_language_redraw_that_lands_after_the_page_took_the_teachers_model_is_drawn_again(rooms_pages):
    """A follower changes language as the teacher changes model: the Model tab's redraw reads the page's
    model (the old one) just before the room's poll takes the teacher's, and its answer can reach the page
    after the poll's. The check chained after the redraw draws the teacher's model then, and nothing when
    the page took no other model meanwhile."""
    from types import SimpleNamespace

    from playground.server.catalog import count_parameters
    from playground.ui.model import tab as model_tab

    teacher, _ = rooms_pages
    page = SimpleNamespace(session_hash="switching-language", client=None)
    loaded = model_tab.load_session(None, request=page).state
    t_room = lessons_room.start_room(teacher, None, {"lesson": "attention", "step": 0}, PROMPT).room
    room = lessons_room.join_room(loaded, None, t_room["code"]).room
    zh = {**loaded, "lang": "zh-CN"}
    own = f"{count_parameters(session_model(loaded)):,}"
    redrawn = model_tab.relabel(page, zh, 3)  # read first: the page's own (default) model
    assert own in redrawn.summary and own in model_tab.in_use(page, zh)
    assert model_tab.relabelled_again(page, zh, 3) == skipped(model_tab.Relabelled)  # nothing taken since
    polled = lessons_room.poll(loaded, room, "", request=page)  # the poll takes the teacher's model
    teachers = f"{count_parameters(session_model(teacher)):,}"
    assert polled.state["recipe"] == teacher["recipe"] and teachers != own
    again = model_tab.relabelled_again(page, zh, 3)  # (its state input: as the page's events send it)
    assert teachers in again.summary and "参数" in again.summary
    assert model_tab.relabelled_again(page, zh, 3) == skipped(model_tab.Relabelled)  # drawn once
    # the line saying which model is in use, the same way
    assert teachers in model_tab.in_use_again(page, zh)
    assert model_tab.in_use_again(page, zh) == lessons_room.gr.skip()
    lessons_room.end_room(teacher, t_room)


def test_a_lesson_redraw_that_lands_after_the_page_took_the_teachers_step_is_drawn_again(rooms_pages):
    """The same for the Lessons tab: a follower's language redraw reads the page's step (the first) just
    before the room's poll draws the teacher's next one; the check chained after the redraw draws the
    teacher's step then, in the new language, and nothing when the page drew no other step meanwhile."""
    from types import SimpleNamespace

    from playground.ui.lessons import tab as lessons_tab

    teacher, (student, *_) = rooms_pages
    page = SimpleNamespace(session_hash="switching-lesson-language", client=None)
    first = {"lesson": "attention", "step": 0}
    t_room = lessons_room.start_room(teacher, None, first, PROMPT).room
    room = lessons_room.join_room(student, None, t_room["code"]).room
    polled = lessons_room.poll(student, room, "", request=page)  # the room's first step drawn
    room = polled.room
    assert lessons_tab.position(page, None) == first
    zh = {**student, "lang": "zh-CN"}
    redrawn = lessons_tab.redraw(zh, first, PROMPT, None, page)  # read first: the page's own step
    assert redrawn.lesson_pos == first
    assert lessons_tab.redrawn_again(zh, first, PROMPT, None, page) == skipped(lessons_tab.Shown)
    second = {"lesson": "attention", "step": 1}
    lessons_room.publish_move(teacher, t_room, second, PROMPT)
    polled = lessons_room.poll(student, room, "", request=page)  # the poll draws the teacher's next step
    assert polled.lesson_pos == second
    again = lessons_tab.redrawn_again(zh, first, PROMPT, None, page)  # (its inputs: as the late redraw left them)
    assert again.lesson_pos == second and again.progress == redrawn_progress(zh, second)
    assert lessons_tab.redrawn_again(zh, second, PROMPT, None, page) == skipped(lessons_tab.Shown)  # drawn once
    lessons_room.end_room(teacher, t_room)


def redrawn_progress(state, pos):
    from playground.ui.lessons import tab as lessons_tab

    return lessons_tab.show(state, pos, PROMPT).progress


def test_the_model_tabs_language_redraw_is_checked_after_it_lands():
    """The checks (relabelled_again, in_use_again, redrawn_again) run in an event chained after the one that
    runs their redraws (prefs.wire: every tab's redraw in one event), on outputs that event answers."""
    import inspect

    from playground.ui.app import build_demo

    demo = build_demo()
    deps = demo.get_config_file()["dependencies"]
    redraws = [d for d in deps if demo.fns[d["id"]].name == "redraw_all"]
    assert len(redraws) == 2
    first, checks = redraws
    assert checks["trigger_after"] == first["id"] and set(checks["outputs"]) <= set(first["outputs"])
    ran, checked = (
        [fn.__name__ for fn in vars(inspect.unwrap(demo.fns[d["id"]].fn))["parts"]] for d in (first, checks)
    )
    for check, redraw in (("relabelled_again", "relabel"), ("in_use_again", "in_use"), ("redrawn_again", "redraw")):
        assert check in checked and redraw in ran


def test_a_page_joining_by_link_takes_the_rooms_model_before_its_preferences_apply():
    """The page's preferences (its language, at load) chain the Model tab's redraws; a redraw that set
    off beside the room's first poll could draw the default model and answer after the poll, the page
    then naming a model its session no longer holds (seen in a fresh-clone run). The page tells its
    preferences' watcher it may send them only after the link's join and that first poll have answered."""
    from playground.ui import prefs
    from playground.ui.app import build_demo

    demo = build_demo()
    deps = demo.get_config_file()["dependencies"]
    names = {i: f.name for i, f in demo.fns.items()}
    chain, at = [], next(d for d in deps if d.get("js") == prefs.LOADED_JS)
    while at.get("trigger_after") is not None:
        chain.append(names[at["trigger_after"]])
        at = deps[at["trigger_after"]]
    assert chain == ["poll", "from_link", "load_session"]
