"""A page's load events run at once, and one of them (``load_session``) gives the page a new state: whatever
id another of them draws for the page is the one the page keeps, so nothing it leases is left under an id
the page dropped (until the idle timeout)."""

from types import SimpleNamespace

from gradio.context import LocalContext

from playground.server.model_cache import CACHE
from playground.ui.app import end_session
from playground.ui.lessons import tab as lessons_tab
from playground.ui.model import tab as model_tab
from playground.ui.state import new_state, page_id, session_id


def in_page(name: str, handler, *args):
    request = SimpleNamespace(session_hash=name, client=None, query_params={}, headers={})
    token = LocalContext.request.set(request)
    try:
        return handler(*args, request)
    finally:
        LocalContext.request.reset(token)


def leases() -> set[str]:
    return set(CACHE._leases)


def test_a_pages_load_events_lease_its_model_under_the_id_the_page_keeps():
    before = leases()
    default = {**new_state(), "session": None}  # the app's default state: every page's before its load
    in_page("loads-1", lessons_tab.open_from_link, dict(default), "Hello there")  # (it leases on a copy)
    loaded = in_page("loads-1", model_tab.load_session, dict(default)).state
    in_page("loads-1", lessons_tab.open_from_link, dict(default), "Hello there")  # (after it, as well)
    assert leases() - before == {loaded["session"]}
    other = in_page("loads-2", model_tab.load_session, dict(default)).state
    assert other["session"] != loaded["session"]  # one id a page, not one for all
    end_session(loaded)
    end_session(other)
    assert not leases() - before  # the pages closed: nothing of theirs is held


def test_outside_a_page_each_state_draws_its_own_id():
    a, b = {}, new_state()
    assert session_id(a) != session_id(b) and page_id(a) == session_id(a)
    assert not session_id(a).startswith("page:")
