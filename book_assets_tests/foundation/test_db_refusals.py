"""What PostgreSQL refuses to store is raised at once as a typed refusal; only a lost connection is retried."""

from __future__ import annotations

import random
import string
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from book_assets.db.connection import Cursor, Database, Refused, connection_lost, refusal
from book_assets.scraper.errors import ErrorKind, refusal_kind


def _attempts(db: Database, sql: str, params: Any) -> tuple[list[int], BaseException]:
    calls: list[int] = []

    def txn(cur: Cursor) -> None:
        calls.append(1)
        cur.execute(sql, params)

    with pytest.raises(Exception) as raised:
        db.run(txn)
    return calls, raised.value


@pytest.fixture
def scratch(db: Database) -> Database:
    db.query("CREATE TEMP TABLE IF NOT EXISTS scratch (k text, n integer, m numeric(10, 2), j jsonb)")
    db.query("CREATE INDEX IF NOT EXISTS scratch_k ON scratch (k)")
    return db


@pytest.mark.parametrize(
    ("column", "value", "kind"),
    [
        ("n", 2**31, ErrorKind.VALUE_OUT_OF_RANGE),
        ("m", 10**9, ErrorKind.VALUE_OUT_OF_RANGE),
        ("j", psycopg2.extras.Json({"x": "caf\udce9"}), ErrorKind.UNSTORABLE),
        ("k", "nul\x00byte", ErrorKind.UNSTORABLE),
        ("k", "caf\udce9", ErrorKind.UNSTORABLE),
        # Random letters do not compress: the index row is past btree's 2,704-byte limit.
        ("k", "".join(random.Random(45).choices(string.ascii_letters, k=3000)), ErrorKind.ROW_TOO_LARGE),
    ],
    ids=["integer_2_31", "numeric_1e9", "jsonb_surrogate", "text_nul", "text_surrogate", "index_row"],
)
def test_a_refused_value_is_raised_once_as_refused_with_its_kind(
    scratch: Database, column: str, value: Any, kind: ErrorKind
) -> None:
    calls, raised = _attempts(scratch, f"INSERT INTO scratch ({column}) VALUES (%s)", (value,))
    assert calls == [1]  # never retried
    assert isinstance(raised, Refused) and refusal_kind(raised.sqlstate) is kind, raised
    assert not kind.retryable
    assert scratch.query("SELECT 1 AS ok") == [{"ok": 1}]  # the connection is still good


def test_a_lost_connection_is_retried_and_a_refusal_is_not() -> None:
    assert connection_lost(psycopg2.OperationalError("server closed the connection unexpectedly"))
    assert connection_lost(psycopg2.InterfaceError("connection already closed"))
    assert not connection_lost(psycopg2.DataError("integer out of range"))
    assert refusal(ValueError("some other value error")) is None
    assert refusal(RuntimeError("a bug")) is None


def test_refusal_kinds_by_sqlstate() -> None:
    assert refusal_kind("22003") is ErrorKind.VALUE_OUT_OF_RANGE
    assert refusal_kind("22008") is ErrorKind.VALUE_OUT_OF_RANGE
    assert refusal_kind("22P05") is ErrorKind.UNSTORABLE
    assert refusal_kind(None) is ErrorKind.UNSTORABLE
    assert refusal_kind("54000") is ErrorKind.ROW_TOO_LARGE
