"""The quotes.toscrape.com stand-in over real HTTP: spidyquotes' Flask app in werkzeug's threaded server.

werkzeug's server speaks HTTP/1.1 with keep-alive when it is threaded, as a crawler's connection pool expects,
and serves each request in a thread of its own; the application keeps no state between requests that a page
shows (its session holds only a login, and no page of the catalogue reads it unless someone logs in).

``scripted`` makes paths fail for a while, as the books' sandbox's scripted faults do (``Faults.scripted``), in
status codes only: ``{"/author/Albert-Einstein/": [500, 500]}`` answers the first two requests for that path
with a 500 and serves it from the third on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from types import TracebackType
from typing import TYPE_CHECKING, Self

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from book_assets.sandbox.quotes.spidyquotes import spidyquotes

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


def application() -> Flask:
    """The vendored application (one per process: it is a module-level Flask app, safe across threads)."""
    return spidyquotes.app


class Scripted:
    """The application with scripted failures: each path's status codes answered in order, one a request,
    before the application serves it (thread-safe: the server answers each request in a thread of its own)."""

    def __init__(self, app: WSGIApplication, scripted: Mapping[str, Sequence[int]]) -> None:
        for codes in scripted.values():
            for code in codes:
                HTTPStatus(code)  # a typo fails at start-up, not mid-crawl
        self.app = app
        self._left = {path: list(codes) for path, codes in scripted.items()}
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        with self._lock:
            left = self._left.get(environ.get("PATH_INFO", ""))
            code = left.pop(0) if left else None
        if code is None:
            return self.app(environ, start_response)
        status = HTTPStatus(code)
        start_response(f"{status.value} {status.phrase}", [("Content-Type", "text/plain; charset=utf-8")])
        return [status.phrase.encode()]


class _QuietRequestHandler(WSGIRequestHandler):
    """werkzeug's handler without its line per request (errors are still logged)."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class QuotesServer:
    """The stand-in in a background thread: for tests, fixtures and ``book-pipeline sandbox quotes``.

    ``port=0`` (the default) lets the OS pick a free port at bind time, so two servers never race for one.
    ``log_requests`` prints werkzeug's line per request on stderr (the CLI's choice; off for tests);
    ``scripted``: per-path status codes answered before the path is served (:class:`Scripted`).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_requests: bool = False,
        scripted: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        self.host = host
        self._app: WSGIApplication = Scripted(application(), scripted) if scripted else application()
        self._requested_port = port
        self._handler = WSGIRequestHandler if log_requests else _QuietRequestHandler
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:41234``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def url_for(self, path: str) -> str:
        return self.url + (path if path.startswith("/") else "/" + path)

    def start(self) -> Self:
        """Bind and serve in a daemon thread; raises ``OSError`` when the address cannot be bound."""
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = make_server(
            self.host, self._requested_port, self._app, threaded=True, request_handler=self._handler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="quotes-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and join the thread. Idempotent."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        thread.join()
        server.server_close()
        self._server, self._thread = None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
