"""One reused PostgreSQL connection per process, with reconnect and backoff.

Every component (queue, storage, Dagster resources) talks to PostgreSQL through :class:`Database`: one
connection per process, opened lazily, reopened after a fork or a lost server, and a ``run`` helper that
retries a whole transaction with exponential backoff when the connection drops (a database restart in the
middle of a crawl costs a pause, not a crash). The seed opened a new connection for every call.

Only a lost connection or a transient state of the server is retried (:func:`connection_lost`). What the
database refuses to store (a value out of its column's range, a string it cannot hold, an index row past its
size limit: SQLSTATE classes 22 and 54) is raised at once as :class:`Refused`: the same statement is refused
on every connection, and its caller records it as a permanent failure of the one task that wrote it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import psycopg2.extensions
import psycopg2.extras
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

from book_assets.settings import Settings, load_settings

log = logging.getLogger(__name__)
T = TypeVar("T")
Cursor = psycopg2.extras.RealDictCursor

#: Errors that may mean "the connection is gone" (:func:`connection_lost` tells): the connection is discarded.
CONNECTION_ERRORS = (psycopg2.OperationalError, psycopg2.InterfaceError)
#: SQLSTATE classes of an OperationalError that another try can get past: connection exception (08),
#: transaction rollback (40: deadlock, serialization), insufficient resources (53: too many connections),
#: operator intervention (57: admin or crash shutdown, a cancelled statement), system error (58).
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57", "58"})
#: Transient SQLSTATEs of other classes: lock_not_available (a lock_timeout).
TRANSIENT_STATES = frozenset({"55P03"})
#: SQLSTATE classes of a refusal: data exception (22: a value out of range, a string the database cannot
#: hold), program limit exceeded (54: an index row too large). The same statement is refused every time.
REFUSED_CLASSES = frozenset({"22", "54"})


class DatabaseUnavailable(RuntimeError):
    """The database cannot be reached; the message says where (password masked) and why."""


class Refused(Exception):
    """The database (or the driver, before sending) refused what a transaction stores: never retried.

    ``sqlstate`` is PostgreSQL's code (``22003`` numeric_value_out_of_range, ``54000`` an index row too large,
    ...), None when the driver refused the value itself: a string with a NUL or a lone surrogate, which no
    ``text`` column holds. The message is the database's first line.
    """

    def __init__(self, sqlstate: str | None, message: str) -> None:
        super().__init__(f"{sqlstate or 'driver'}: {message}")
        self.sqlstate = sqlstate


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection or the server went away (or a transient state of the server), so
    the transaction can succeed on another try.

    psycopg2 raises OperationalError for a lost connection (no SQLSTATE: the socket closed) and for many
    server errors that are not about the connection at all, among them an index row over its size limit
    (``54000``): retrying those for ``reconnect_for_s`` would only repeat the refusal and stall the caller.
    """
    if isinstance(exc, DatabaseUnavailable | psycopg2.InterfaceError):
        return True
    if not isinstance(exc, psycopg2.OperationalError):
        return False
    code = exc.pgcode
    return code is None or code[:2] in TRANSIENT_CLASSES or code in TRANSIENT_STATES


def refusal(exc: BaseException) -> Refused | None:
    """``exc`` as a :class:`Refused` when it is the database's (or the driver's) refusal of a value or a row."""
    if isinstance(exc, psycopg2.Error) and exc.pgcode is not None and exc.pgcode[:2] in REFUSED_CLASSES:
        return Refused(exc.pgcode, _first_line(exc))
    if isinstance(exc, UnicodeEncodeError):  # a lone surrogate: UTF-8 cannot encode it
        return Refused(None, f"a string the database cannot hold ({exc.reason} at {exc.start})")
    if isinstance(exc, ValueError) and "NUL (0x00)" in str(exc):  # psycopg2's refusal of a NUL in a string
        return Refused(None, str(exc))
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***`` — the only form that may be printed or logged."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def resolve_database_url(settings: Settings, *, start: bool = True) -> str:
    """``DATABASE_URL`` when set; otherwise the embedded cluster's URL (started and created on demand)."""
    if settings.database_url:
        return settings.database_url
    from book_assets.db import embedded

    state = embedded.up(settings.pg_dir) if start else embedded.status(settings.pg_dir)
    if not state.running or state.port is None:
        raise DatabaseUnavailable("embedded PostgreSQL is not running (start it with: book-pipeline db up)")
    ensure_database(embedded.admin_url(state.port), settings.database_name)
    return embedded.admin_url(state.port, settings.database_name)


def ensure_database(admin_url: str, name: str) -> bool:
    """Create database ``name`` through ``admin_url`` unless it exists; returns whether it was created."""
    conn = psycopg2.connect(admin_url, connect_timeout=5)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone():
                return False
            cur.execute(f"CREATE DATABASE {psycopg2.extensions.quote_ident(name, cur)}")
            return True
    finally:
        conn.close()


def _timeouts(settings: Settings) -> dict[str, int]:
    return {
        "lock_timeout": round(settings.db_lock_timeout_s * 1000),
        "statement_timeout": round(settings.db_statement_timeout_s * 1000),
        "idle_in_transaction_session_timeout": round(settings.db_idle_in_transaction_timeout_s * 1000),
    }


def session_options(settings: Settings) -> str:
    """Server settings of every session: no statement waits for ever on a lock, no frozen client holds one.

    Without them a client stopped inside a transaction (SIGSTOP, a long GC pause, a half-open TCP
    connection) keeps its row locks until TCP keepalive gives up, about two hours by default.
    """
    return " ".join(f"-c {name}={ms}" for name, ms in _timeouts(settings).items())


def transaction_settings(settings: Settings) -> str:
    """The same settings as :func:`session_options`, for one transaction: what a pooled connection gets.

    A pooler in transaction mode (PgBouncer) hands every transaction whichever server connection is free and
    refuses startup options, so nothing may live in the session: the statement sets them for its own
    transaction (``set_config(..., true)``, the function form of ``SET LOCAL``).
    """
    calls = ", ".join(f"set_config('{name}', '{ms}', true)" for name, ms in _timeouts(settings).items())
    return f"SELECT {calls};"


class Database:
    """A lazily opened, reused connection to one PostgreSQL database.

    Args:
        url: a ``postgresql://`` URL.
        application_name: shown in ``pg_stat_activity``.
        reconnect_for_s: how long :meth:`run` keeps retrying a transaction while the server is away (0: one
            attempt, for a caller that must answer within a bound, as the queue exporter's scrape).
        connect_timeout_s: how long opening a connection may take (libpq's ``connect_timeout``, whole seconds,
            at least 2).
        options: server settings for the session (default: :func:`session_options` of the settings).
        direct_url: PostgreSQL itself, when ``url`` is a pooler in transaction mode (default: the
            ``database_direct_url`` setting). A database whose ``url`` is not its direct URL is *pooled*: it
            sends no startup options, sets the session timeouts in every transaction instead, and the queue
            polls rather than LISTEN. :meth:`direct` opens the direct URL (migrations' advisory lock).
    """

    def __init__(
        self,
        url: str,
        *,
        application_name: str = "book-pipeline",
        reconnect_for_s: float = 60.0,
        connect_timeout_s: int = 5,
        options: str | None = None,
        direct_url: str | None = None,
    ):
        self.url = url
        self.application_name = application_name
        self.reconnect_for_s = reconnect_for_s
        self.connect_timeout_s = connect_timeout_s
        self.options = options
        self._direct_url = direct_url
        self._settings: Settings | None = None
        self._conn: psycopg2.extensions.connection | None = None
        self._pid = os.getpid()
        self._ever_connected = False

    def __repr__(self) -> str:
        return f"Database({mask_url(self.url)!r})"

    def _loaded_settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    @property
    def direct_url(self) -> str:
        """The URL of PostgreSQL itself: ``direct_url``, else the ``database_direct_url`` setting, else ``url``."""
        return self._direct_url or self._loaded_settings().database_direct_url or self.url

    @property
    def pooled(self) -> bool:
        """Whether ``url`` goes through a pooler in transaction mode (it is not the direct URL)."""
        return self.direct_url != self.url

    def direct(self) -> Database:
        """A database on :attr:`direct_url` for what needs a session of its own; this one when not pooled."""
        if not self.pooled:
            return self
        return Database(
            self.direct_url,
            application_name=self.application_name,
            reconnect_for_s=self.reconnect_for_s,
            connect_timeout_s=self.connect_timeout_s,
        )

    def connection(self) -> psycopg2.extensions.connection:
        """The process's connection, (re)opened when missing, closed, or inherited through a fork."""
        if self._pid != os.getpid():
            self._conn = None  # the parent's socket: never use or close it from the child
            self._pid = os.getpid()
        if self._conn is None or self._conn.closed:
            if self.options is None:
                self.options = "" if self.pooled else session_options(self._loaded_settings())
            try:
                self._conn = psycopg2.connect(
                    self.url,
                    connect_timeout=self.connect_timeout_s,
                    application_name=self.application_name,
                    cursor_factory=Cursor,
                    options=self.options or None,
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                )
            except psycopg2.OperationalError as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise DatabaseUnavailable(f"cannot connect to {mask_url(self.url)}: {reason}") from None
            self._ever_connected = True
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """A cursor inside one transaction: committed on success, rolled back on error."""
        conn = self.connection()
        try:
            with conn, conn.cursor(cursor_factory=Cursor) as cur:
                if self.pooled:
                    cur.execute(transaction_settings(self._loaded_settings()))
                yield cur
        except CONNECTION_ERRORS:
            self._discard()
            raise

    @contextmanager
    def autocommit(self) -> Iterator[Cursor]:
        """A cursor whose every statement commits on its own (locks last one statement, not a round trip)."""
        conn = self.connection()
        try:
            conn.autocommit = True
            with conn.cursor(cursor_factory=Cursor) as cur:
                yield cur
        except CONNECTION_ERRORS:
            self._discard()
            raise
        finally:
            if not conn.closed:
                conn.autocommit = False

    def run(self, fn: Callable[[Cursor], T]) -> T:
        """Run ``fn(cursor)`` in a transaction, retrying it on a fresh connection while the server is away.

        A retry can follow a COMMIT whose acknowledgement was lost, so ``fn`` must be idempotent: running it
        again after it committed must leave the same state and report the same outcome. The queue's and
        storage's functions are written that way (a claim carries a request id and a replay returns its
        leases; completions, failures and budget grants recognise their own earlier effect).
        A database that was never reached fails at once: that is a configuration error, not an outage.
        """
        return self._retrying(fn, self.transaction)

    def statement(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        """Rows of one statement run in autocommit mode, retried like :meth:`run` (so it must be idempotent).

        Pooled, the statement is sent with :func:`transaction_settings` in front, in one query: PostgreSQL
        runs the two as one implicit transaction, so the timeouts hold for it and no round trip is added.
        """
        if self.pooled:
            sql = transaction_settings(self._loaded_settings()) + "\n" + sql
        return self._retrying(lambda cur: _rows(cur, sql, params), self.autocommit)

    def _retrying(self, fn: Callable[[Cursor], T], cursor: Callable[[], Any]) -> T:
        retrying = Retrying(
            retry=retry_if_exception(connection_lost) & retry_if_exception(lambda _: self._ever_connected),
            wait=wait_exponential_jitter(initial=0.1, max=5.0),
            stop=stop_after_delay(self.reconnect_for_s),
            reraise=True,
            before_sleep=lambda rs: log.warning(
                "database unavailable (%s); retrying", rs.outcome.exception() if rs.outcome else "?"
            ),
        )
        for attempt in retrying:
            with attempt, cursor() as cur:
                try:
                    return fn(cur)
                except Exception as exc:
                    refused = refusal(exc)
                    if refused is None:
                        raise
                    raise refused from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        """Rows of one statement, as dicts, run through :meth:`run`."""
        return self.run(lambda cur: _rows(cur, sql, params))

    def _discard(self) -> None:
        if self._conn is not None:
            with suppress(Exception):
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        if self._pid == os.getpid():
            self._discard()
        self._conn = None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rows(cur: Cursor, sql: str, params: Any) -> list[dict[str, Any]]:
    cur.execute(sql, params)
    return [dict(r) for r in cur.fetchall()] if cur.description else []
