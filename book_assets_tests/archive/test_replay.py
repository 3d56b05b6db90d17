"""Parser changes replayed against the archive: the current parsers over a recorded day, every field diffed
against what was stored, so a parser change shows its effect before it ships."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from selectolax.lexbor import LexborHTMLParser

from book_assets.archive import archive_files, day_folder
from book_assets.archive.rebuild import replay
from book_assets.cli import main
from book_assets.crawl.pipeline import crawl
from book_assets.db.connection import Database
from book_assets.sandbox.redesign import Change, Redesign
from book_assets.scraper.models import BookDetail
from book_assets.store.books import parse_served_or_rendered
from book_assets_tests.crawl.conftest import sandbox_config

pytestmark = pytest.mark.slow


def _today() -> Any:
    return datetime.now(UTC).date()


def _day_files(archive: Path) -> list[Path]:
    files = archive_files(day_folder(archive, _today()))
    assert files
    return files


def _fixed_parser(served: str, rendered: str | None, url: str) -> BookDetail:
    """The parser as a fix of the redesign would make it: the description read under its new id too."""
    detail = parse_served_or_rendered(served, rendered, url)
    paragraph = LexborHTMLParser(served).css_first("div#product-description + p")
    if detail.description is None and paragraph is not None:
        return replace(detail, description=paragraph.text(strip=True))
    return detail


def test_a_replay_of_the_day_shows_no_diff_then_the_redesign_as_lost_fields_and_the_fix_as_none(
    db: Database, database_url: str, sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = sandbox_factory(books=60, categories=3)
    config = sandbox_config(site.url, warc_dir=str(tmp_path))
    crawl(database_url, config)
    same = replay(db, _day_files(tmp_path), _today())
    assert (same.pages, same.compared, same.refused) == (60, 60, 0)
    assert all(diff.total == 0 for diff in same.fields.values()), same.lines()
    assert same.lines()[-1] == "no field differs from what was stored"

    described = int(db.query("SELECT count(description) AS n FROM books")[0]["n"])
    site.set_redesign(Redesign(day=0, changes=frozenset({Change.DESCRIPTION_ID})))
    assert crawl(database_url, config).drift == ("description",)  # held: the books keep their descriptions
    redesigned = replay(db, _day_files(tmp_path), _today())
    lost = {name: (d.new, d.lost, d.changed) for name, d in redesigned.fields.items() if d.total}
    assert lost == {"description": (0, described, 0)}
    assert re.match(r"http\S+: '.+ -> None$", redesigned.fields["description"].samples[0])

    # The parser fixed for the new markup, replayed before it ships: nothing lost any more.
    fixed = replay(db, _day_files(tmp_path), _today(), parse=_fixed_parser)
    assert all(diff.total == 0 for diff in fixed.fields.values()), fixed.lines()

    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("BOOK_PIPELINE_WARC_DIR", str(tmp_path))
    out = CliRunner().invoke(main, ["replay", "--day", _today().isoformat(), "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    printed = json.loads(out.output)
    assert printed["fields"]["description"]["lost"] == described and printed["compared"] == 60
    text = CliRunner().invoke(main, ["replay"], catch_exceptions=False)
    assert text.exit_code == 0 and f"  description: 0 new, {described} lost, 0 changed" in text.output
