"""The page and Gradio's built files answered from memory: byte for byte what Gradio's own routes answer,
compressed as the browser asks, made anew when the app's config is, and never kept for one user."""

import gzip
import re

import brotli
import gradio as gr
import pytest
from fastapi.testclient import TestClient
from gradio.routes import App

from playground.ui import page_cache
from playground.ui.app import launch_kwargs

IDENTITY = {"accept-encoding": "identity"}


@pytest.fixture(scope="module")
def blocks():
    with gr.Blocks(title="kept page") as demo:
        gr.Textbox("a value", label="box")
        gr.Markdown("words")
    demo.launch(prevent_thread_lock=True, quiet=True)  # (the page's config as a served app has it)
    yield demo
    demo.close()


@pytest.fixture()
def apps(blocks):
    """(the app with the kept routes, the same Blocks served by Gradio's routes alone)."""
    kept = TestClient(App.create_app(blocks, app_kwargs={"routes": page_cache.routes()}))
    plain = TestClient(App.create_app(blocks))
    return kept, plain


def _kept_routes(client) -> list:
    return [r for r in client.app.router.routes if isinstance(r, page_cache.Kept)]


def _raw(client, path: str, encoding: str, **headers):
    with client.stream("GET", path, headers={"accept-encoding": encoding, **headers}) as response:
        body = b"".join(response.iter_raw())
    return response, body


def test_the_app_serves_its_page_and_files_through_the_kept_routes():
    routes = launch_kwargs()["app_kwargs"]["routes"]
    assert [r.path for r in routes if isinstance(r, page_cache.Kept)] == ["/", "/assets/", "/static/"]
    # each launch keeps its own answers
    assert not set(map(id, page_cache.routes())) & set(map(id, page_cache.routes()))


def test_the_page_is_gradios_page_in_every_encoding(apps):
    kept, plain = apps
    want = plain.get("/", headers=IDENTITY)
    assert want.status_code == 200 and b"kept page" in want.content
    first = kept.get("/", headers=IDENTITY)  # (Gradio's answer, kept)
    assert first.content == want.content
    response, body = _raw(kept, "/", "gzip, deflate, br")
    assert response.headers["content-encoding"] == "br" and brotli.decompress(body) == want.content
    assert response.headers["vary"] == "Accept-Encoding"
    assert response.headers["content-type"] == want.headers["content-type"]
    assert int(response.headers["content-length"]) == len(body) < len(want.content) / 2
    response, body = _raw(kept, "/", "gzip")
    assert response.headers["content-encoding"] == "gzip" and gzip.decompress(body) == want.content
    response, body = _raw(kept, "/", "br;q=0, gzip;q=0")
    assert "content-encoding" not in response.headers and body == want.content
    # one answer kept for the address; the query's own parameters (a share link, a room) do not change it
    (page_route, *_) = _kept_routes(kept)
    assert len(page_route.answers) == 1
    for query in ("?lang=zh-CN&room=ABC123", "?prompt=To%20be%20or%20not"):
        assert kept.get("/" + query, headers=IDENTITY).content == plain.get("/" + query, headers=IDENTITY).content
    assert len(page_route.answers) == 1


def test_another_address_is_another_page(apps):
    kept, plain = apps
    proxied = {**IDENTITY, "x-forwarded-host": "class.example.org", "x-forwarded-proto": "https"}
    want = plain.get("/", headers=proxied).content
    assert b"https://class.example.org" in want
    assert kept.get("/", headers=IDENTITY).content != want
    assert kept.get("/", headers=proxied).content == want
    assert len(_kept_routes(kept)[0].answers) == 2


def test_a_config_made_anew_is_a_new_page(blocks, apps):
    kept, _ = apps
    assert b"kept page" in kept.get("/", headers=IDENTITY).content
    old = (blocks.title, blocks.config)
    try:
        blocks.title = "another title"
        blocks.config = blocks.get_config_file()
        assert b"another title" in kept.get("/", headers=IDENTITY).content
    finally:
        blocks.title, blocks.config = old


def test_requests_for_one_user_go_to_gradio_and_are_not_kept(apps):
    kept, plain = apps
    page_route = _kept_routes(kept)[0]
    assert (
        kept.get("/?deep_link=abc", headers=IDENTITY).content == plain.get("/?deep_link=abc", headers=IDENTITY).content
    )
    assert kept.head("/").status_code == plain.head("/").status_code == 200
    assert not page_route.answers
    kept.app.auth = [("teacher", "secret")]  # a login: the page is made for whoever asks
    try:
        kept.get("/")
        assert not page_route.answers
    finally:
        kept.app.auth = None


def test_built_files_are_gradios_compressed_once_and_kept_by_browsers(apps):
    kept, plain = apps
    page = plain.get("/", headers=IDENTITY).text
    scripts = sorted(set(re.findall(r"/assets/[\w.-]+\.js", page)))
    assert scripts, "the page names no built script"
    path = scripts[0]
    want = plain.get(path, headers=IDENTITY)
    assert want.status_code == 200 and want.content
    assert kept.get(path, headers=IDENTITY).content == want.content
    response, body = _raw(kept, path, "br")
    assert response.headers["content-encoding"] == "br" and brotli.decompress(body) == want.content
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["etag"] == want.headers["etag"]
    assert response.headers["content-type"] == want.headers["content-type"]
    again = kept.get(path, headers={"if-none-match": want.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    files_route = _kept_routes(kept)[1]
    assert list(files_route.answers) == [path]
    assert files_route.answers[path].encoded.keys() == {"br"}  # (gzip is made only when a browser asks)


@pytest.mark.parametrize(
    "path", ["/assets/not-a-file.js", "/assets/../routes.py", "/assets/%2e%2e/routes.py", "/static/../../setup.py"]
)
def test_a_file_gradio_refuses_is_refused_and_not_kept(apps, path):
    kept, plain = apps
    got, want = kept.get(path), plain.get(path)
    assert got.status_code == want.status_code != 200
    assert not any(route.answers for route in _kept_routes(kept))


def test_a_range_request_goes_to_gradio(apps):
    kept, plain = apps
    page = plain.get("/", headers=IDENTITY).text
    path = sorted(set(re.findall(r"/assets/[\w.-]+\.js", page)))[0]
    got = kept.get(path, headers={"range": "bytes=0-9", **IDENTITY})
    want = plain.get(path, headers={"range": "bytes=0-9", **IDENTITY})
    assert (got.status_code, got.content) == (want.status_code, want.content) == (206, want.content[:10])
    assert not _kept_routes(kept)[1].answers


def test_the_kept_answers_stay_within_their_bound(apps, monkeypatch):
    kept, plain = apps
    page = plain.get("/", headers=IDENTITY).text
    paths = sorted(set(re.findall(r"/assets/[\w.-]+\.(?:js|css)", page)))[:6]
    sizes = {p: len(plain.get(p, headers=IDENTITY).content) for p in paths}
    bound = sum(sorted(sizes.values())[-2:]) + 1  # room for about two of them
    monkeypatch.setattr(page_cache, "CAPACITY_BYTES", bound)
    files_route = _kept_routes(kept)[1]
    for p in paths:
        assert kept.get(p, headers=IDENTITY).content == plain.get(p, headers=IDENTITY).content
        assert sum(a.size for a in files_route.answers.values()) <= bound
    assert paths[-1] in files_route.answers  # (the least recently used went first)


@pytest.mark.parametrize(
    ("header", "chosen"),
    [
        ("gzip, deflate, br, zstd", "br"),
        ("gzip", "gzip"),
        ("br;q=0, gzip", "gzip"),
        ("gzip;q=0.5, br;q=0.0", "gzip"),
        ("identity", ""),
        ("", ""),
        ("BR", "br"),
        ("br;q=nonsense", ""),
    ],
)
def test_the_encoding_is_one_the_browser_accepts(header, chosen):
    assert page_cache.accepted_encoding(header) == chosen


def test_an_answer_larger_than_the_bound_is_sent_and_not_kept(apps, monkeypatch):
    kept, plain = apps
    monkeypatch.setattr(page_cache, "CAPACITY_BYTES", 10)
    want = plain.get("/", headers=IDENTITY).content
    for encoding in ("identity", "br"):
        assert kept.get("/", headers={"accept-encoding": encoding}).content == want
    assert not _kept_routes(kept)[0].answers
