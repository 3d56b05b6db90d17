"""The crawl of a catalogue: one graph-backed multi-asset that materializes its discovery and details passes.

:func:`crawl_asset` builds it for a site definition: books' is ``crawl``, materializing ``listing_discovery``
and ``book_details``; every other catalogue's is ``<site>_crawl``, materializing ``<site>/listing_discovery``
and ``<site>/details`` (:func:`book_assets.defs.catalog.crawl_keys`). Every graph is the same composition in
steps (:mod:`book_assets.defs.crawl.steps`): ``seed_queue`` → ``share_work`` → ``drain_queue`` × N →
``report_crawl``, the same op definitions in each, the same calls of :mod:`book_assets.crawl.pipeline` the CLI
makes, handing on one :class:`~book_assets.crawl.pipeline.CrawlRun`. Every job that drains a catalogue's queue
materializes its one asset definition, so the catalog holds one graph per catalogue whichever job ran: the full
refresh and the retry of the failures (one drain step that runs the W workers as processes of its own, in
process), and the queue jobs (one drain step per worker, placed by the executor:
:mod:`book_assets.defs.crawl.fan_out`). The asset checks of both assets (:mod:`book_assets.defs.crawl.checks`)
are steps of every such job, after the report.

The run's config is the graph's (:class:`book_assets.defs.crawl.steps.CrawlStepsConfig`: ``ops: crawl:
config:``) and the graph's config mapping hands it, with the graph's site, to the steps that read it: the
run crawls the asset's catalogue. Only ``seed_queue`` resolves the crawl's configuration from it, and the run
value carries that configuration to the steps after. The queue holds the work; single pages are retried by the
queue, and the steps' retry policy only re-runs a step that failed as a whole for a transient reason (a re-run
resumes the same queue instead of starting over).
"""

from typing import Any

import dagster as dg

from book_assets.defs.catalog import BOOKS_SCHEMA, BOOKS_TABLE, OWNERS, crawl_keys, crawl_name, once_per_site, tags_for
from book_assets.defs.crawl.steps import CrawlStepsConfig, drain_queue, report_crawl, seed_queue, share_work
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site

GROUP = "crawl"
#: Run tag of every run that drains the crawl queue.
CRAWL_TAG = "book-pipeline/crawl"
#: Run tag naming the catalogue a crawl run crawls (one crawl of a catalogue at a time).
SITE_TAG = "book-pipeline/site"
#: A crawl run that outlives most of a day is stuck (a daily job's next run is due): run monitoring cancels it.
CRAWL_MAX_RUNTIME_S = 20 * 3600
#: The steps of the crawl's graph, in order.
STEPS = (seed_queue, share_work, drain_queue, report_crawl)
#: The steps that read the run's config: the first resolves the crawl's configuration from it, the others
#: read the run's shape (task types, drain steps, a crawl to settle); the drain steps take only their share.
CONFIGURED_STEPS = (seed_queue, share_work, report_crawl)
#: The name of ``report_crawl``'s output for the details pass (the default site's asset name).
DETAILS_OUTPUT = "book_details"

#: ``kinds`` as Dagster stores them (a graph-backed asset takes them as tags).
_KIND_TAGS = {"dagster/kind/python": "", "dagster/kind/postgres": ""}


def crawl_run_tags(site: str) -> dict[str, str]:
    """The run tags of every run that drains catalogue ``site``'s queue."""
    return {CRAWL_TAG: "true", SITE_TAG: site, "dagster/max_runtime": str(CRAWL_MAX_RUNTIME_S)}


def crawl_group(site: str) -> str:
    """The asset group of catalogue ``site``'s crawl assets."""
    return crawl_name(site, GROUP)


def crawl_graph(site: Site) -> dg.GraphDefinition:
    """``site``'s crawl graph: the steps, with a config mapping that hands the run's config and the site to
    each step that reads it."""
    keys = crawl_keys(site.name)
    details = keys.details.path[-1]

    @dg.config_mapping
    def every_step(config: CrawlStepsConfig) -> dict[str, Any]:
        """The graph's config, and the graph's site, handed to each step that reads it as its own."""
        values = {**config.model_dump(), "site": site.name}
        return {step.name: {"config": values} for step in CONFIGURED_STEPS}

    @dg.graph(
        name=crawl_name(site.name, "crawl"),
        config=every_step,
        out={"listing_discovery": dg.GraphOut(), details: dg.GraphOut()},
        description=f"One crawl of {site.name}: seed, drain the queue in N steps (listing and detail pages "
        "interleaved), report.",
    )
    def graph() -> dict[str, Any]:
        shared, steps = share_work(seed_queue())
        outputs = report_crawl(shared=shared, drained=steps.map(drain_queue).collect())
        listing, found = outputs.listing_discovery, getattr(outputs, DETAILS_OUTPUT)
        return {"listing_discovery": listing, details: found}

    return graph


@once_per_site
def crawl_asset(site: Site) -> dg.AssetsDefinition:
    """``site``'s crawl asset: one object per site, however often it is asked for, so the jobs and checks that
    name it and the code location that serves it hold the same one."""
    name = site.name
    keys = crawl_keys(name)
    details = keys.details.path[-1]
    metadata = (
        {details: {"dagster/table_name": BOOKS_TABLE, "dagster/column_schema": BOOKS_SCHEMA}}
        if name == default("site")
        else None
    )
    return dg.AssetsDefinition.from_graph(
        crawl_graph(site),
        keys_by_output_name={"listing_discovery": keys.listing_discovery, details: keys.details},
        internal_asset_deps={"listing_discovery": set(), details: {keys.listing_discovery}},
        group_name=crawl_group(name),
        descriptions_by_output_name={
            "listing_discovery": "Shallow pass: the start page and every listing page, one detail task per "
            f"{site.record} found.",
            details: f"Deep pass: every pending detail page fetched, validated and stored as a {site.record}.",
        },
        metadata_by_output_name=metadata,
        tags_by_output_name={name: {**tags_for("crawl"), **_KIND_TAGS} for name in ("listing_discovery", details)},
        owners_by_output_name={"listing_discovery": OWNERS, details: OWNERS},
    )


BOOKS_KEYS = crawl_keys(default("site"))
LISTING_DISCOVERY = BOOKS_KEYS.listing_discovery
BOOK_DETAILS = BOOKS_KEYS.details
#: The default site's (books') crawl asset and run tags.
crawl = crawl_asset(site_named(default("site")))
CRAWL_RUN_TAGS = crawl_run_tags(default("site"))
