"""The book_changes asset: a day's partition exports that day's feed, with a chart and a table per day."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.defs.changes.assets import book_changes
from book_assets.defs.resources import DatabaseResource, SchedulingResource

pytestmark = pytest.mark.slow


def insert_book(db: Database, url: str, versions: list[tuple[datetime, list[str]]]) -> int:
    book_id = db.query("INSERT INTO books (url, category, title) VALUES (%s, 'Travel', 't') RETURNING id", (url,))[0]
    for n, (at, changed) in enumerate(versions, start=1):
        db.query(
            "INSERT INTO book_versions (book_id, version, url, fields, changed, recorded_at)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (book_id["id"], n, url, json.dumps({"title": f"t{n}", "price_amount": "10.00"}), changed, at),
        )
    return int(book_id["id"])


def test_a_days_partition_exports_that_days_changes_with_a_chart(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    day1, day2 = datetime(2026, 3, 1, 9, tzinfo=UTC), datetime(2026, 3, 2, 9, tzinfo=UTC)
    insert_book(db, "http://x.test/a", [(day1, []), (day2, ["price_amount"])])
    insert_book(db, "http://x.test/b", [(day1, [])])
    gone = insert_book(db, "http://x.test/c", [(day1, [])])
    db.query("INSERT INTO book_presence (book_id, at, event) VALUES (%s, %s, 'removed')", (gone, day2))
    insert_book(db, "http://x.test/d", [(day2, [])])
    resources = {
        "database": DatabaseResource(url=database_url),
        "scheduling": SchedulingResource(data_dir=str(tmp_path)),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([book_changes], partition_key="2026-03-02", instance=instance, resources=resources)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    metadata: dict[str, Any] = {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}
    assert metadata["dagster/row_count"] == 3 and metadata["day"] == "2026-03-02"
    assert (metadata["new"], metadata["changed"], metadata["removed"], metadata["returned"]) == (1, 1, 1, 0)
    assert str(metadata["chart"]).startswith("![book changes per day](data:image/png;base64,")
    per_day = {r.data["day"]: r.data for r in metadata["changes_per_day"].records}
    assert per_day["2026-03-01"]["new"] == 3 and per_day["2026-03-02"] == {
        "day": "2026-03-02",
        "new": 1,
        "changed": 1,
        "returned": 0,
        "removed": 1,
    }
    lines = [json.loads(line) for line in Path(metadata["jsonl_path"]).read_text().splitlines()]
    assert [(r["change"], r["url"], r["fields"]) for r in lines] == [
        ("new", "http://x.test/d", []),
        ("changed", "http://x.test/a", ["price_amount"]),
        ("removed", "http://x.test/c", []),
    ]
    assert Path(metadata["csv_path"]).read_text().startswith("day,change,book_id,url,")
    assert Path(metadata["chart_path"]).read_bytes().startswith(b"\x89PNG")
