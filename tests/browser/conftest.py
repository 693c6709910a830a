import time

import pytest

from tests.browser.chromium import chromium_or_skip, queue_state, recent_events, record_events, server_stacks

SLOW_S = 0.35  # CPU-bound seconds added to each head's forward in a slowed sweep: 24 heads, about 8 s in all


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A browser test that failed also reports what the app in this process was doing as it failed: Gradio's
    queue, its last events and the server's threads (a page waiting on an answer that never came says no more
    than that; a view a late event drew over says which)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        report.sections.append(
            (
                "the app as the test failed",
                f"queue: {queue_state()}\nlast events (started, ended, page, function):\n{recent_events()}\n{server_stacks()}",
            )
        )


@pytest.fixture(scope="module")
def page_url(app_url):
    """The running app's address, once Chromium is known to be there."""
    chromium_or_skip()
    record_events()
    return app_url


@pytest.fixture
def slowed_sweep(monkeypatch):
    """Each head's forward in the sweep also burns SLOW_S of CPU in torch; returns how many ran."""
    import torch

    from playground.inside import effects

    seen: list[int] = []
    real = effects.run_from

    def slowed(*args, **kwargs):
        seen.append(1)
        a = torch.randn(384, 384)
        end = time.perf_counter() + SLOW_S
        while time.perf_counter() < end:
            a = torch.tanh(a @ a.T / 384)
        return real(*args, **kwargs)

    monkeypatch.setattr(effects, "run_from", slowed)
    return seen
