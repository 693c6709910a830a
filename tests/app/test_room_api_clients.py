"""A room's followers through its API: behind a reverse proxy, and joining again.

Behind a proxy each student counts by the address the proxy forwards: the server trusts ``X-Forwarded-For``
from the addresses in uvicorn's ``FORWARDED_ALLOW_IPS`` (by default the machine itself), so behind a proxy on
the same machine, or one named there, a student's wrong codes count against that student's own address and the
lockout leaves the rest of the class alone (README: classroom mode). These requests come from 127.0.0.1, which
the default trusts, as a proxy on the teacher's machine would. A follower that joins again with the member id
it was given is the same member.
"""

import pytest
from gradio_client import Client

from playground.server import room_lockout

pytestmark = pytest.mark.slow


def _client(app_url, forwarded: str | None) -> Client:
    headers = {"X-Forwarded-For": forwarded} if forwarded else None
    return Client(app_url, verbose=False, headers=headers)


def test_wrong_codes_lock_out_the_forwarded_address_only(app_url):
    teacher = _client(app_url, "203.0.113.10")
    room = teacher.predict(api_name="/room_create")
    code = room["code"]
    guesser = _client(app_url, "203.0.113.66")
    for i in range(room_lockout.MAX_FAILURES):
        refused = guesser.predict(f"ZZZ{i:03d}", api_name="/room_join")
        assert refused.get("key") in ("room.not_found", "room.bad_code"), refused
    locked = guesser.predict(code, api_name="/room_join")  # the right code too, from that address
    assert locked.get("key") == "room.too_many_tries", locked
    # a classmate behind the same proxy (another forwarded address) joins and follows
    classmate = _client(app_url, "203.0.113.67").predict(code, api_name="/room_join")
    assert classmate.get("code") == code and classmate.get("member"), classmate
    assert "error" not in teacher.predict(code, room["key"], {"tab": "lessons"}, api_name="/room_publish")
    teacher.predict(code, room["key"], api_name="/room_end")


def test_an_api_follower_joins_again_as_the_same_member(app_url):
    """``/room_join`` takes the member id a follower was given (optional: a code alone still joins), so a
    follower that joins again keeps its vote; an id the room never gave gets a new member."""
    teacher, student = _client(app_url, None), _client(app_url, None)
    room = teacher.predict(api_name="/room_create")
    code, key = room["code"], room["key"]
    member = student.predict(code, api_name="/room_join")["member"]  # (the code alone, as before)
    place = {"tab": "lessons", "prompt": "ROMEO: What light through yonder window breaks?"}
    assert "error" not in teacher.predict(code, key, place, api_name="/room_publish")
    assert "error" not in teacher.predict(code, key, api_name="/room_open_vote")
    state = student.predict(code, None, member, "", api_name="/room_state")
    choice = state["vote"]["choices"][0][0]
    assert "error" not in student.predict(code, member, state["vote"]["id"], choice, api_name="/room_vote")
    again = student.predict(code, member, api_name="/room_join")
    assert again["member"] == member
    assert student.predict(code, None, member, "", api_name="/room_state")["vote"]["mine"] == choice
    assert student.predict(code, "made-up", api_name="/room_join")["member"] not in (member, "made-up")
    tally = teacher.predict(code, None, "", key, api_name="/room_state")["tally"]
    assert tally["answered"] == 1 and tally["members"] == 2
    teacher.predict(code, key, api_name="/room_end")
