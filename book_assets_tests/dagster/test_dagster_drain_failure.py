"""A drain step that fails leaves the asset graph and the checks telling the truth.

The fault is the database's: once 30 books are stored it refuses every further claim (a trigger raises), so
the first drain step stores some books and then raises, and the second raises at its first claim. The run
fails; ``book_details`` is recorded as it is (the books written, marked partial), never as a crawl that
went well, and its blocking completeness check fails, so no publishing builds on it.
"""

from collections.abc import Iterator

import dagster as dg
import pytest

from book_assets.db.connection import Database
from book_assets.defs.crawl.assets import crawl
from book_assets.defs.crawl.checks import BOOK_CHECKS, LISTING_CHECKS
from book_assets.defs.crawl.fan_out import queue_jobs
from book_assets.defs.resources import DatabaseResource, FetcherResource, SchedulingResource, SiteResource
from book_assets.sandbox.server import SandboxServer
from book_assets.store.books import book_counts

#: Books stored before the database starts refusing claims.
STORED_BEFORE_FAULT = 30

REFUSE_CLAIMS = f"""
CREATE FUNCTION test_refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'in_progress' AND OLD.status <> 'in_progress'
       AND (SELECT count(*) FROM books) >= {STORED_BEFORE_FAULT} THEN
        RAISE EXCEPTION 'injected fault: the database refuses claims';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_refuse_claims BEFORE UPDATE OF status ON tasks
    FOR EACH ROW EXECUTE FUNCTION test_refuse_claims();
"""


@pytest.fixture
def claims_refused_after_some_books(db: Database) -> Iterator[None]:
    db.query(REFUSE_CLAIMS)
    try:
        yield
    finally:
        db.query("DROP TRIGGER test_refuse_claims ON tasks; DROP FUNCTION test_refuse_claims()")


def test_a_failed_drain_step_records_what_was_written_as_partial_and_fails_the_completeness_check(
    db: Database, database_url: str, sandbox: SandboxServer, claims_refused_after_some_books: None
) -> None:
    resources = {
        "database": DatabaseResource(url=database_url),
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=["Default"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=2, concurrency=4),
        "scheduling": SchedulingResource(),
    }
    definitions = dg.Definitions(
        assets=[crawl], asset_checks=[*LISTING_CHECKS, *BOOK_CHECKS], jobs=queue_jobs("in_process"), resources=resources
    )
    job = definitions.resolve_job_def("crawl_queue_job")
    result = job.execute_in_process(raise_on_error=False)

    assert not result.success
    stored = book_counts(db)["total"]
    assert stored >= STORED_BEFORE_FAULT  # the first drain step wrote books before the fault
    recorded = [
        e
        for e in result.all_events
        if e.event_type in (dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION)
        and e.asset_key == dg.AssetKey("book_details")
    ]
    # What was written is recorded, and says it is partial: nothing reports book_details as a crawl gone well.
    assert recorded, "the books the failed run wrote are recorded nowhere"
    for event in recorded:
        metadata = event.event_specific_data.materialization.metadata  # type: ignore[union-attr]
        assert metadata["partial"].value is True
        assert metadata["failed_drain_steps"].value == 2
        assert metadata["dagster/row_count"].value == stored
        assert "injected fault" in str(metadata["drain_errors"].value)
    checks = {e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key.path == ["book_details"]}
    assert not checks["crawl_complete"].passed and checks["crawl_complete"].blocking
    assert checks["no_error_pages"].passed  # the books written are sound; only the crawl is incomplete
