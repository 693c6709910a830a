"""A following page is shown each new view the teacher shows once: an Inside view of a run, or a new run."""

import re

from playground.ui.lessons import room_inside, room_scroll


def target(mark: str | None) -> str | None:
    return re.search(r"data-to='([^']+)'", mark).group(1) if mark else None


def test_a_new_inside_view_is_shown_once_however_often_it_grows():
    published = {"tab": "inside", "inside": {"view": "sweep", "id": "run-1", "version": 4}}
    room, mark = room_scroll.scrolled({}, published, {}, {"sub_tabs": object()})
    assert target(mark) == "pg-sweep" and room["scrolled"] == ["sweep", "run-1"]
    again, mark = room_scroll.scrolled(
        room, {**published, "inside": {**published["inside"], "version": 5}}, {}, {"sub_tabs": 1}
    )
    assert mark is None and again == room  # the sweep's next partial figure: not pulled back to it
    other, mark = room_scroll.scrolled(room, {"inside": {"view": "sweep", "id": "run-2"}}, {}, {"sub_tabs": 1})
    assert target(mark) == "pg-sweep" and other["scrolled"] == ["sweep", "run-2"]  # the sweep of another run
    dose, mark = room_scroll.scrolled(other, {"inside": {"view": "dose", "id": "run-2"}}, {}, {"sub_tabs": 1})
    assert target(mark) == "pg-dose"


def test_a_new_run_shows_its_heatmap_and_a_poll_that_took_nothing_scrolls_nowhere():
    published = {"tab": "generate", "run": {"id": "7", "version": 2}}
    room, mark = room_scroll.scrolled({}, published, {"chips": "", "heatmap": None}, {})
    assert target(mark) == room_scroll.RUN == "pg-heatmap"
    assert room_scroll.scrolled(room, published, {"status": "…"}, {}) == (room, None)  # (the same run's view)
    assert room_scroll.scrolled({}, published, {}, {}) == ({}, None)


def test_the_teachers_next_step_is_shown_on_the_lessons_tab_once():
    published = {"tab": "lessons", "lesson": "attention", "step": 1}
    room, mark = room_scroll.scrolled({}, published, {}, {})
    assert target(mark) == room_scroll.STEP and room["scrolled"] == ["step", "attention", 1]
    assert room_scroll.scrolled(room, published, {}, {}) == (room, None)  # (a vote on the same step)
    _, mark = room_scroll.scrolled(room, {**published, "step": 2}, {}, {})
    assert target(mark) == room_scroll.STEP
    # on another tab the lesson the room is on is not what the teacher shows
    assert room_scroll.scrolled({}, {**published, "tab": "model"}, {}, {}) == ({}, None)


def test_each_mark_is_named_anew_so_the_page_scrolls_again_after_follow():
    assert room_scroll.mark("pg-lens") != room_scroll.mark("pg-lens")


def test_every_inside_view_has_an_element_to_show():
    assert set(room_scroll.INSIDE) == set(room_inside.VIEWS)


def test_each_element_a_follower_is_shown_stands_on_the_page():
    from playground.ui.app import build_demo

    by_elem = {getattr(b, "elem_id", None): b for b in build_demo().blocks.values()}
    for view, element in {**room_scroll.INSIDE, "run": room_scroll.RUN}.items():
        assert type(by_elem[element]).__name__ in ("Plot", "Dataframe"), view
    assert type(by_elem[room_scroll.STEP]).__name__ == "Row"  # (the step's text and its figure)
    assert "pg-room-scroll" in by_elem
