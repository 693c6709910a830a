"""Classroom mode (issue 35): the teacher asks the room about the layer its Generate heatmap shows ("which head
attends most to the previous token?", chips of the layer's heads), answered from the teacher's run.

In-process, as the pages run it: the teacher generates, asks about a layer, two students (English and
Chinese) see the question in their own language and vote, and the reveal shows both of them the head that
the run's own attention names (computed here again from a fresh forward of the teacher's model on the run's
tokens) with the room's counts. A student's page cannot ask; through the running app's API, neither can a
student's call, and a teacher's call without a run is refused with a message."""

import numpy as np
import pytest
import torch

from playground import PRESETS
from playground.engine.head_patterns import head_stats, induction_scores
from playground.server import view_questions
from playground.ui.common import session_model, session_run
from playground.ui.lessons import room as lessons_room
from playground.ui.lessons import room_api, room_ask, room_voting
from tests.app.room_clients import a_teacher_and_a_student, nano_sessions

PROMPT = "The cat sat on the mat. The cat sat on the mat."


@pytest.fixture
def pages():
    return nano_sessions("vq")


def scores_of(state) -> dict:
    """Each question kind's [layer, head] scores of the session's run, from a fresh forward of its model."""
    model, run = session_model(state), session_run(state)
    ids = run.token_ids
    assert len(ids) <= model.cfg.context_length  # one window: the whole run
    with torch.no_grad():
        _, trace = model(torch.tensor([ids]), return_attention=True)
    maps = [a[0].float().numpy() for a in trace.all_layers()]
    stats = head_stats(maps)
    return {
        "previous-token": stats["previous-token"],
        "first-token": stats["first-token"],
        "induction": induction_scores(maps, ids),
    }


def test_the_teacher_asks_about_a_layer_and_the_reveal_shows_the_runs_answer(pages):
    from playground.ui.generate import tab as generate_tab

    teacher, students = pages
    for update in generate_tab.generate_tokens(teacher, PROMPT, 0.8, 40, 1.0, 5, 0, False):
        teacher = update[0]
    t_room = lessons_room.start_room(teacher, None, {"lesson": "attention", "step": 0}, PROMPT).room
    rooms = [lessons_room.join_room(s, None, t_room["code"]).room for s in students]
    polled = [lessons_room.poll(s, r, "") for s, r in zip(students, rooms)]
    states, rooms = [p.state for p in polled], [p.room for p in polled]

    # the clearest question of the run (the widest lead of one head over the next), so no tie refuses it
    scores = scores_of(teacher)
    lead = {
        (kind, layer): float(np.diff(np.sort(s[layer])[-2:])[0])
        for kind, s in scores.items()
        for layer in range(s.shape[0])
    }
    kind, layer = max(lead, key=lead.get)
    assert lead[(kind, layer)] > view_questions.TIE_MARGIN
    answer = f"h{int(np.argmax(scores[kind][layer]))}"

    # a student's page cannot ask, nor a student's API call with the code and their member id
    assert "pg-error" in room_ask.ask_room(states[0], rooms[0], kind, layer)
    refused = room_api.api_ask_view(states[0], rooms[0]["code"], rooms[0]["member"], kind, layer)
    assert refused["key"] == "room.not_teacher", refused

    opened = room_ask.ask_room(teacher, t_room, kind, layer)
    assert "pg-ok" in opened and f"layer {layer}" in opened, opened
    n_heads = PRESETS["nano"].n_heads
    polled = [lessons_room.poll(s, r, "") for s, r in zip(states, rooms)]
    rooms = [p.room for p in polled]
    en, zh = (p.room_vote for p in polled)
    assert en["visible"] and en["interactive"] and f"Which head of layer {layer}" in en["label"]
    assert f"第 {layer} 层" in zh["label"] and "头" in zh["label"]
    chips = [(f"L{layer} H{h}", f"h{h}") for h in range(n_heads)]
    assert en["choices"] == chips and zh["choices"] == chips
    assert "answer" not in rooms[0]["vote"]  # kept on the server until the reveal

    other = next(cid for _, cid in chips if cid != answer)
    assert "pg-ok" in room_voting.cast(states[0], rooms[0], answer)
    assert "pg-ok" in room_voting.cast(states[1], rooms[1], other)
    polled_t = lessons_room.poll(teacher, t_room, PROMPT)  # the question stays in the teacher's sight
    status = polled_t.room_status
    assert "2 of 2 here answered" in status and f"Which head of layer {layer}" in status
    assert f"“L{layer} H0”" not in status  # the counts so far: only when the teacher shows them
    status = room_voting.show_counts(teacher, polled_t.room, True)[1]
    assert f"Which head of layer {layer}" in status and f"“L{layer} H0”" in status

    assert room_voting.reveal(teacher, t_room) == lessons_room.gr.skip()
    for state, room, words in zip(
        states, rooms, (("The answer", f"Which head of layer {layer}"), ("答案", f"第 {layer} 层"))
    ):
        shown = lessons_room.poll(state, room, "").room_result
        assert f"data-answer='{answer}'" in shown
        assert f"data-choice='{answer}' data-count='1'" in shown and f"data-choice='{other}' data-count='1'" in shown
        assert f"L{layer} H{answer[1:]} ✓" in shown and all(w in shown for w in words)  # its language's question

    # a lesson's vote still reads its question from the lesson: no text of its own
    assert "pg-ok" in room_voting.open_vote(teacher, t_room, {"lesson": "attention", "step": 0}, PROMPT)
    vote = lessons_room.ROOMS.state(t_room["code"])["vote"]
    assert "text" not in vote and vote["question"].startswith("attention/")
    lessons_room.end_room(teacher, t_room)


def test_the_api_refuses_a_students_question_and_a_teacher_without_a_run(app_url):
    teacher, student, code, key, member = a_teacher_and_a_student(app_url)
    for crafted in (member, code, ""):
        refused = student.predict(code, crafted, "previous-token", 0, api_name="/room_ask_view")
        assert refused.get("key") == "room.not_teacher", refused
    refused = teacher.predict(code, key, "previous-token", 0, api_name="/room_ask_view")
    assert refused.get("key") == "view_question.no_run" and "Generate first" in refused["error"], refused
    refused = teacher.predict(code, key, "which-is-best", 0, api_name="/room_ask_view")
    assert refused.get("key") == "view_question.bad_kind", refused
    assert student.predict(code, None, member, "", api_name="/room_state")["vote"] is None
    assert teacher.predict(code, key, api_name="/room_end") == {"ended": code}
