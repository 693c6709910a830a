"""A room's followers waiting for its next move (server.room_wait, ``GET /room/wait``): answered at once
when the room has moved, woken by a publication from another thread, answered unchanged after the
timeout, woken by the room's end (then refused as ended), bounded in number, and never left registered."""

import asyncio
import threading
import time

import pytest
from starlette.testclient import TestClient

from playground.server import room_wait
from playground.server.room_wait import WAITERS, next_state
from playground.server.rooms import ROOMS, RoomError


@pytest.fixture
def room():
    code, key = ROOMS.create("test-wait")
    yield code, key
    try:
        ROOMS.end(code, key, "test-wait")
    except RoomError:
        pass


def test_a_room_that_moved_is_answered_at_once(room):
    code, key = room
    version = ROOMS.publish(code, key, {"step": 1, "lesson": "attention"})
    t0 = time.perf_counter()
    seen = asyncio.run(next_state(code.lower(), version - 1, None, None, timeout=5.0))
    assert seen["changed"] and seen["version"] == version and seen["state"]["step"] == 1
    assert time.perf_counter() - t0 < 1.0
    assert WAITERS.count() == 0


def test_a_publication_from_another_thread_wakes_the_waiters(room):
    code, key = room
    version = ROOMS.publish(code, key, {"step": 1})

    async def three_wait():
        return await asyncio.gather(*(next_state(code, version, None, None, timeout=10.0) for _ in range(3)))

    def publish_soon():
        time.sleep(0.3)
        ROOMS.publish(code, key, {"step": 2})

    threading.Thread(target=publish_soon).start()
    t0 = time.perf_counter()
    seen = asyncio.run(three_wait())
    waited = time.perf_counter() - t0
    assert 0.25 <= waited < 5.0, waited
    assert all(s["changed"] and s["version"] == version + 1 and s["state"]["step"] == 2 for s in seen)
    assert WAITERS.count() == 0


def test_no_move_is_answered_unchanged_after_the_timeout(room):
    code, key = room
    version = ROOMS.publish(code, key, {"step": 1})
    t0 = time.perf_counter()
    seen = asyncio.run(next_state(code, version, None, None, timeout=0.2))
    assert 0.15 <= time.perf_counter() - t0 < 5.0
    assert seen == {"code": code, "version": version, "changed": False}
    assert WAITERS.count() == 0


def test_the_end_of_the_room_wakes_its_waiters_and_is_refused(room):
    code, key = room
    version = ROOMS.publish(code, key, {"step": 1})
    threading.Timer(0.2, ROOMS.end, (code, key, "test-wait")).start()
    with pytest.raises(RoomError) as e:
        asyncio.run(next_state(code, version, None, None, timeout=10.0))
    assert e.value.key == "room.ended"
    assert WAITERS.count() == 0


def test_past_the_limit_a_follower_is_answered_as_a_poll(room, monkeypatch):
    code, key = room
    version = ROOMS.publish(code, key, {"step": 1})
    monkeypatch.setattr(room_wait, "MAX_WAITERS", 0)
    t0 = time.perf_counter()
    seen = asyncio.run(next_state(code, version, None, None, timeout=10.0))
    assert not seen["changed"] and time.perf_counter() - t0 < 1.0


def test_the_route_answers_the_move_only_and_refusals_by_key(room):
    code, key = room
    version = ROOMS.publish(code, key, {"step": 1, "prompt": "x" * 1000})
    client = TestClient(_app())
    moved = client.get(room_wait.PATH, params={"code": code, "since": version - 1}).json()
    assert moved == {"code": code, "version": version, "changed": True}  # (the page's poll takes the state)
    assert (
        client.get(room_wait.PATH, params={"code": code, "since": version, "timeout": 0.1}).json()["changed"] is False
    )
    assert client.get(room_wait.PATH, params={"code": "nope"}).json()["key"] == "room.bad_code"
    assert client.get(room_wait.PATH, params={"code": code, "since": "x"}).json()["version"] == version


def _app():
    from starlette.applications import Starlette

    return Starlette(routes=[room_wait.ROUTE])


CHOICES = [["yes", "Yes"], ["no", "No"]]


def test_with_state_the_wait_answers_what_room_state_answers_one_request_a_move(room):
    code, key = room
    ROOMS.publish(code, key, {"lesson": "attention", "step": 1, "prompt": "héllo"})
    ann, bob = ROOMS.join(code, "test-wait"), ROOMS.join(code, "test-wait")
    vote_id = ROOMS.open_vote(code, key, "Which?", CHOICES, "no", "test-wait")
    ROOMS.vote(code, ann, vote_id, "yes", "test-wait")
    ROOMS.vote(code, bob, vote_id, "no", "test-wait")
    client = TestClient(_app())
    got = client.get(room_wait.PATH, params={"code": code, "since": 0, "member": ann, "state": 1})
    assert got.headers["content-type"] == "application/json" and got.headers["cache-control"] == "no-store"
    assert got.json() == ROOMS.state(code, since=0, member=ann, client="test-wait")
    assert got.json()["state"]["prompt"] == "héllo" and got.json()["vote"]["mine"] == "yes"
    # another member's answer and the vote's answer are nowhere in it
    assert "no" not in [got.json()["vote"].get(k) for k in ("mine", "answer")] and "counts" not in got.json()["vote"]
    # nothing new: the version only, no state
    version = got.json()["version"]
    same = client.get(room_wait.PATH, params={"code": code, "since": version, "state": 1, "timeout": 0.05}).json()
    assert same == {"code": code, "version": version, "changed": False}


def test_the_states_json_is_made_once_a_version_and_let_go_when_the_room_ends(room, monkeypatch):
    code, key = room
    made = []
    real = room_wait._json
    monkeypatch.setattr(room_wait, "_json", lambda value: made.append(value) or real(value))
    client = TestClient(_app())
    ROOMS.publish(code, key, {"lesson": "attention", "step": 1})
    answers = [client.get(room_wait.PATH, params={"code": code, "state": 1}).json() for _ in range(5)]
    assert {a["state"]["step"] for a in answers} == {1}
    assert sum(1 for value in made if value.get("lesson") == "attention") == 1  # (one state made, five answers)
    ROOMS.publish(code, key, {"step": 2})  # a new version: the new state, not the one kept
    assert client.get(room_wait.PATH, params={"code": code, "state": 1}).json()["state"]["step"] == 2
    kept = room_wait.ENCODED.count()
    ROOMS.end(code, key, "test-wait")
    assert room_wait.ENCODED.count() == kept - 1
    assert client.get(room_wait.PATH, params={"code": code, "state": 1}).json()["key"] == "room.ended"
