"""``raw_archive`` materialized for a day: it indexes the day's WARC files and records their counts."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg

from book_assets.archive import ArchiveWriter, archive_files
from book_assets.defs.archive.assets import raw_archive
from book_assets.defs.resources import ArchiveResource
from book_assets.scraper.fetching import build_result

DAY = date(2026, 3, 1)


def _write(folder: Path, urls: list[str]) -> None:
    with ArchiveWriter(folder) as archive:
        for url in urls:
            fetched_at = datetime(DAY.year, DAY.month, DAY.day, 12, tzinfo=UTC)
            archive.write_now(
                build_result(
                    url=url,
                    final_url=url,
                    status=200,
                    headers={"content-type": "text/html"},
                    body=b"<html>a page</html>",
                    fetched_at=fetched_at,
                    elapsed_s=0.01,
                )
            )


def test_raw_archive_indexes_the_day_and_records_files_records_and_bytes(tmp_path: Path) -> None:
    _write(tmp_path, [f"http://example.test/{n}" for n in range(5)])
    _write(tmp_path, [f"http://example.test/other/{n}" for n in range(3)])
    result = dg.materialize(
        [raw_archive],
        resources={"archive": ArchiveResource(warc_dir=str(tmp_path))},
        partition_key=DAY.isoformat(),
    )
    assert result.success
    [event] = result.get_asset_materialization_events()
    metadata = {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}
    files = archive_files(tmp_path / DAY.isoformat())
    assert (metadata["files"], metadata["responses"], metadata["requests"]) == (2, 8, 8)
    assert metadata["records"] == 8 + 8 + 2  # and a warcinfo record per file
    assert metadata["bytes"] == sum(f.stat().st_size for f in files)
    assert metadata["index_lines"] == 8 == len((tmp_path / DAY.isoformat() / "index.cdxj").read_text().splitlines())
    assert metadata["files_cut_short"] == 0
