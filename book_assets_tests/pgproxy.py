"""A fault-injecting TCP proxy for PostgreSQL: loses the acknowledgement of a chosen commit.

The proxy reads the frontend protocol (simple queries, which is all psycopg2 sends) and, for the first
``drops`` transactions whose statements contain ``pattern``, forwards the committing message (the COMMIT,
or the statement itself outside a transaction), waits until the server has answered it completely (its
ReadyForQuery), then closes the client's connection without passing the answer on. The server has
committed; the client saw a dropped connection: exactly the case in which a retry must not apply the
transaction twice.

With ``hold_reconnect`` new connections wait after a drop until :meth:`PgProxy.release`, so a test can do
something in between (spend a budget, take over a lease) before the client's retry goes through.

With ``refuse`` the first that many connections are closed as soon as they are accepted, as a server that is
restarting closes them: the client's connect fails.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


class PgProxy:
    """``with PgProxy(database_url, pattern="queue_claim") as proxy: Database(proxy.url)``."""

    def __init__(
        self, database_url: str, *, pattern: str, drops: int = 1, hold_reconnect: bool = False, refuse: int = 0
    ) -> None:
        parts = urlsplit(database_url)
        self._database_url = database_url
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.pattern = pattern
        self.drops_left = drops
        self.dropped = 0
        self.hold_reconnect = hold_reconnect
        self.refuse_left = refuse
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        """The database URL, through the proxy (TLS and GSS encryption off, so the protocol is readable)."""
        parts = urlsplit(self._database_url)
        netloc = parts.netloc.rsplit("@", 1)
        userinfo = netloc[0] + "@" if len(netloc) == 2 else ""
        query = dict(parse_qsl(parts.query))
        query.update({"sslmode": "disable", "gssencmode": "disable"})
        port = self._listener.getsockname()[1]
        return urlunsplit(parts._replace(netloc=f"{userinfo}127.0.0.1:{port}", query=urlencode(query)))

    def release(self) -> None:
        """Let held reconnections through."""
        self._open.set()

    def __enter__(self) -> PgProxy:
        thread = threading.Thread(target=self._accept, name="pgproxy", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing = True
        self._open.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            refused, self.refuse_left = self.refuse_left > 0, max(0, self.refuse_left - 1)
        if refused:
            client.close()
            return
        self._sockets.append(client)
        self._open.wait()
        try:
            server = socket.create_connection(self._upstream)
        except OSError:
            client.close()
            return
        self._sockets.append(server)
        drop = threading.Event()
        threading.Thread(target=self._server_to_client, args=(server, client, drop), daemon=True).start()
        with contextlib.suppress(OSError, ConnectionError):
            self._client_to_server(client, server, drop)

    def _client_to_server(self, client: socket.socket, server: socket.socket, drop: threading.Event) -> None:
        while True:  # untyped start-up messages; encryption requests are declined here
            head = _recv_exact(client, 8)
            length, code = struct.unpack("!ii", head)
            rest = _recv_exact(client, length - 8)
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                client.sendall(b"N")
                continue
            server.sendall(head + rest)
            break
        in_transaction = matched = False
        while True:
            kind = _recv_exact(client, 1)
            (length,) = struct.unpack("!i", _recv_exact(client, 4))
            body = _recv_exact(client, length - 4)
            trigger = False
            if kind == b"Q":
                sql = body.rstrip(b"\x00").decode("utf-8", "replace").strip()
                word = sql.split(None, 1)[0].upper() if sql else ""
                if word in ("BEGIN", "START"):
                    in_transaction, matched = True, False
                elif word in ("COMMIT", "END"):
                    trigger, in_transaction = in_transaction and matched, False
                elif word == "ROLLBACK":
                    in_transaction = False
                elif self.pattern in sql:
                    matched = in_transaction
                    trigger = not in_transaction
            if trigger:
                with self._lock:
                    if self.drops_left > 0:
                        self.drops_left -= 1
                        drop.set()
            server.sendall(kind + struct.pack("!i", length) + body)
            if drop.is_set():
                return  # the server answers; the other direction swallows the answer and hangs up

    def _server_to_client(self, server: socket.socket, client: socket.socket, drop: threading.Event) -> None:
        try:
            while True:
                kind = _recv_exact(server, 1)
                (length,) = struct.unpack("!i", _recv_exact(server, 4))
                body = _recv_exact(server, length - 4)
                if drop.is_set():
                    if kind == b"Z":  # the server finished the committing message: lose its answer
                        with self._lock:
                            self.dropped += 1
                            if self.hold_reconnect:
                                self._open.clear()
                        break
                    continue
                client.sendall(kind + struct.pack("!i", length) + body)
        except (OSError, ConnectionError):
            pass
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
