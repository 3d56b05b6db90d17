"""``book_details_observer``: books written outside a Dagster materialization, recorded as observations.

The CLI (``book-pipeline crawl``), workers on other hosts (``book-pipeline work``, a Kubernetes worker
Deployment) and a Dagster run killed before its report all write books that no materialization of
``book_details`` accounts for. This sensor reads the database they share and records what they wrote as an
``AssetObservation`` of ``book_details``: the pages, the books new and changed, the table's row count and the
crawls of the ledger (the ``crawls`` table) that finished, from its cursor (a time on the database's clock)
to now.

Why a sensor that reads the database, rather than the alternatives Dagster 1.13 offers:

- an ``@observable_source_asset`` observes an asset of its own (an external one), not ``book_details``,
  which a crawl run materializes: the catalog would show two nodes for one table;
- ``report_runless_asset_event`` from the CLI and the workers would need every writer to reach the Dagster
  instance's storage (its ``dagster.yaml`` and credentials on every worker host), and the crawl library to
  import Dagster; a writer without them would record nothing, and a run killed before its report writes no
  event at all;
- the sensor needs neither: every writer already records its work in the database (tasks, book versions, the
  crawl ledger), and the daemon reads it in one place.

An observation is a record, not a trigger: Dagster's automation follows materializations of a materializable
asset, so the publishing assets do not build on writes no check has judged (the next full refresh or
``publish_job`` run publishes them). A crawl outside Dagster that lasts several ticks is recorded as one
observation per tick, each of what was written in its interval. While a Dagster crawl run is queued or
running the sensor waits (its report will record its writes); a materialization of ``book_details`` newer than
the cursor moves the cursor on to it, since that run's report recorded the writes before it. The
materialization's time is the Dagster host's clock, the figures' the database's: the two are assumed to agree
(NTP); writes outside Dagster made while a Dagster crawl run was in progress are that run's in the record.
It observes the default site's (books') details asset only: another catalogue's records written outside a
Dagster run are not observed.
"""

from datetime import UTC, datetime

import dagster as dg

from book_assets.crawl.config import make_queue
from book_assets.crawl.pipeline import RunFigures
from book_assets.defs.crawl.assets import BOOK_DETAILS, CRAWL_TAG, SITE_TAG
from book_assets.defs.resources import DatabaseResource
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.store.lifecycle import FinishedCrawl, finished_since

#: Run statuses of a run that may still write books.
ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def crawl_run_in_progress(instance: dg.DagsterInstance, site: str | None = None) -> dg.DagsterRun | None:
    """A run that drains the crawl queue (its ``book-pipeline/crawl`` tag), of catalogue ``site`` (its
    ``book-pipeline/site`` tag) or of any when None, queued or running, if any."""
    tags = {CRAWL_TAG: "true"} if site is None else {CRAWL_TAG: "true", SITE_TAG: site}
    runs = instance.get_run_records(dg.RunsFilter(statuses=ACTIVE, tags=tags), limit=1)
    return runs[0].dagster_run if runs else None


def last_reported(instance: dg.DagsterInstance) -> datetime | None:
    """When ``book_details`` was last materialized (its run's report recorded the writes before it)."""
    event = instance.get_latest_materialization_event(BOOK_DETAILS)
    return datetime.fromtimestamp(event.timestamp, UTC) if event is not None else None


def ledger_table(crawls: list[FinishedCrawl]) -> dg.MetadataValue:
    """The crawls that finished, as a table."""
    columns = ["crawl", "started_at", "finished_at", "outcome", "removed", "returned"]
    types = ["int", "string", "string", "string", "int", "int"]
    return dg.MetadataValue.table(
        records=[
            dg.TableRecord(
                {
                    "crawl": c.id,
                    "started_at": c.started_at.isoformat(),
                    "finished_at": c.finished_at.isoformat(),
                    "outcome": c.outcome,
                    "removed": c.removed,
                    "returned": c.returned,
                }
            )
            for c in crawls
        ],
        schema=dg.TableSchema(columns=[dg.TableColumn(n, t) for n, t in zip(columns, types, strict=True)]),
    )


@dg.sensor(
    name="book_details_observer",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Record books written outside a Dagster materialization (the CLI, workers on other hosts, a "
    "run killed before its report) as observations of book_details, read from the database.",
)
def book_details_observer(context: dg.SensorEvaluationContext, database: DatabaseResource) -> dg.SensorResult:
    crawled = site_named(default("site"))  # book_details is the default site's details asset
    with database.open(application_name="book-pipeline sensor") as db:
        queue = make_queue(db)
        now = queue.now()
        if context.cursor is None:
            return dg.SensorResult(skip_reason="watching the books written from now on", cursor=now.isoformat())
        if crawl_run_in_progress(context.instance) is not None:
            return dg.SensorResult(
                skip_reason="a Dagster crawl run is in progress: its report records what it writes",
                cursor=context.cursor,
            )
        since = datetime.fromisoformat(context.cursor)
        reported = last_reported(context.instance)
        if reported is not None and reported > since:
            since = reported
        figures = RunFigures.read(db, queue, since, crawled)
        crawls = finished_since(db, since)
        rows = crawled.record_counts(db)["total"]
    if not figures.pages and not figures.failed and not crawls:
        return dg.SensorResult(skip_reason=f"nothing written since {since.isoformat()}", cursor=now.isoformat())
    observation = dg.AssetObservation(
        asset_key=BOOK_DETAILS,
        description="Books written outside a Dagster materialization",
        metadata={
            "since": since.isoformat(),
            "until": now.isoformat(),
            "pages": figures.pages,
            "listing_pages": figures.listing_pages,
            "books_new": figures.books_new,
            "books_changed": figures.books_changed,
            "books_unchanged": figures.books_unchanged,
            "failed": figures.failed,
            "dagster/row_count": rows,
            "crawls_finished": ledger_table(crawls),
        },
    )
    context.log.info(f"observed {figures.pages} page(s) written outside Dagster since {since.isoformat()}")
    return dg.SensorResult(asset_events=[observation], cursor=now.isoformat())
