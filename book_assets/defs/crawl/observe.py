"""``book_details_observer``: books written outside a Dagster materialization, recorded as observations; every
other catalogue's observer likewise.

The CLI (``book-pipeline crawl``), workers on other hosts (``book-pipeline work``, a Kubernetes worker
Deployment) and a Dagster run killed before its report all write books that no materialization of
``book_details`` accounts for. This sensor reads the database they share and records what they wrote as an
``AssetObservation`` of ``book_details``: the pages, the books new and changed (``books_new``, ...; another
catalogue's in its record word: ``authors_new``), the table's row count and the crawls of the ledger (the
``crawls`` table) that finished, from its cursor (a time on the database's clock) to now.

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
Every catalogue has its own observer (:func:`details_observer`: ``book_details_observer``,
``quotes_details_observer``), which reads its site's task types, records and crawls, waits only for a crawl
run of its own catalogue and observes its own details asset.
"""

from datetime import UTC, datetime

import dagster as dg

from book_assets.crawl.config import make_queue
from book_assets.crawl.pipeline import RunFigures
from book_assets.defs.catalog import crawl_keys, once_per_site
from book_assets.defs.crawl.assets import CRAWL_TAG, SITE_TAG
from book_assets.defs.crawl.metadata import record_key
from book_assets.defs.resources import DatabaseResource
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site
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


def last_reported(instance: dg.DagsterInstance, details: dg.AssetKey) -> datetime | None:
    """When the details asset ``details`` was last materialized (its run's report recorded the writes before it)."""
    event = instance.get_latest_materialization_event(details)
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


def observer_name(site: str) -> str:
    """The name of catalogue ``site``'s observer: its details asset's key, joined, and ``_observer``
    (``book_details_observer``, ``quotes_details_observer``)."""
    return "_".join(crawl_keys(site).details.path) + "_observer"


@once_per_site
def details_observer(site: Site) -> dg.SensorDefinition:
    """``site``'s observer of the records written outside a Dagster materialization of its details asset."""
    details = crawl_keys(site.name).details
    shown = details.to_user_string()

    @dg.sensor(
        name=observer_name(site.name),
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Record {site.record}s written outside a Dagster materialization (the CLI, workers on other "
        f"hosts, a run killed before its report) as observations of {shown}, read from the database.",
    )
    def observer(context: dg.SensorEvaluationContext, database: DatabaseResource) -> dg.SensorResult:
        with database.open(application_name="book-pipeline sensor") as db:
            queue = make_queue(db, site=site)
            now = queue.now()
            if context.cursor is None:
                return dg.SensorResult(
                    skip_reason=f"watching the {site.record}s written from now on", cursor=now.isoformat()
                )
            if crawl_run_in_progress(context.instance, site.name) is not None:
                return dg.SensorResult(
                    skip_reason="a Dagster crawl run is in progress: its report records what it writes",
                    cursor=context.cursor,
                )
            since = datetime.fromisoformat(context.cursor)
            reported = last_reported(context.instance, details)
            if reported is not None and reported > since:
                since = reported
            figures = RunFigures.read(db, queue, since, site)
            crawls = finished_since(db, since, site.name)
            rows = site.record_counts(db)["total"]
        if not figures.pages and not figures.failed and not crawls:
            return dg.SensorResult(skip_reason=f"nothing written since {since.isoformat()}", cursor=now.isoformat())
        observation = dg.AssetObservation(
            asset_key=details,
            description=f"{site.record.capitalize()}s written outside a Dagster materialization",
            metadata={
                "since": since.isoformat(),
                "until": now.isoformat(),
                "pages": figures.pages,
                "listing_pages": figures.listing_pages,
                record_key(site, "new"): figures.books_new,
                record_key(site, "changed"): figures.books_changed,
                record_key(site, "unchanged"): figures.books_unchanged,
                "failed": figures.failed,
                "dagster/row_count": rows,
                "crawls_finished": ledger_table(crawls),
            },
        )
        context.log.info(f"observed {figures.pages} page(s) written outside Dagster since {since.isoformat()}")
        return dg.SensorResult(asset_events=[observation], cursor=now.isoformat())

    return observer


#: The default site's (books') observer, of ``book_details``.
book_details_observer = details_observer(site_named(default("site")))
