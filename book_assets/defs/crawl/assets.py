"""The crawl: one graph-backed multi-asset that materializes ``listing_discovery`` and ``book_details``.

Its graph is the crawl's composition in steps (:mod:`book_assets.defs.crawl.steps`): ``seed_queue`` →
``share_work`` → ``drain_queue`` × N → ``report_crawl``, the same calls of :mod:`book_assets.crawl.pipeline`
the CLI makes, handing on one :class:`~book_assets.crawl.pipeline.CrawlRun`. Every job that drains the queue
materializes this one asset definition, so the catalog holds one graph whichever job ran: the full refresh and
the retry of the failures (one drain step that runs the W workers as processes of its own, in process), and
the queue jobs (one drain step per worker, placed by the executor: :mod:`book_assets.defs.crawl.fan_out`).
The asset checks of both assets (:mod:`book_assets.defs.crawl.checks`) are steps of every such job, after
the report.

The run's config is the graph's (:class:`book_assets.defs.crawl.steps.CrawlStepsConfig`: ``ops: crawl:
config:``) and a config mapping hands it to the steps that read it; only ``seed_queue`` resolves the crawl's
configuration from it, and the run value carries that configuration to the steps after. The queue holds the
work; single pages are retried by the queue, and the steps' retry policy only re-runs a step that failed as
a whole for a transient reason (a re-run resumes the same queue instead of starting over).
"""

from typing import Any

import dagster as dg

from book_assets.defs.catalog import BOOKS_SCHEMA, BOOKS_TABLE, OWNERS, crawl_keys, tags_for
from book_assets.defs.crawl.steps import CrawlStepsConfig, drain_queue, report_crawl, seed_queue, share_work
from book_assets.settings import default

GROUP = "crawl"
#: Run tag of every run that drains the crawl queue.
CRAWL_TAG = "book-pipeline/crawl"
#: A crawl run that outlives most of a day is stuck (a daily job's next run is due): run monitoring cancels it.
CRAWL_MAX_RUNTIME_S = 20 * 3600
CRAWL_RUN_TAGS = {CRAWL_TAG: "true", "dagster/max_runtime": str(CRAWL_MAX_RUNTIME_S)}
BOOKS_KEYS = crawl_keys(default("site"))
LISTING_DISCOVERY = BOOKS_KEYS.listing_discovery
BOOK_DETAILS = BOOKS_KEYS.details
#: The steps of the crawl's graph, in order.
STEPS = (seed_queue, share_work, drain_queue, report_crawl)
#: The steps that read the run's config: the first resolves the crawl's configuration from it, the others
#: read the run's shape (task types, drain steps, a crawl to settle); the drain steps take only their share.
CONFIGURED_STEPS = (seed_queue, share_work, report_crawl)

#: ``kinds`` as Dagster stores them (a graph-backed asset takes them as tags).
_KIND_TAGS = {"dagster/kind/python": "", "dagster/kind/postgres": ""}


@dg.config_mapping
def _every_step(config: CrawlStepsConfig) -> dict[str, Any]:
    """The graph's config, handed to each step that reads it as its own."""
    values = config.model_dump()
    return {step.name: {"config": values} for step in CONFIGURED_STEPS}


@dg.graph(
    name="crawl",
    config=_every_step,
    out={"listing_discovery": dg.GraphOut(), "book_details": dg.GraphOut()},
    description="One crawl: seed, drain the queue in N steps (listing and detail pages interleaved), report.",
)
def crawl_graph() -> dict[str, Any]:
    shared, steps = share_work(seed_queue())
    listing, details = report_crawl(shared=shared, drained=steps.map(drain_queue).collect())
    return {"listing_discovery": listing, "book_details": details}


crawl = dg.AssetsDefinition.from_graph(
    crawl_graph,
    keys_by_output_name={"listing_discovery": LISTING_DISCOVERY, "book_details": BOOK_DETAILS},
    internal_asset_deps={"listing_discovery": set(), "book_details": {LISTING_DISCOVERY}},
    group_name=GROUP,
    descriptions_by_output_name={
        "listing_discovery": "Shallow pass: the start page and every listing page, one detail task per book found.",
        "book_details": "Deep pass: every pending detail page fetched, validated and stored as a book.",
    },
    metadata_by_output_name={
        "book_details": {"dagster/table_name": BOOKS_TABLE, "dagster/column_schema": BOOKS_SCHEMA},
    },
    tags_by_output_name={name: {**tags_for("crawl"), **_KIND_TAGS} for name in ("listing_discovery", "book_details")},
    owners_by_output_name={"listing_discovery": OWNERS, "book_details": OWNERS},
)
