"""The page and Gradio's built files, each answered from memory, compressed, after Gradio first answers it.

Every page that opens asks the server for its HTML and about ninety script, style and font files. Gradio
makes the HTML again for each request (a deep copy of the app's config, its API info and code snippets,
the whole rendered to about 0.9 MB) and sends it uncompressed; it reads each built file from disk through
worker threads and compresses it again for each request. Here that cost about 0.4 s of the server's CPU a
page, with the interpreter lock held most of it, so thirty students opening the page at the start of a
lesson held up every stream in the room for seconds (docs/benchmarks.md).

``routes()`` go before Gradio's own (``launch_kwargs``' ``app_kwargs``). A GET of ``/``, ``/assets/…`` or
``/static/…`` is passed to Gradio's route the first time, and its answer kept when it is a plain 200: the
checks (paths, the page's config) stay Gradio's. Later requests get the kept answer, compressed once per
encoding the browser accepts (brotli, gzip). What makes the page differ is in its key: the address the
browser used (Gradio writes it into the page) and the ``page`` asked for; the app's config is compared by
identity, so a config Gradio makes anew is a new page. A request Gradio answers per user (a login, a deep
link, a HEAD, a range) always goes to Gradio. Built files' names carry their contents' hash, so browsers
may keep them (``immutable``); the rest are revalidated by their ETag.
"""

from __future__ import annotations

import asyncio
import gzip
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import brotli
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Message, Receive, Scope, Send

# what the kept answers may hold in all (raw and compressed), least recently used dropped first
CAPACITY_BYTES = 64 * 1024 * 1024
BROTLI_QUALITY = 5  # 0.9 MB page: 11 ms, 74 KiB (quality 11: ~1 s for 64 KiB)
GZIP_LEVEL = 6
_COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")
_DROPPED = {b"content-length", b"content-encoding", b"vary"}
_ADDRESS_HEADERS = ("host", "x-forwarded-host", "x-forwarded-proto", "x-gradio-server")
# query parameters Gradio's page route reads (the rest only the browser reads)
_PAGE_PARAMS = {"page", "deep_link"}


class Answer:
    """One kept 200: its headers, its body, and that body compressed for each encoding asked so far."""

    def __init__(self, headers: list[tuple[bytes, bytes]], body: bytes, compressible: bool, made_from: Any):
        self.headers = headers
        self.body = body
        self.compressible = compressible
        self.made_from = made_from
        self.etag = dict(headers).get(b"etag")
        self.encoded: dict[str, bytes] = {}

    @property
    def size(self) -> int:
        return len(self.body) + sum(map(len, self.encoded.values()))

    def body_for(self, encoding: str) -> bytes:
        if not encoding:
            return self.body
        if encoding not in self.encoded:
            if encoding == "br":
                self.encoded[encoding] = brotli.compress(self.body, quality=BROTLI_QUALITY)
            else:
                self.encoded[encoding] = gzip.compress(self.body, compresslevel=GZIP_LEVEL, mtime=0)
        return self.encoded[encoding]


def accepted_encoding(accept_encoding: str) -> str:
    """ "br", "gzip" or "" (identity): the first of brotli and gzip the request accepts (a q of 0 refuses)."""
    offered = set()
    for part in accept_encoding.lower().split(","):
        name, _, params = part.strip().partition(";")
        q = params.strip()
        if q.startswith("q="):
            try:
                if float(q[2:]) <= 0:
                    continue
            except ValueError:
                continue
        offered.add(name.strip())
    return next((e for e in ("br", "gzip") if e in offered), "")


class Kept(BaseRoute):
    """GETs of ``path`` (or of every path under it: ``under=True``) answered from Gradio's first answer."""

    def __init__(
        self, path: str, key: Callable[[Scope], Any | None], *, under: bool = False, cache_control: str | None = None
    ):
        self.path = path
        self.under = under
        self.key = key
        self.cache_control = cache_control
        self.answers: OrderedDict[Any, Answer] = OrderedDict()
        self.filling: dict[Any, asyncio.Future] = {}

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and scope["method"] == "GET":
            path = scope["path"]
            if path.startswith(self.path) if self.under else path == self.path:
                return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any):
        raise NoMatchFound(name, path_params)  # (nameless: ``app.url_path_for`` looks past it)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        key = None if "range" in headers else self.key(scope)
        if key is None:
            await _gradios(scope, receive, send)
            return
        made_from = _made_from(scope)
        answer = self.answers.get(key)
        if answer is not None and answer.made_from is not made_from:
            answer = None
        if answer is None:
            if key in self.filling:  # another request is asking Gradio for it: wait for that answer
                answer = await asyncio.shield(self.filling[key])
            if answer is None:
                answer, messages = await self._fill(key, made_from, scope, receive)
                if answer is None:  # not a plain 200: Gradio's answer as it was
                    for message in messages:
                        await send(message)
                    return
        else:
            self.answers.move_to_end(key)
        await self._send(answer, headers, send)

    async def _fill(
        self, key: Any, made_from: Any, scope: Scope, receive: Receive
    ) -> tuple[Answer | None, list[Message]]:
        """Gradio's answer, and the kept one made of it (None unless it is a plain 200)."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.filling[key] = future
        answer = None
        try:
            messages: list[Message] = []

            async def keep(message: Message) -> None:
                messages.append(message)

            await _gradios(scope, receive, keep)
            answer = _plain_200(messages, made_from)
            if answer is not None:
                self.answers[key] = answer
                _bound(self.answers)  # (an answer larger than the bound is sent, then not kept)
            return answer, messages
        finally:
            del self.filling[key]
            future.set_result(answer)

    async def _send(self, answer: Answer, headers: Headers, send: Send) -> None:
        extra = [(b"cache-control", self.cache_control.encode())] if self.cache_control else []
        if answer.etag is not None and headers.get("if-none-match", "").encode() == answer.etag:
            await send({"type": "http.response.start", "status": 304, "headers": [(b"etag", answer.etag), *extra]})
            await send({"type": "http.response.body", "body": b""})
            return
        encoding = accepted_encoding(headers.get("accept-encoding", "")) if answer.compressible else ""
        made = bool(encoding) and encoding not in answer.encoded
        body = answer.body_for(encoding)
        if made:  # (the kept answers grew: only then can they pass the bound)
            _bound(self.answers)
        raw = [*answer.headers, *extra, (b"content-length", str(len(body)).encode())]
        if answer.compressible:
            raw.append((b"vary", b"Accept-Encoding"))
        if encoding:
            raw.append((b"content-encoding", encoding.encode()))
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        await send({"type": "http.response.body", "body": body})


async def _gradios(scope: Scope, receive: Receive, send: Send) -> None:
    """The request answered by the route the app would have used without these."""
    for other in scope["app"].router.routes:
        if isinstance(other, Kept):
            continue
        match, child_scope = other.matches(scope)
        if match is Match.FULL:
            await other.handle({**scope, **child_scope}, receive, send)
            return
    await scope["app"].router.not_found(scope, receive, send)


def _plain_200(messages: list[Message], made_from: Any) -> Answer | None:
    # (a template's answer may begin with "http.response.debug", which only test clients ask for)
    start = next((m for m in messages if m["type"] == "http.response.start"), None)
    if start is None or start["status"] != 200:
        return None
    raw = [(k.lower(), v) for k, v in start.get("headers", [])]
    if any(k in (b"content-encoding", b"set-cookie") for k, _ in raw):
        return None
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    content_type = dict(raw).get(b"content-type", b"").decode("latin-1")
    compressible = content_type.startswith(_COMPRESSIBLE)
    return Answer([(k, v) for k, v in raw if k not in _DROPPED], body, compressible, made_from)


def _bound(answers: OrderedDict[Any, Answer]) -> None:
    total = sum(a.size for a in answers.values())
    while answers and total > CAPACITY_BYTES:
        _, dropped = answers.popitem(last=False)
        total -= dropped.size


def _made_from(scope: Scope) -> Any:
    # the page is made from the app's config: a new config object (a reload, a remount) is a new page
    return getattr(scope["app"].get_blocks(), "config", None)


def page_key(scope: Scope) -> tuple | None:
    """What Gradio's page depends on, or None when it is made for one user (a login, a deep link)."""
    app = scope["app"]
    if getattr(app, "auth", None) is not None or getattr(app, "auth_dependency", None) is not None:
        return None
    params = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")) if k in _PAGE_PARAMS]
    if any(k == "deep_link" and v for k, v in params):
        return None
    headers = Headers(scope=scope)
    return (
        scope.get("scheme"),
        tuple(scope.get("server") or ()),
        scope.get("root_path", ""),
        tuple(headers.get(h) for h in _ADDRESS_HEADERS),
        tuple(sorted(params)),
    )


def file_key(scope: Scope) -> str:
    return scope["path"]


def routes() -> list[BaseRoute]:
    """One app's routes (each server keeps its own answers)."""
    return [
        Kept("/", page_key),
        Kept("/assets/", file_key, under=True, cache_control="public, max-age=31536000, immutable"),
        Kept("/static/", file_key, under=True),
    ]
