"""The sandbox's HTTP/1.1 server: asyncio, keep-alive, pre-rendered bytes, and faults at the socket level.

A hand-written asyncio server instead of ``http.server`` for two reasons: it must never be the bottleneck of
a crawl benchmark (one event loop serving cached bytes does thousands of requests per second), and faults
such as connection resets, truncated bodies and hangs need direct control of the socket, which higher-level
frameworks hide.

``SandboxApp`` is the asyncio server; ``SandboxServer`` runs one on a private event loop in a background
thread so synchronous tests and the CLI can use it (``with SandboxServer() as s: httpx.get(s.url)``).

Responses copy the live site's headers, in particular ``Content-Type: text/html`` with no charset over a
UTF-8 body, so a client that trusts the header decodes "£" as "Â£" exactly as it would on the real site.
Pages carry ``ETag`` and ``Last-Modified`` as nginx sends them for static files, and a conditional GET
whose validators still match gets ``304 Not Modified`` without a body (RFC 9110 section 13.2.2).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from email.utils import formatdate, parsedate_to_datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs

from book_assets.sandbox.bomb import gzip_bomb
from book_assets.sandbox.catalogue import BOOK_COUNT, CATEGORY_COUNT, Catalogue
from book_assets.sandbox.faults import NO_FAULTS, Action, Faults
from book_assets.sandbox.pages import Site, error_html, render_error_page, render_maintenance_page
from book_assets.sandbox.redesign import Redesign, parse_changes
from book_assets.sandbox.softblock import ray_id, soft_block_body

CONTROL_PREFIX = "/__sandbox__/"
#: The faults an operator may switch on for a while (``POST /__sandbox__/faults``): the per-request rates and
#: delays. Bombs are left out (their body is assembled at start-up), and so are scripts and connection caps.
BURST_FIELDS = frozenset(
    (
        "latency_s",
        "jitter_s",
        "error_rate",
        "rate_limit_rate",
        "reset_rate",
        "hang_rate",
        "hang_s",
        "truncate_rate",
        "soft_block_rate",
    )
)
SERVER_HEADER = "nginx/1.21.6"
MAX_HEAD_BYTES = 64 * 1024
_SERVER_LINE = f"Server: {SERVER_HEADER}\r\nDate: ".encode()

_REASONS = {
    200: "OK",
    304: "Not Modified",
    400: "Bad Request",
    404: "Not Found",
    405: "Not Allowed",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Temporarily Unavailable",
}


@dataclass
class SandboxStats:
    """A snapshot of what the server saw since the last reset (site pages only, not ``/__sandbox__/``).

    Attributes:
        hits: requests per path (query string removed).
        total_requests: sum of ``hits``.
        max_concurrency: the most site requests in progress at once (from the request line being read
            to the last response byte written, or the connection being dropped).
        in_flight: site requests in progress at snapshot time.
        request_times: ``time.time()`` at which each request's head was read, in arrival order.
        request_paths: the path of each of those requests, in the same order.
        outcomes: how many requests met each fault (``"serve"``, ``"503"``, ``"reset"``,
            ``"soft_block_login"``, ...).
        responses: the status of every response written, per path, in order (none for a reset or a hang).
        soft_blocks: the soft blocks served, per path, in order (``"soft_block_challenge"``, ...): each is
            also a 200 in ``responses``, so a test can tell which of a path's 200s were not the page.
        bytes_sent: bytes written for site requests, heads and bodies (a truncated body counts what was sent).
    """

    hits: dict[str, int] = field(default_factory=dict)
    total_requests: int = 0
    max_concurrency: int = 0
    in_flight: int = 0
    request_times: list[float] = field(default_factory=list)
    request_paths: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    responses: dict[str, list[int]] = field(default_factory=dict)
    soft_blocks: dict[str, list[str]] = field(default_factory=dict)
    bytes_sent: int = 0

    def statuses(self, status: int) -> dict[str, int]:
        """How many responses of ``status`` each path got."""
        counts = {path: sum(1 for s in seen if s == status) for path, seen in self.responses.items()}
        return {path: n for path, n in counts.items() if n}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Recorder:
    """Thread-safe counters: updated on the server's loop, read and reset from test threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._hits: Counter[str] = Counter()
            self._outcomes: Counter[str] = Counter()
            self._times: list[float] = []
            self._paths: list[str] = []
            self._in_flight = 0
            self._max = 0
            self._responses: dict[str, list[int]] = {}
            self._soft_blocks: dict[str, list[str]] = {}
            self._bytes = 0

    def begin(self, path: str, started: float) -> int:
        """Count a request; returns how many requests for ``path`` came before it (its fault index)."""
        with self._lock:
            n = self._hits[path]
            self._hits[path] = n + 1
            self._times.append(started)
            self._paths.append(path)
            self._in_flight += 1
            self._max = max(self._max, self._in_flight)
            return n

    def outcome(self, action: Action) -> None:
        with self._lock:
            self._outcomes[action.value] += 1

    def sent(self, path: str, status: int, size: int, soft_block: Action | None = None) -> None:
        with self._lock:
            self._responses.setdefault(path, []).append(status)
            if soft_block is not None:
                self._soft_blocks.setdefault(path, []).append(soft_block.value)
            self._bytes += size

    def end(self) -> None:
        with self._lock:
            # A reset while requests were in flight must not drive the gauge negative.
            self._in_flight = max(0, self._in_flight - 1)

    def snapshot(self) -> SandboxStats:
        with self._lock:
            return SandboxStats(
                hits=dict(self._hits),
                total_requests=sum(self._hits.values()),
                max_concurrency=self._max,
                in_flight=self._in_flight,
                request_times=list(self._times),
                request_paths=list(self._paths),
                outcomes=dict(self._outcomes),
                responses={path: list(seen) for path, seen in self._responses.items()},
                soft_blocks={path: list(seen) for path, seen in self._soft_blocks.items()},
                bytes_sent=self._bytes,
            )


class _HttpDate:
    """The ``Date`` header, formatted at most once per second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def get(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._value = formatdate(now, usegmt=True).encode()
        return self._value


def not_modified(request: dict[str, str], etag: str, last_modified: float) -> bool:
    """Whether a GET with these (lower-cased) request headers gets a 304 for a page with these validators.

    ``If-None-Match`` decides when present (weak comparison, ``*`` matches); only without it is
    ``If-Modified-Since`` read, and a date that does not parse is ignored (RFC 9110 section 13.2.2).
    """
    if_none_match = request.get("if-none-match")
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag.removeprefix("W/") in tags
    if_modified_since = request.get("if-modified-since")
    if if_modified_since is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, IndexError):
        return False
    return since.tzinfo is not None and last_modified <= since.timestamp()


def _abort_with_reset(writer: asyncio.StreamWriter) -> None:
    """Drop the connection so the peer sees ECONNRESET: SO_LINGER 0 turns close() into a TCP RST."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class SandboxApp:
    """The asyncio server for one site; start with ``await app.start()``, stop with ``await app.close()``."""

    def __init__(
        self,
        catalogue: Catalogue,
        *,
        faults: Faults = NO_FAULTS,
        js_mode: bool = False,
        seed: int | None = None,
        keepalive_timeout_s: float = 5.0,
        redesign: Redesign | None = None,
    ) -> None:
        self.catalogue = catalogue
        self.site = Site(catalogue, js_mode=js_mode, redesign=redesign)
        #: The faults the server started with; a burst (``start_burst``) stands in for them for a while.
        self.base_faults = faults
        self._burst: Faults | None = None
        self._burst_until = 0.0
        self.seed = catalogue.seed if seed is None else seed
        self.keepalive_timeout_s = keepalive_timeout_s
        self.recorder = _Recorder()
        self._date = _HttpDate()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        # Built here, not on the loop: assembling a GiB's bomb takes a second or two of CPU.
        self._bomb = gzip_bomb(faults.bomb_bytes) if faults.bombs else b""
        self.host = ""
        self.port = 0

    def set_catalogue(self, catalogue: Catalogue) -> None:
        """Serve another catalogue (another simulated day) from the next request on."""
        # The previous day's site is not kept: the new catalogue carries its own days before, which share
        # its unchanged books, so serving day after day does not pile up sites and their page caches.
        self.site = Site(catalogue, js_mode=self.site.js_mode, redesign=self.site.redesign)
        self.catalogue = catalogue

    @property
    def redesign(self) -> Redesign | None:
        """The redesign in force (it renders from its day on), or None for the live site's markup every day."""
        return self.site.redesign

    def set_redesign(self, redesign: Redesign | None) -> None:
        """Serve ``redesign`` (None: the live site's markup) from the next request on, on the same day."""
        self.site = Site(self.catalogue, js_mode=self.site.js_mode, redesign=redesign)

    def set_day(self, day: int) -> None:
        """Serve simulated day ``day`` of the same catalogue from the next request on."""
        current = self.catalogue
        self.set_catalogue(Catalogue(seed=current.seed, day=day, books=current.size, categories=current.category_count))

    @property
    def faults(self) -> Faults:
        """The faults in force: the burst's until its end, else the base faults."""
        if self._burst is not None and time.time() < self._burst_until:
            return self._burst
        return self.base_faults

    def start_burst(self, overrides: dict[str, float], seconds: float) -> None:
        """Serve with ``overrides`` applied to the base faults for ``seconds``, then with the base faults again.

        A burst replaces the one before it; ``seconds=0`` ends the current one. Raises ``ValueError`` for a
        field outside ``BURST_FIELDS`` or a value ``Faults`` rejects, and then changes nothing.
        """
        unknown = set(overrides) - BURST_FIELDS
        if unknown:
            raise ValueError(f"unknown fault {sorted(unknown)[0]!r}; use one of: {', '.join(sorted(BURST_FIELDS))}")
        if seconds < 0:
            raise ValueError("seconds must not be negative")
        fields: dict[str, Any] = dict(overrides)  # keys checked above: every burst field is a float field
        burst = replace(self.base_faults, **fields) if seconds else None
        self._burst, self._burst_until = burst, time.time() + seconds

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        if self.faults.max_connections is not None:
            self._slots = asyncio.Semaphore(self.faults.max_connections)
        self._server = await asyncio.start_server(
            self._on_connection, host, port, limit=MAX_HEAD_BYTES, backlog=1024, reuse_address=True
        )
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        """Stop listening and drop every open connection, including ones that are hanging on purpose."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- connection handling -------------------------------------------------------------------------------

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        slots = self._slots
        holding = False
        try:
            if slots is not None:
                if self.faults.over_capacity == "refuse" and slots.locked():
                    _abort_with_reset(writer)
                    return
                await slots.acquire()
                holding = True
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            if holding and slots is not None:
                slots.release()
            if not writer.transport.is_closing():
                writer.transport.close()
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one keep-alive connection until the client closes, idles or a fault ends it."""
        while True:
            try:
                async with asyncio.timeout(self.keepalive_timeout_s):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (TimeoutError, asyncio.IncompleteReadError):
                return
            started = time.time()
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                self._respond(writer, 400, error_html(400, "Bad Request"), keep_alive=False)
                return
            method, target, version = parts
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name:
                    headers[name.strip().lower()] = value.strip()
            if length := int(headers.get("content-length", "0") or 0):
                await reader.readexactly(length)
            connection = headers.get("connection", "").lower()
            keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
            if "://" in target:  # absolute-form request target (proxy style)
                target = "/" + target.split("://", 1)[1].partition("/")[2]
            path, _, query = target.split("#", 1)[0].partition("?")
            path = path or "/"

            if path.startswith(CONTROL_PREFIX):
                self._control(writer, method, path, query, keep_alive)
            else:
                keep_alive = await self._site_request(writer, method, path, started, headers) and keep_alive
            if writer.transport.is_closing():
                return
            if writer.transport.get_write_buffer_size() > 256 * 1024:
                await writer.drain()
            if not keep_alive:
                await writer.drain()
                return

    async def _site_request(
        self, writer: asyncio.StreamWriter, method: str, path: str, started: float, request: dict[str, str]
    ) -> bool:
        """Answer one site request, faults included; returns whether the connection may be reused."""
        recorder = self.recorder

        def respond(status: int, body: bytes, soft_block: Action | None = None, **options: Any) -> None:
            # Counted before it is written: a client that has the response may read the stats at once.
            data = self._response(status, body, **options)
            recorder.sent(path, status, len(data), soft_block)
            writer.write(data)

        n = recorder.begin(path, started)
        faults = self.faults  # one burst or none for the whole request
        try:
            decision = faults.decide(self.seed, path, n)
            recorder.outcome(decision.action)
            if decision.delay_s:
                await asyncio.sleep(decision.delay_s)
            action = decision.action
            if action is Action.RESET:
                _abort_with_reset(writer)
                return False
            if action is Action.HANG:
                await asyncio.sleep(faults.hang_s)
                writer.transport.abort()
                return False
            error = self._faulted_error(action, faults)
            if error is not None:
                status, body, extra = error
                respond(status, body, head_only=method == "HEAD", extra=extra)
                return True
            if action.is_soft_block:  # a 200 that is not the page, without the page's validators
                host = request.get("host") or f"{self.host}:{self.port}"
                body = soft_block_body(action, path, host, ray_id(self.seed, path, n))
                respond(200, body, soft_block=action, head_only=method == "HEAD")
                return True
            if action is Action.ERROR_PAGE or action is Action.MAINTENANCE:  # a 200 that is no catalogue page
                render = render_error_page if action is Action.ERROR_PAGE else render_maintenance_page
                respond(200, render(path).encode("utf-8"), head_only=method == "HEAD")
                return True
            if method not in ("GET", "HEAD"):
                respond(405, error_html(405, "Not Allowed"), head_only=False)
                return True
            if action is Action.NOT_MODIFIED:  # a broken cache in front of the site: 304 whatever was asked
                respond(304, b"", not_modified=True)
                return True
            if action is Action.BOMB and method == "GET":
                respond(200, self._bomb, extra=b"Content-Encoding: gzip\r\n")
                return True
            status, body, content_type = self._lookup(path)
            validators = self._validators(path) if status == 200 and content_type == b"text/html" else b""
            if validators and method == "GET" and not_modified(request, *self._validator_values(path)):
                respond(304, b"", extra=validators, not_modified=True)
                return True
            if action is Action.TRUNCATE and method == "GET":
                cut = int(len(body) * faults.truncate_fraction)
                respond(status, body, content_type=content_type, send_bytes=cut, extra=validators)
                await writer.drain()
                writer.transport.close()
                return False
            respond(status, body, content_type=content_type, head_only=method == "HEAD", extra=validators)
            return True
        finally:
            recorder.end()

    def _faulted_error(self, action: Action, faults: Faults) -> tuple[int, bytes, bytes] | None:
        """The error response a fault decided on (status, body, extra header lines), or None."""
        if action is Action.NOT_FOUND:
            return 404, self.site.not_found, b""
        if action is Action.ERROR_500 or action is Action.ERROR_503:
            status = 500 if action is Action.ERROR_500 else 503
            return status, error_html(status, _REASONS[status]), b""
        if action is Action.RATE_LIMIT:
            return 429, error_html(429, _REASONS[429]), f"Retry-After: {faults.retry_after_s}\r\n".encode()
        return None

    def _validator_values(self, path: str) -> tuple[str, float]:
        etag = self.site.etag(path)
        assert etag is not None
        return etag, self.site.last_modified(path).timestamp()

    def _validators(self, path: str) -> bytes:
        """The page's ``ETag`` and ``Last-Modified`` header lines."""
        return f"ETag: {self.site.etag(path)}\r\nLast-Modified: {self.site.last_modified_header(path)}\r\n".encode()

    def _lookup(self, path: str) -> tuple[int, bytes, bytes]:
        if path == "/robots.txt" and self.faults.robots_txt is not None:
            return 200, self.faults.robots_txt.encode("utf-8"), b"text/plain"
        body = self.site.get(path)
        if body is None:
            return 404, self.site.not_found, b"text/html"
        return 200, body, b"text/html"

    def _control(self, writer: asyncio.StreamWriter, method: str, path: str, query: str, keep_alive: bool) -> None:
        """The operator's endpoints: never counted, never faulted.

        ``GET stats``, ``GET|POST reset``; ``GET day``, ``POST day?to=N`` (no ``to``: the next day);
        ``GET faults``, ``POST faults?error_rate=0.3&seconds=60`` (a burst; ``seconds=0`` ends it);
        ``GET redesign``, ``POST redesign?day=N&changes=rating_class,upc_moved&drop_share=0.2`` (no ``day``:
        from today; no ``changes``: all of them; ``changes=none`` serves the live site's markup again).
        """
        params = {name: values[-1] for name, values in parse_qs(query).items()}
        name = path.removeprefix(CONTROL_PREFIX)
        status = 200
        try:
            if name == "stats" and method in ("GET", "HEAD"):
                payload: dict[str, Any] = self.recorder.snapshot().to_json()
            elif name == "reset" and method in ("GET", "POST"):
                self.recorder.reset()
                payload = {"reset": True}
            elif name == "day" and method in ("GET", "HEAD", "POST"):
                if method == "POST":
                    self.set_day(int(params["to"]) if "to" in params else self.catalogue.day + 1)
                payload = {"seed": self.catalogue.seed, "day": self.catalogue.day, "books": len(self.catalogue)}
            elif name == "faults" and method in ("GET", "HEAD", "POST"):
                if method == "POST":
                    seconds = float(params.pop("seconds", "60"))
                    self.start_burst({field: float(value) for field, value in params.items()}, seconds)
                payload = self._faults_json()
            elif name == "redesign" and method in ("GET", "HEAD", "POST"):
                if method == "POST":
                    self.set_redesign(self._redesign_from(params))
                payload = {"redesign": None if self.redesign is None else self.redesign.to_json()}
            else:
                self._respond(writer, 404, error_html(404, "Not Found"), keep_alive=keep_alive)
                return
        except ValueError as exc:  # a bad number, a day below 0, an unknown or invalid fault or change
            status, payload = 400, {"error": str(exc)}
        body = json.dumps(payload).encode()
        head_only = method == "HEAD"
        self._respond(
            writer, status, body, content_type=b"application/json", head_only=head_only, keep_alive=keep_alive
        )

    def _redesign_from(self, params: dict[str, str]) -> Redesign | None:
        """The redesign a ``POST redesign`` asks for; ``ValueError`` for a bad day, share or change."""
        changes = params.get("changes", "all")
        if changes.strip().lower() == "none":
            return None
        day = int(params["day"]) if "day" in params else self.catalogue.day
        share = float(params["drop_share"]) if "drop_share" in params else None
        parsed = parse_changes(changes)
        return Redesign(day, parsed) if share is None else Redesign(day, parsed, share)

    def _faults_json(self) -> dict[str, Any]:
        """The burst in force (the fields it changes and when it ends, in Unix time), or none."""
        faults = self.faults
        if faults is self.base_faults:
            return {"burst": {}, "until": None}
        changed = {
            field: getattr(faults, field)
            for field in sorted(BURST_FIELDS)
            if getattr(faults, field) != getattr(self.base_faults, field)
        }
        return {"burst": changed, "until": self._burst_until}

    def _respond(self, writer: asyncio.StreamWriter, status: int, body: bytes, **options: Any) -> None:
        """Write one response (the options of :meth:`_response`)."""
        writer.write(self._response(status, body, **options))

    def _response(
        self,
        status: int,
        body: bytes,
        *,
        content_type: bytes = b"text/html",
        head_only: bool = False,
        keep_alive: bool = True,
        extra: bytes = b"",
        send_bytes: int | None = None,
        not_modified: bool = False,
    ) -> bytes:
        """The bytes of one response. A 304 has neither body nor entity headers."""
        entity = (
            b""
            if not_modified
            else b"".join((b"\r\nContent-Type: ", content_type, f"\r\nContent-Length: {len(body)}".encode()))
        )
        head = b"".join(
            (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n".encode(),
                _SERVER_LINE,
                self._date.get(),
                entity,
                b"\r\n",
                b"Connection: keep-alive\r\n" if keep_alive else b"Connection: close\r\n",
                extra,
                b"\r\n",
            )
        )
        if head_only or not_modified:
            return head
        if send_bytes is not None:
            return head + body[:send_bytes]
        return head + body


class SandboxServer:
    """The sandbox in a background thread with its own event loop: for tests, benchmarks and the CLI.

    Args:
        catalogue: the site's data; built from ``seed`` and ``day`` when omitted.
        seed: catalogue seed (when no catalogue is given) and fault seed.
        day: simulated day of the catalogue (see ``Catalogue``).
        books: day 0's number of books (when no catalogue is given); the live site's 1,000 by default.
        categories: number of categories (when no catalogue is given); the live site's 50 by default.
        faults: fault injection for this run; none by default.
        js_mode: serve book pages whose product data only a browser running JavaScript sees.
        redesign: markup changes served from a simulated day on (see ``redesign.py``); none by default.
        host: interface to bind; loopback by default so the sandbox is never exposed.
        port: TCP port; 0 picks a free one (read it back from ``.port`` or ``.url``).
        keepalive_timeout_s: idle time after which a keep-alive connection is closed.
    """

    def __init__(
        self,
        catalogue: Catalogue | None = None,
        *,
        seed: int = 0,
        day: int = 0,
        books: int = BOOK_COUNT,
        categories: int = CATEGORY_COUNT,
        faults: Faults | None = None,
        js_mode: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        keepalive_timeout_s: float = 5.0,
        redesign: Redesign | None = None,
    ) -> None:
        self.app = SandboxApp(
            catalogue if catalogue is not None else Catalogue(seed=seed, day=day, books=books, categories=categories),
            faults=faults or NO_FAULTS,
            js_mode=js_mode,
            seed=seed,
            keepalive_timeout_s=keepalive_timeout_s,
            redesign=redesign,
        )
        self._bind = (host, port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def catalogue(self) -> Catalogue:
        """The catalogue served now (its day moves with ``set_day`` and ``POST /__sandbox__/day``)."""
        return self.app.catalogue

    @property
    def faults(self) -> Faults:
        return self.app.faults

    @property
    def redesign(self) -> Redesign | None:
        """The redesign in force (moves with ``set_redesign`` and ``POST /__sandbox__/redesign``)."""
        return self.app.redesign

    @property
    def host(self) -> str:
        return self.app.host

    @property
    def port(self) -> int:
        return self.app.port

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:41234``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def url_for(self, path: str) -> str:
        return self.url + (path if path.startswith("/") else "/" + path)

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._thread = threading.Thread(target=self._run, name="sandbox-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self.app.start(*self._bind))
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.app.close())
            loop.close()

    def stop(self) -> None:
        """Stop serving and join the thread; open and hanging connections are dropped. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    def wait(self) -> None:
        """Block until the server thread ends (the CLI's foreground mode)."""
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(timeout=0.5)

    def stats(self) -> SandboxStats:
        return self.app.recorder.snapshot()

    def set_day(self, day: int) -> None:
        """Serve simulated day ``day`` of the same catalogue from now on, on the same port."""
        self.app.set_day(day)

    def set_redesign(self, redesign: Redesign | None) -> None:
        """Serve ``redesign`` (None: the live site's markup) from now on, on the same port and day."""
        self.app.set_redesign(redesign)

    def reset_stats(self) -> None:
        """Clear hit counts, concurrency peak and times; scripted failures start over."""
        self.app.recorder.reset()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
