"""Every app-test module starts with no session leases: each API client and handler session leases its
model and one generation's room for 15 idle minutes, so without this a module would share the budget
with every earlier module's sessions."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def no_leases_between_modules():
    """End every session's lease before and after the module (after its app has closed: autouse
    fixtures are set up first, so they are torn down last)."""
    from playground.server.model_cache import CACHE

    CACHE.end_expired_leases(now=float("inf"))
    yield
    CACHE.end_expired_leases(now=float("inf"))
