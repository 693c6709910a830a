"""Classroom rooms (issue 35), server side: codes and keys, what only the teacher may do, votes counted
once and revealed as counts, ended and idle rooms, and wrong codes refused fast and rate-limited per
client while the room goes on serving."""

import time

import pytest

from playground.i18n import tr_error
from playground.server import rooms
from playground.server.room_codes import ALPHABET, CODE_LENGTH
from playground.server.rooms import MAX_CHOICES, MAX_LABEL_CHARS, RoomError, Rooms

CHOICES = [["yes", {"en": "yes", "zh-CN": "是"}], ["no", "no"]]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def refused(key, fn, *args, **kwargs) -> RoomError:
    with pytest.raises(RoomError) as e:
        fn(*args, **kwargs)
    assert e.value.key == key, (e.value.key, str(e.value))
    return e.value


def test_codes_are_short_unambiguous_and_distinct_keys_long():
    r = Rooms()
    made = [r.create() for _ in range(20)]
    codes = [c for c, _ in made]
    assert len(set(codes)) == 20
    for code, key in made:
        assert len(code) == CODE_LENGTH and set(code) <= set(ALPHABET)
        assert len(key) >= 40 and code not in key
    assert not set("01OIL") & set(ALPHABET)
    # typed in lower case, with a space or a dash: the same room
    code = codes[0]
    r.join(code.lower())
    r.join(code[:3] + "-" + code[3:])


def test_publish_and_follow_by_version():
    r = Rooms()
    code, key = r.create()
    member = r.join(code)
    first = r.state(code, member=member)
    assert first["changed"] and first["state"] == {} and first["vote"] is None
    v = r.publish(
        code, key, {"tab": "lessons", "lesson": "attention", "step": 2, "prompt": "ROMEO:", "view": {"layer": 1}}
    )
    seen = r.state(code, since=first["version"], member=member)
    assert seen["version"] == v and seen["state"]["step"] == 2 and seen["state"]["view"] == {"layer": 1}
    assert r.state(code, since=v) == {"code": code, "version": v, "changed": False}
    r.publish(code, key, {"step": 3})  # the fields not sent stay
    assert r.state(code)["state"] == {
        "tab": "lessons",
        "lesson": "attention",
        "step": 3,
        "prompt": "ROMEO:",
        "view": {"layer": 1},
    }


def test_whether_a_member_follows_is_the_rooms_and_counts_each_change():
    r = Rooms()
    code, key = r.create()
    member, other = r.join(code), r.join(code)
    seen = r.state(code, member=member)
    assert seen["following"] is True and seen["moves"] == 0
    assert r.set_following(code, member, False) == 1
    assert r.set_following(code, member, True) == 2 and r.set_following(code, member, False) == 3
    v = r.state(code)["version"]
    assert r.state(code, since=v, member=member) == {
        "code": code,
        "version": v,
        "changed": False,
        "following": False,
        "moves": 3,
    }
    assert r.state(code, member=other)["following"] is True  # (each member's own)
    assert "following" not in r.state(code) and "moves" not in r.state(code, member="nobody")
    assert r.state(code)["version"] == v  # (not a move of the room's)
    refused("room.not_member", r.set_following, code, "nobody", True)
    refused("room.not_member", r.set_following, code, key, True)
    r.end(code, key)
    refused("room.ended", r.set_following, code, member, True)


def test_the_teacher_sees_who_is_here_and_who_explores():
    clock = Clock()
    r = Rooms(clock=clock)
    code, key = r.create()
    members = [r.join(code) for _ in range(4)]
    assert r.tally(code, key) == {"vote": None, "answered": 0, "counts": {}, "members": 4, "here": 4, "exploring": 0}
    r.set_following(code, members[0], False)
    r.set_following(code, members[1], False)
    r.set_following(code, members[1], True)  # (back with Follow)
    assert (r.tally(code, key)["here"], r.tally(code, key)["exploring"]) == (4, 1)
    clock.now += rooms.HERE_SECONDS - 1
    r.state(code, member=members[1])  # (a page's poll: it is here)
    r.state(code, member=members[0])
    clock.now += 2  # the two others' pages closed: joined, no longer here
    assert {k: r.tally(code, key)[k] for k in ("members", "here", "exploring")} == {
        "members": 4,
        "here": 2,
        "exploring": 1,
    }


def test_a_student_who_joins_again_with_the_id_the_room_gave_is_the_same_member():
    """A page that kept its member id (reloaded, or a second tab) joins as that member: its ballot stays, the
    room counts one member, and it is here again; an id the room never gave (made up, another room's, the
    teacher's key) is never taken: the page gets a new member."""
    clock = Clock()
    r = Rooms(clock=clock)
    code, key = r.create()
    other_code, _ = r.create()
    member, other = r.join(code), r.join(code)
    elsewhere = r.join(other_code)
    vid = r.open_vote(code, key, "q", CHOICES, "yes")
    r.vote(code, member, vid, "no")
    clock.now += rooms.HERE_SECONDS + 1  # the page closed long enough to be no longer here
    assert r.tally(code, key)["here"] == 0
    assert r.join(code.lower(), member=member) == member  # reloaded
    tally = r.tally(code, key)
    assert (tally["members"], tally["here"], tally["answered"]) == (2, 1, 1)
    assert r.state(code, member=member)["vote"]["mine"] == "no"
    r.vote(code, member, vid, "yes")  # its ballot replaced, not a second one
    assert r.tally(code, key)["counts"] == {"yes": 1, "no": 0}
    for made_up in ("made-up-member-id", elsewhere, key, code, "", None, 12345, [member], {"member": member}):
        fresh = r.join(code, member=made_up)
        assert fresh not in (member, other, elsewhere, key, code) and isinstance(fresh, str), made_up
    assert r.tally(code, key)["members"] == 2 + 9
    refused("room.not_member", r.vote, code, "made-up-member-id", vid, "yes")


def test_bad_states_are_refused_by_name():
    r = Rooms()
    code, key = r.create()
    refused("room.state_not_dict", r.publish, code, key, "step=3")
    refused("room.state_unknown", r.publish, code, key, {"step": 1, "evil": 1})
    refused("room.state_bad_field", r.publish, code, key, {"step": -1})
    refused("room.state_bad_field", r.publish, code, key, {"step": True})
    refused("room.state_bad_field", r.publish, code, key, {"prompt": "x" * 30_000})
    refused("room.state_bad_field", r.publish, code, key, {"view": {"a": [1, 2]}})
    assert r.state(code)["version"] == 0


def test_only_the_key_drives_reveals_and_ends():
    r = Rooms()
    code, key = r.create()
    other_code, other_key = r.create()
    member = r.join(code)
    r.open_vote(code, key, "q", CHOICES, "yes")
    crafted = [None, "", code, member, other_key, key[:-1], key + "x", key.upper(), 12345, {"key": key}, [key]]
    for bad in crafted:
        refused("room.not_teacher", r.publish, code, bad, {"step": 5}, client=f"student-{bad!r}")
        refused("room.not_teacher", r.open_vote, code, bad, "q", CHOICES, "no", client=f"student-{bad!r}")
        refused("room.not_teacher", r.reveal, code, bad, client=f"student-{bad!r}")
        refused("room.not_teacher", r.end, code, bad, client=f"student-{bad!r}")
        refused("room.not_teacher", r.tally, code, bad, client=f"student-{bad!r}")
    assert r.state(code)["state"] == {} and "answer" not in r.state(code)["vote"]
    # one room's key is nothing in another
    refused("room.not_teacher", r.publish, other_code, key, {"step": 1})
    r.publish(other_code, other_key, {"step": 9})
    assert r.state(code)["state"] == {} and r.state(other_code)["state"] == {"step": 9}


def test_votes_count_once_and_students_see_only_their_own():
    r = Rooms()
    code, key = r.create()
    a, b, c = r.join(code), r.join(code), r.join(code)
    vid = r.open_vote(code, key, "Does it rise?", CHOICES, "no")
    r.vote(code, a, vid, "yes")
    r.vote(code, a, vid, "no")  # a second choice replaces the first
    r.vote(code, a, vid, "no")
    r.vote(code, b, vid, "yes")
    assert r.tally(code, key) == {
        "vote": vid,
        "open": True,
        "answered": 2,
        "counts": {"yes": 1, "no": 1},
        "members": 3,
        "here": 3,
        "exploring": 0,
    }
    for member, mine in ((a, "no"), (b, "yes"), (c, None)):
        seen = r.state(code, member=member)["vote"]
        assert seen["mine"] == mine
        assert "counts" not in seen and "answer" not in seen and "ballots" not in seen
    anonymous = r.state(code)["vote"]
    assert "mine" not in anonymous and "counts" not in anonymous and "answer" not in anonymous
    refused("room.bad_choice", r.vote, code, c, vid, "maybe")
    refused("room.not_member", r.vote, code, "crafted-member", vid, "yes")
    refused("room.not_member", r.vote, code, key, vid, "yes")
    refused("room.vote_closed", r.vote, code, c, vid + 1, "yes")
    shown = r.reveal(code, key)
    assert shown["answer"] == "no" and shown["counts"] == {"yes": 1, "no": 1} and shown["answered"] == 2
    assert "mine" not in shown
    for member in (a, b, c, None):
        seen = r.state(code, member=member)["vote"]
        assert seen["answer"] == "no" and seen["counts"] == {"yes": 1, "no": 1} and not seen["open"]
    refused("room.vote_closed", r.vote, code, c, vid, "yes")  # after the reveal
    # a new question starts empty
    vid2 = r.open_vote(code, key, "Again?", CHOICES, "yes")
    assert vid2 != vid and r.tally(code, key)["answered"] == 0
    refused("room.vote_closed", r.vote, code, a, vid, "yes")  # the old question's id
    # the teacher moves on: the step's vote goes with it (the same step again keeps it)
    r.publish(code, key, {"lesson": "x", "step": 1})
    vid3 = r.open_vote(code, key, "On step 1", CHOICES, "yes")
    r.publish(code, key, {"lesson": "x", "step": 1, "prompt": "new"})
    assert r.state(code)["vote"]["id"] == vid3
    r.publish(code, key, {"step": 2})
    assert r.state(code)["vote"] is None
    refused("room.vote_closed", r.vote, code, a, vid3, "yes")


def test_bad_votes_are_refused():
    r = Rooms()
    code, key = r.create()
    refused("room.bad_choices", r.open_vote, code, key, "q", [["a", "A"]], "a")
    refused("room.bad_choices", r.open_vote, code, key, "q", [["a", "A"], ["a", "B"]], "a")
    refused("room.bad_choices", r.open_vote, code, key, "q", "ab", "a")
    refused("room.answer_not_choice", r.open_vote, code, key, "q", CHOICES, "maybe")
    refused("room.no_vote", r.reveal, code, key)


def test_ended_rooms_refuse_everyone_and_say_so():
    r = Rooms()
    code, key = r.create()
    member = r.join(code)
    r.end(code, key)
    for call in (
        lambda: r.join(code),
        lambda: r.state(code),
        lambda: r.vote(code, member, 1, "yes"),
        lambda: r.publish(code, key, {"step": 1}),
    ):
        refused("room.ended", call)
    assert r.count() == 0


def test_rooms_end_after_the_teacher_is_idle(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ROOM_IDLE_MINUTES", "10")
    clock = Clock()
    r = Rooms(clock=clock)
    code, key = r.create()
    member = r.join(code)
    clock.now += 9 * 60
    r.state(code, member=member)  # followers reading do not keep the room alive
    r.tally(code, key)  # the teacher does
    clock.now += 9 * 60
    assert r.state(code)["code"] == code
    clock.now += 2 * 60
    refused("room.ended", r.state, code)
    assert r.count() == 0


def test_bounded_rooms_and_members(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_ROOMS", "3")
    monkeypatch.setattr(rooms, "MAX_MEMBERS", 5)
    clock = Clock()
    r = Rooms(clock=clock)
    made = [r.create() for _ in range(3)]
    refused("room.too_many", r.create)
    r.end(*made[0])
    r.create()  # an ended room's place is free again
    code, key = made[1]
    members = [r.join(code) for _ in range(5)]
    refused("room.full", r.join, code)
    assert r.join(code, member=members[4]) == members[4]  # a member's page loaded again keeps its place
    # pages gone for minutes (closed) give their places to newcomers
    vid = r.open_vote(code, key, "q", CHOICES, "yes")
    r.vote(code, members[0], vid, "yes")
    clock.now += rooms.MEMBER_IDLE_SECONDS - 10
    r.state(code, member=members[1])  # still polling
    r.tally(code, key)
    clock.now += 20
    newcomers = [r.join(code) for _ in range(4)]
    refused("room.full", r.join, code)
    r.vote(code, members[1], vid, "no")
    refused("room.not_member", r.vote, code, members[2], vid, "no")
    assert r.tally(code, key)["counts"] == {"yes": 1, "no": 1} and len(newcomers) == 4  # a vote cast stays


def test_a_thousand_wrong_codes_are_refused_fast_and_the_room_still_serves():
    r = Rooms()
    code, key = r.create()
    member = r.join(code, client="student")
    t0 = time.perf_counter()
    keys = set()
    for i in range(1000):
        wrong = "".join(ALPHABET[(i * 7 + j) % len(ALPHABET)] for j in range(CODE_LENGTH))
        if wrong == code:
            continue
        with pytest.raises(RoomError) as e:
            r.join(wrong, client="attacker")
        keys.add(e.value.key)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, elapsed
    assert keys == {"room.not_found", "room.too_many_tries"}
    # the attacker is locked out, even with the right code now
    e = refused("room.too_many_tries", r.join, code, client="attacker")
    assert "try again in" in str(e)
    # the room and its other clients are untouched, and quick
    t0 = time.perf_counter()
    v = r.publish(code, key, {"step": 4}, client="teacher")
    seen = r.state(code, since=v - 1, member=member, client="student")
    assert seen["state"]["step"] == 4 and r.join(code, client="another student")
    assert time.perf_counter() - t0 < 0.05


def test_wrong_keys_count_against_the_client_too():
    r = Rooms()
    code, key = r.create()
    for _ in range(rooms.MAX_FAILURES):
        refused("room.not_teacher", r.reveal, code, "guess", client="x")
    refused("room.too_many_tries", r.reveal, code, "guess", client="x")
    r.publish(code, key, {"step": 1}, client="teacher")


def test_a_class_behind_one_address_goes_on_when_one_student_mistypes():
    """Behind one proxy a whole class shares an address: wrong codes lock that address out of joining and
    guessing, while the teacher's key and the members already in the room are still served from it."""
    r = Rooms()
    code, key = r.create(client="proxy")
    member = r.join(code, client="proxy")
    for _ in range(rooms.MAX_FAILURES):
        refused("room.not_found", r.join, "AAAAAA" if code != "AAAAAA" else "BBBBBB", client="proxy")
    refused("room.too_many_tries", r.join, code, client="proxy")  # joining takes a code alone: refused
    assert r.join(code, client="proxy", member=member) == member  # a student's page reloaded: still in
    refused("room.too_many_tries", r.state, code, client="proxy")  # so does reading a room by its code
    refused("room.too_many_tries", r.reveal, code, "guess", client="proxy")
    refused("room.too_many_tries", r.state, code, member="made-up", client="proxy")
    v = r.publish(code, key, {"step": 2}, client="proxy")  # the teacher
    seen = r.state(code, since=v - 1, member=member, client="proxy")  # a student already in
    assert seen["state"]["step"] == 2
    vote = r.open_vote(code, key, "q1", [("a", "A"), ("b", "B")], "a", client="proxy")
    r.vote(code, member, vote, "b", client="proxy")
    assert r.tally(code, key, client="proxy")["answered"] == 1


def test_the_lockout_ends_after_its_window():
    clock = Clock()
    r = Rooms(clock=clock)
    code, _ = r.create()
    for _ in range(rooms.MAX_FAILURES):
        refused("room.not_found", r.join, "AAAAAA" if code != "AAAAAA" else "BBBBBB", client="x")
    refused("room.too_many_tries", r.join, code, client="x")
    clock.now += rooms.FAILURE_WINDOW + 1
    assert r.join(code, client="x")


def test_malformed_codes_are_refused_by_name():
    r = Rooms()
    for bad in (None, "", "abc", "0O1IL0", "ABCDEFG", 123456, ["ABCDEF"]):
        refused("room.bad_code", r.join, bad)


def test_refusals_read_in_chinese():
    r = Rooms()
    e = refused("room.not_found", r.join, "ABCDEF" if "ABCDEF" not in r._rooms else "ABCDEG")
    assert "教室" in tr_error("zh-CN", e) and "ABCDE" in tr_error("zh-CN", e)
    code, key = r.create()
    r.end(code, key)
    assert tr_error("zh-CN", refused("room.ended", r.join, code)) == f"教室 {code} 已经结束。"


def test_a_published_run_is_bounded_replaced_and_only_the_teachers():
    r = Rooms()
    code, key = r.create()
    other, other_key = r.create()
    member = r.join(code)
    v = r.publish_run(code, key, {"id": "7", "chips": "<span>a</span>", "status": "done", "figure": '{"data": []}'})
    seen = r.state(code, member=member)
    assert seen["version"] == v and seen["state"]["run"]["figure"] == '{"data": []}'
    assert seen["state"]["run"]["version"] == v
    # a new publish of the place keeps the run; a new run replaces it (one run a room, never a list)
    r.publish(code, key, {"tab": "generate"})
    r.publish_run(code, key, {"id": "8", "chips": "b", "status": "", "figure": None})
    assert r.state(code)["state"]["run"]["id"] == "8" and r.state(code)["state"]["tab"] == "generate"
    # past the cap: kept without its figure (said), and chips alone past it are refused
    big = "x" * rooms.MAX_RUN_CHARS
    r.publish_run(code, key, {"id": "9", "chips": "c" * 1000, "status": "", "figure": big})
    run = r.state(code)["state"]["run"]
    assert run["figure"] is None and run["figure_left_out"] and run["id"] == "9"
    refused("room.bad_run", r.publish_run, code, key, {"id": "9", "chips": big + "x"})
    refused("room.bad_run", r.publish_run, code, key, {"id": 9, "chips": ""})
    refused("room.bad_run", r.publish_run, code, key, {"id": "9", "chips": "", "script": "x"})
    refused("room.bad_run", r.publish_run, code, key, "not a dict")
    # a student (the code, a member id), another room's key: refused; the API's publish cannot set a run
    for bad in (code, member, other_key, ""):
        refused("room.not_teacher", r.publish_run, code, bad, {"id": "1", "chips": "<script>"}, client="s")
    refused("room.state_unknown", r.publish, code, key, {"run": {"id": "1", "chips": "<script>"}})
    assert r.state(code)["state"]["run"]["id"] == "9" and "run" not in r.state(other)["state"]
    assert tr_error("zh-CN", RoomError("room.bad_run", "x {fields} {n}", fields=["id"], n=1)) != "x ['id'] 1"


def test_a_run_published_with_its_place_moves_the_room_in_one_version():
    """The teacher's run and the place it is shown in (the tab, the view) are one version: a follower wakes and
    asks once. The place is checked as ``publish`` checks it, and a new step or model in it closes the vote."""
    r = Rooms()
    code, key = r.create()
    member = r.join(code)
    r.publish(code, key, {"tab": "lessons", "lesson": "attention", "step": 1})
    r.open_vote(code, key, "attention/2", [["a", "A"], ["b", "B"]], "a")
    before = r.state(code)["version"]
    view = {"view": "one head", "layer": 1, "head": 2}
    v = r.publish_run(code, key, {"id": "7", "chips": "c", "status": "done"}, place={"tab": "generate", "view": view})
    seen = r.state(code, member=member)
    assert v == before + 1 == seen["version"] == seen["state"]["run"]["version"]
    assert seen["state"]["tab"] == "generate" and seen["state"]["view"] == view and seen["vote"] is not None
    r.publish_run(code, key, {"id": "8", "chips": "c", "status": "done"}, place={"step": 0}, recipe={"kind": "bundled"})
    seen = r.state(code, member=member)
    assert seen["vote"] is None and seen["state"]["model_key"] == '{"kind": "bundled"}'
    refused("room.state_unknown", r.publish_run, code, key, {"id": "9", "chips": ""}, place={"run": {"id": "1"}})
    assert r.state(code)["state"]["run"]["id"] == "8"  # (a refused place publishes no run either)


def test_a_vote_may_carry_its_question_in_each_language_checked_like_a_label():
    r = Rooms()
    code, key = r.create()
    member = r.join(code)
    text = {"en": "Which head of layer 1 is the induction head?", "zh-CN": "第 1 层的哪个头是归纳头？"}
    heads = [[f"h{h}", {"en": f"L1 H{h}", "zh-CN": f"L1 H{h}"}] for h in range(MAX_CHOICES)]  # one per head
    r.open_vote(code, key, "view/induction/1", heads, "h3", text=text)
    vote = r.state(code, member=member)["vote"]
    assert vote["text"] == text and "answer" not in vote and len(vote["choices"]) == MAX_CHOICES
    assert r.reveal(code, key)["answer"] == "h3"
    for bad in ("x" * (MAX_LABEL_CHARS + 1), {"en": 5}, {f"l{i}": "q" for i in range(5)}, "", {}, ["q"]):
        refused("room.bad_text", r.open_vote, code, key, "q", CHOICES, "yes", text=bad)
    refused("room.bad_choices", r.open_vote, code, key, "q", heads + [["more", "More"]], "h0")
    r.open_vote(code, key, "lesson/1", CHOICES, "yes")  # a lesson's vote: its question is read from the lesson
    assert "text" not in r.state(code)["vote"]


def test_a_teachers_own_question_has_no_answer_and_its_reveal_is_the_counts():
    r = Rooms()
    code, key = r.create()
    members = [r.join(code) for _ in range(3)]
    heads = [[f"h{h}", f"L0 H{h}"] for h in range(4)]
    refused("room.no_question", r.open_vote, code, key, "own/0", heads, None)  # no answer needs its words
    refused("room.not_teacher", r.open_vote, code, members[0], "own/0", heads, None, text="Which?")
    vid = r.open_vote(code, key, "own/0", heads, None, text="Which head copies?")
    for member, choice in zip(members, ("h1", "h1", "h3")):
        r.vote(code, member, vid, choice)
    seen = r.state(code, member=members[0])["vote"]
    assert "answer" not in seen and seen["mine"] == "h1" and seen["text"] == "Which head copies?"
    revealed = r.reveal(code, key)
    assert revealed["answer"] is None and revealed["answered"] == 3
    assert revealed["counts"] == {"h0": 0, "h1": 2, "h2": 0, "h3": 1}
