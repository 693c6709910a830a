"""The browser follow benchmark's reading of its pages' logs (bench/room_pages.py): when a student's page
showed a step or a run, against the teacher's press, the teacher's own page, and the answer it drew."""

from bench.room_pages import arrived, never_running, quantiles, run_done, run_lags, step_lags

# [ms, progress line, lesson figure, chips, status, map]
TEACHER = [
    [0, "Lesson 1 · step 1", "a", 0, "", ""],
    [1_300, "Lesson 1 · step 2", "a", 0, "", ""],  # the line first, then its figure
    [1_400, "Lesson 1 · step 2", "b", 0, "", ""],
    [10_200, "Lesson 1 · step 2", "b", 3, "running", ""],
    [10_500, "Lesson 1 · step 2", "b", 8, "done", ""],
    [11_000, "Lesson 1 · step 2", "b", 8, "done", "m0"],  # (its page's own map, drawn first for the run before)
    [11_500, "Lesson 1 · step 2", "b", 8, "done", "m1"],
    [20_000, "Lesson 1 · step 2", "b", 8, "done", "m1"],  # (the second run: the first one's state till it starts)
    [20_300, "Lesson 1 · step 2", "b", 1, "running", "m1"],
    [20_600, "Lesson 1 · step 2", "b", 8, "done", "m1"],
    [21_000, "Lesson 1 · step 2", "b", 8, "done", "m2"],
]
STUDENT = [
    [0, "Lesson 1 · step 1", "a", 0, "", ""],
    [1_600, "Lesson 1 · step 2", "b", 0, "", ""],
    [11_200, "Lesson 1 · step 2", "b", 8, "done", "m1"],
    [21_100, "Lesson 1 · step 2", "b", 8, "done", "m2"],
]
# [start, end, bytes]: a poll with nothing new, then the one carrying the step, then the run
POLLS = [[1_100, 1_150, 3_000], [1_200, 1_450, 40_000], [1_500, 1_520, 3_000], [10_800, 10_900, 80_000]]
POLLS += [[20_700, 20_750, 80_000]]
# (the teacher's page opening the Generate tab ends the step's window: its lesson is out of sight after it)
PRESSES = [["pg-lesson-next", 1_000], ["tab:generate", 9_000], ["pg-generate", 10_000], ["pg-generate", 20_000]]


def test_a_step_is_timed_to_the_line_and_figure_the_page_ends_on():
    lags = step_lags(PRESSES, TEACHER, [STUDENT], [POLLS])
    # (the line alone at 1.3 s on the teacher's page is not the step yet)
    assert lags["missed"] == [] and lags["after_press"] == [0.6]
    assert lags["behind_teacher"] == [0.2]
    assert lags["answer_after_press"] == [0.45]  # the largest answer before the page drew it


def test_a_run_is_timed_from_the_teachers_done_to_chips_done_and_map():
    lags = run_lags(PRESSES, TEACHER, [STUDENT], [POLLS], tokens=8)
    assert lags["after_done"] == [0.7, 0.5]  # (the second from its own done, not the first run's chips)
    assert [round(x, 6) for x in lags["behind_teacher_map"]] == [-0.3, 0.1]
    assert [round(x, 6) for x in lags["answer_after_done"]] == [0.4, 0.15]


def test_a_teachers_page_busy_for_a_whole_run_is_done_when_it_shows_the_new_run():
    """The teacher's page never showed the second run running (its main thread busy for all of it): that run
    began at the press and was done when the page showed its chips, done and a map other than the first run's."""
    busy = [e for e in TEACHER if e[0] not in (20_300, 20_600)]
    assert run_done(busy, 20_000, 8) == (20_000, 21_000)
    assert run_done(busy, 10_000, 8, until=20_000) == (10_200, 10_500)  # (the first run: as before)
    assert run_done(busy[:-1], 20_000, 8) == (None, None)  # (its map not drawn yet: not done)
    assert run_lags(PRESSES, busy, [STUDENT], [POLLS], tokens=8)["after_done"] == [0.7, 0.1]
    assert never_running(busy, PRESSES) == 1 and never_running(TEACHER, PRESSES) == 0


def test_a_page_that_never_showed_the_state_gives_no_sample():
    stuck = [[0, "Lesson 1 · step 1", "a", 0, "", ""]]
    missed = step_lags(PRESSES, TEACHER, [stuck], [POLLS])
    assert missed["after_press"] == [] and missed["missed"] == [1.0]  # (the press at 1 s)
    assert run_lags(PRESSES, TEACHER, [stuck], [POLLS], tokens=8)["after_done"] == []
    assert arrived(POLLS, drawn_ms=1_000, since_ms=0) is None


def test_quantiles():
    q = quantiles([0.1 * i for i in range(1, 21)])
    assert q["n"] == 20 and abs(q["p50"] - 1.05) < 1e-9 and abs(q["p95"] - 1.905) < 1e-9 and abs(q["max"] - 2.0) < 1e-9
    assert quantiles([]) == {"n": 0}
