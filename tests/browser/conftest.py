import pytest

from tests.browser.chromium import chromium_or_skip


@pytest.fixture(scope="module")
def page_url(app_url):
    """The running app's address, once Chromium is known to be there."""
    chromium_or_skip()
    return app_url
