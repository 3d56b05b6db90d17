"""A tiny scripted web site for chaos tests: fixed responses per path, and a hit counter per path.

The sandbox replicates the real site; this serves what the real site never would (garbage, 20 MB pages,
redirect loops, links to other hosts). Stdlib ``http.server`` in a daemon thread, one thread per request,
``Connection: close`` on every response (a body without ``Content-Length`` ends when the socket closes).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit


@dataclass
class Page:
    """One scripted response. ``chunks`` (a factory, so each request gets a fresh iterator) streams a body
    without holding it in memory; ``length`` is sent as Content-Length when given."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Callable[[], Iterable[bytes]] | None = None
    length: int | None = None


class StubSite:
    """``with StubSite({"/a": Page(body=b"...")}) as site: site.url_for("/a"); site.hits["/a"]``."""

    def __init__(self, pages: dict[str, Page] | None = None, host: str = "127.0.0.1") -> None:
        self.pages: dict[str, Page] = dict(pages or {})
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                with site._lock:
                    site.hits[path] += 1
                page = site.pages.get(path) or Page(status=404, body=b"<html><body>404</body></html>")
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(page.status)
                    headers = {"Content-Type": "text/html", **page.headers, "Connection": "close"}
                    if page.chunks is None:
                        headers["Content-Length"] = str(len(page.body))
                    elif page.length is not None:
                        headers["Content-Length"] = str(page.length)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if page.chunks is None:
                        self.wfile.write(page.body)
                    else:
                        for chunk in page.chunks():
                            self.wfile.write(chunk)
                self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the serving loop to look up, every 0.5 s by default.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="stub-site", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url_for(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def total_hits(self) -> int:
        with self._lock:
            return sum(self.hits.values())

    def __enter__(self) -> StubSite:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
