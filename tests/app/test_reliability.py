"""Every case of tests/app/reliability_cases.py gets its specific message, no traceback, and the session
keeps serving: after all of them the same model still generates."""

import pytest

from tests.app.reliability_cases import CASES, nano_state, outcome, raw_outcome


@pytest.fixture(scope="module")
def state():
    return nano_state()


@pytest.mark.parametrize("area, sent, call, expected", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_case_gets_its_message(state, area, sent, call, expected):
    raw = raw_outcome(call, state)
    message = outcome(call, state)
    expected = (expected,) if isinstance(expected, str) else expected
    assert any(e in message for e in expected), message
    assert "Traceback" not in message and "Something went wrong" not in message
    assert "<img" not in raw and "<script" not in raw  # user text is escaped, never HTML


def test_there_are_at_least_100_cases():
    assert len(CASES) >= 100


def test_the_session_still_serves_after_every_case(state):
    from playground.ui.generate import tab as generate_tab

    for _, _, call, _ in CASES:
        outcome(call, state)
    outs = list(generate_tab.generate_tokens(state, "Hello", 0, 0, 1.0, 4, 1, True))
    assert "Done: 4 tokens" in outs[-1][2]
