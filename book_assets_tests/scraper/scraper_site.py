"""A tiny local HTTP site for fetcher tests (imported by conftest.py and the fetcher tests).

A real HTTP server on 127.0.0.1 serving one behaviour per path, so fetchers are tested against sockets,
not mocks. "localhost" reaches the same server under a different hostname: that is the "off-domain"
host, so a test can prove an off-domain target was never requested by looking at ``hits``.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from book_assets.sandbox.bomb import gzip_bomb

POUND_PAGE = (
    "<!DOCTYPE html><html><head><title>ok</title></head>"
    "<body><h1>Price £51.77</h1><img src='/img.png'><link rel='stylesheet' href='/style.css'></body></html>"
).encode()
# Like the live site, this page declares its charset in a <meta>: Chromium, unlike decode_html, falls back
# to windows-1252 for a charset-less page, so rendered_html of POUND_PAGE would read "Â£".
JS_PAGE = (
    "<!DOCTYPE html><html><head><meta charset='utf-8'><title>js</title></head><body><div id='root'></div>"
    "<img src='/img.png'><img src='/img2.png'>"
    "<script>var p=document.createElement('p');p.id='built-by-js';p.textContent='Made by script £';"
    "document.getElementById('root').appendChild(p);</script></body></html>"
).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Site

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        all_headers = {"Content-Type": "text/html", "Content-Length": str(len(body))}
        all_headers.update(headers or {})
        for name, value in all_headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.hits.append((self.headers.get("Host", ""), self.path))
        self.server.user_agents.append(self.headers.get("User-Agent", ""))
        path = self.path.split("?")[0]
        port = self.server.server_address[1]
        if path in ("/", "/ok"):
            self._send(200, POUND_PAGE)
        elif path == "/js":
            self._send(200, JS_PAGE)
        elif path in ("/img.png", "/img2.png"):
            self._send(200, b"\x89PNG\r\n\x1a\n", {"Content-Type": "image/png"})
        elif path == "/style.css":
            self._send(200, b"body{}", {"Content-Type": "text/css"})
        elif path == "/404":
            self._send(404, b"<h1>Not Found</h1>")
        elif path == "/500":
            self._send(500, b"<h1>Server Error</h1>")
        elif path == "/503":
            self._send(503, b"busy", {"Retry-After": "7"})
        elif path == "/429":
            self._send(429, b"slow down", {"Retry-After": "3"})
        elif path == "/truncated":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(POUND_PAGE[:40])
            self.wfile.flush()
            self.close_connection = True
        elif path == "/slow":
            time.sleep(3)
            self._send(200, POUND_PAGE)
        elif path == "/offsite":
            self._send(302, b"", {"Location": f"http://localhost:{port}/target"})
        elif path == "/target":
            self._send(200, b"<p>off-domain target</p>")
        elif path == "/bad-location":
            self._send(302, b"", {"Location": "http://[::1/x"})  # an IPv6 host without its closing bracket
        elif path == "/bad-port-location":
            self._send(302, b"", {"Location": f"http://127.0.0.1:{port}0000/ok"})
        elif path == "/javascript-location":
            self._send(302, b"", {"Location": "javascript:alert(1)"})
        elif path == "/loop":
            self._send(302, b"", {"Location": "/loop"})
        elif path.startswith("/chain/"):
            left = int(path.rsplit("/", 1)[1])
            self._send(302, b"", {"Location": f"/chain/{left - 1}" if left > 0 else "/ok"})
        elif path == "/big":
            self._send(200, b"x" * (2 * 1024 * 1024))
        elif path == "/bomb":
            # 1 MB of gzip on the wire (an honest Content-Length) that inflates to 1 GiB of HTML.
            self._send(200, gzip_bomb(), {"Content-Encoding": "gzip"})
        elif path == "/big-unannounced":
            # No Content-Length: the size is only discovered while streaming.
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(64):
                self.wfile.write(b"y" * 32768)
            self.close_connection = True
        else:
            self._send(404, b"no such path")


class _Site(http.server.ThreadingHTTPServer):
    daemon_threads = True
    hits: list[tuple[str, str]]
    user_agents: list[str]

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients hanging up mid-body (too-large, timeout tests) are expected; keep test output clean.
        pass


@dataclass
class LocalSite:
    """Handle on the running test server."""

    server: _Site

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def hits(self) -> list[tuple[str, str]]:
        return self.server.hits

    def paths_hit(self) -> list[str]:
        return [path for _, path in self.server.hits]


@contextmanager
def serve() -> Iterator[LocalSite]:
    """Run a fresh server on a free port; shut it down on exit."""
    server = _Site(("127.0.0.1", 0), _Handler)
    server.hits = []
    server.user_agents = []
    # A short poll: shutdown() waits for the serving loop to look up, every 0.5 s by default.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield LocalSite(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
