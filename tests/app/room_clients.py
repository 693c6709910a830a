"""A classroom room driven through the app's API, as the room tests start one (a plain module, no test of its own)."""

from gradio_client import Client


def a_teacher_and_a_student(app_url):
    """Two API clients of the app at ``app_url``: a teacher who created a room, and a student who joined it.
    (teacher, student, the room's code, the teacher's key, the student's member id)."""
    teacher, student = Client(app_url, verbose=False), Client(app_url, verbose=False)
    room = teacher.predict(api_name="/room_create")
    code, key = room["code"], room["key"]
    member = student.predict(code, api_name="/room_join")["member"]
    return teacher, student, code, key, member


def nano_sessions(tag: str) -> tuple[dict, list[dict]]:
    """In-process page sessions on random nano models: a teacher's (English) and two students' (English and
    Chinese), their session ids starting with ``tag``."""
    from playground import PRESETS
    from playground.server.recipes import random_recipe

    teacher = {"recipe": random_recipe(PRESETS["nano"], seed=3), "run_id": None, "lang": "en", "session": f"{tag}-t"}
    students = [
        {"recipe": random_recipe(PRESETS["nano"], seed=0), "run_id": None, "lang": lang, "session": f"{tag}-s{i}"}
        for i, lang in enumerate(("en", "zh-CN"))
    ]
    return teacher, students
