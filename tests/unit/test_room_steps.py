"""What a room's followers are shown, drawn once (issue 35): many followers asking at once for the same
drawing get one drawing; a room keeps a bounded number and lets them go when it ends; a failed drawing is
not kept; one room's drawings are never another's. And the teacher's model and Inside view as a room
takes them: the recipe only from the server's own call, an Inside view checked for its kind and size."""

import threading
import time

import pytest

from playground.server.room_steps import DrawnOnce
from playground.server.rooms import MAX_RUN_CHARS, RoomError, Rooms


def test_followers_asking_at_once_get_one_drawing():
    rooms = Rooms()
    code, _ = rooms.create()
    drawn = DrawnOnce(rooms)
    calls = []

    def draw():
        calls.append(1)
        time.sleep(0.2)  # every follower's request arrives while it is drawn
        return {"figure": object()}

    got = []
    threads = [threading.Thread(target=lambda: got.append(drawn.get(code, ("step", 1), draw))) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and drawn.drawn == 1 and len(got) == 30
    assert all(g is got[0] for g in got)


def test_a_room_keeps_a_bounded_number_and_lets_them_go_when_it_ends():
    rooms = Rooms()
    (a, key_a), (b, _) = rooms.create(), rooms.create()
    drawn = DrawnOnce(rooms, per_room=3)
    for i in range(5):
        drawn.get(a, i, lambda i=i: i)
    assert drawn.held(a) == 3 and drawn.held(b) == 0
    assert drawn.get(a, 4, lambda: "again") == 4 and drawn.get(a, 0, lambda: "again") == "again"  # 0 was let go
    assert drawn.get(b, 4, lambda: "b's own") == "b's own"  # another room: its own drawing
    rooms.end(a, key_a)
    assert drawn.held(a) == 0 and drawn.held(b) == 1


def test_a_failed_drawing_is_not_kept():
    rooms = Rooms()
    code, _ = rooms.create()
    drawn = DrawnOnce(rooms)

    def fail():
        raise MemoryError("no room for the model")

    with pytest.raises(MemoryError):
        drawn.get(code, "k", fail)
    assert drawn.held(code) == 0 and drawn.get(code, "k", lambda: 7) == 7


def test_the_model_comes_from_the_server_and_the_inside_view_is_checked():
    rooms = Rooms()
    code, key = rooms.create()
    recipe = {"kind": "random", "seed": 1, "config": {"n_layers": 2}}
    rooms.publish(code, key, {"lesson": "attention", "step": 0}, recipe=recipe)
    state = rooms.state(code)["state"]
    assert (
        state["recipe"] == recipe and state["model_key"] == '{"config": {"n_layers": 2}, "kind": "random", "seed": 1}'
    )
    with pytest.raises(RoomError) as e:  # a follower's published state never names a model itself
        rooms.publish(code, key, {"recipe": recipe})
    assert e.value.key == "room.state_unknown"
    # a new model closes the vote (its answer was the old model's)
    rooms.open_vote(code, key, "q", [["a", "a"], ["b", "b"]], "a")
    rooms.publish(code, key, {}, recipe={**recipe, "seed": 2})
    assert rooms.state(code)["vote"] is None

    inside = {"view": "maths", "sub": "inside-maths", "id": "9", "selection": {"m_layer": 1}, "out": {}, "out_zh": {}}
    version = rooms.publish_inside(code, key, inside)
    seen = rooms.state(code)["state"]
    assert seen["tab"] == "inside" and seen["inside"] == {**inside, "version": version}
    for bad in (
        {**inside, "script": "x"},
        {**inside, "selection": {"m_layer": [1]}},
        {**inside, "out": {"m_plot": {"figure": "x" * MAX_RUN_CHARS}}},
        "not a dict",
    ):
        with pytest.raises(RoomError) as e:
            rooms.publish_inside(code, key, bad)
        assert e.value.key == "room.bad_inside"
    with pytest.raises(RoomError) as e:
        rooms.publish_inside(code, "not the key", inside)
    assert e.value.key == "room.not_teacher"
