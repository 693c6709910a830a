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
