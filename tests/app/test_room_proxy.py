"""A room behind a reverse proxy: each student counts by the address the proxy forwards.

The server trusts ``X-Forwarded-For`` from the addresses in uvicorn's ``FORWARDED_ALLOW_IPS`` (by default the
machine itself), so behind a proxy on the same machine, or one named there, a student's wrong codes count
against that student's own address and the lockout leaves the rest of the class alone (README: classroom mode).
These requests come from 127.0.0.1, which the default trusts, as a proxy on the teacher's machine would.
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
