"""The room bench's followers keep their connections open as a page does, and open one again when the server
closed it (bench.room_sse.KeptConnection), against a local HTTP/1.1 server."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.room_sse import KeptConnection


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless a response says close
    ports: list[int] = []

    def do_GET(self):
        self.ports.append(self.client_address[1])
        body = str(len(self.ports)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.path == "/close":
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        if self.path == "/drop":  # closed after the answer, unannounced (as an idle timeout closes one)
            self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Handler.ports = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_requests_share_one_connection_until_the_server_closes_it(server):
    kept = KeptConnection("127.0.0.1", server.server_address[1], timeout=5)
    assert [kept.request("GET", "/")[1] for _ in range(3)] == [b"1", b"2", b"3"]
    assert kept.opened == 1 and len(set(Handler.ports)) == 1
    assert kept.request("GET", "/close") == (200, b"4")  # the server says it closes: so does the client
    assert kept.conn is None
    assert kept.request("GET", "/") == (200, b"5")
    assert kept.opened == 2 and len(set(Handler.ports)) == 2
    assert kept.request("GET", "/drop") == (200, b"6")
    time.sleep(0.2)  # (the server has closed it)
    assert kept.request("GET", "/") == (200, b"7")  # sent again on a new connection
    assert kept.opened == 3 and len(set(Handler.ports)) == 3
    kept.close()
