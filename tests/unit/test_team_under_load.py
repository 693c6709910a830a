"""runtime.team_under_load: the measured team size, a try of the other one every EXPLORE_EVERY calls, and a
switch only when that try was clearly faster."""

from playground.runtime.team_under_load import EXPLORE_EVERY, MARGIN, TeamChoice


def drive(team: TeamChoice, seconds: dict[int, float], calls: int) -> list[int]:
    used = []
    for _ in range(calls):
        size = team.next_size()
        used.append(size)
        team.record(size, seconds[size])
    return used


def test_keeps_the_measured_size_while_it_stays_faster():
    team = TeamChoice(current=0)
    used = drive(team, {0: 8.8e-3, 1: 11.8e-3}, 3 * EXPLORE_EVERY)
    assert used.count(1) == 3 and used[EXPLORE_EVERY - 1] == 1  # one try per EXPLORE_EVERY calls
    assert team.current == 0 and team.switches == []
    assert abs(team.recent - 8.8e-3) < 1e-9


def test_switches_when_the_load_makes_the_other_size_faster_and_back():
    team = TeamChoice(current=0)
    drive(team, {0: 8.8e-3, 1: 11.8e-3}, EXPLORE_EVERY + 1)
    drive(team, {0: 16.4e-3, 1: 10.6e-3}, 2 * EXPLORE_EVERY)  # another process now holds one core
    assert team.current == 1 and len(team.switches) == 1
    drive(team, {0: 8.8e-3, 1: 11.8e-3}, 2 * EXPLORE_EVERY)  # quiet again
    assert team.current == 0 and len(team.switches) == 2


def test_a_try_only_slightly_faster_does_not_switch():
    team = TeamChoice(current=1)
    drive(team, {1: 10e-3, 0: 10e-3 * (MARGIN + 0.05)}, 4 * EXPLORE_EVERY)
    assert team.current == 1 and team.switches == []


def test_nothing_is_tried_before_the_current_size_has_a_time():
    team = TeamChoice(current=0)
    for _ in range(2 * EXPLORE_EVERY):
        assert team.next_size() == 0  # nothing recorded: no time to compare a try with
