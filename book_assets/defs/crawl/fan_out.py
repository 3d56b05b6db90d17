"""The queue jobs: a catalogue's crawl asset with one drain step per worker, each placed by the executor.

- ``crawl_queue_job``: seed, W drain steps, report, checks: a crawl without the snapshot, for operators and for
  deployments that scale out through Dagster.
- ``drain_queue_job``: the same without the seed: finish whatever is pending (after a requeue or an
  interrupted run). It opens no crawl, so ``listing_discovery`` is not materialized.

Every other catalogue has its own pair (``quotes_crawl_queue_job``, ``quotes_drain_queue_job``):
:func:`queue_jobs` builds them for a site definition. Both materialize the catalogue's crawl asset
(:mod:`book_assets.defs.crawl.assets`), the one its full refresh materializes, with config that asks for one
drain step per worker (``step_per_worker``), and run its checks; a failed blocking check fails the run, and the
publishing assets' automation waits for the checks as it does after the full refresh.

A crawl is settled (closed, its removals decided) only by the run that opened it: ``seed_queue`` hands the
crawl it opened down to ``report_crawl``. ``drain_queue_job`` opened none, so its report settles none (the
crawl's own run may still be at work on another host) unless its config names one (``settle_crawl``: the id
of a crawl whose run was interrupted before it reported).

Where the steps run is the executor's business, chosen by the ``step_executor`` setting when the code location
loads (``BOOK_PIPELINE_STEP_EXECUTOR``): ``multiprocess`` (the default: a process per step on this host),
``in_process`` (one after the other: the first step drains the queue), ``k8s`` (``k8s_job_executor``, a
Kubernetes Job per step) or ``docker`` (``docker_executor``, a container per step). The executor's own config
(image, namespace, network, ``max_concurrent``) is the run config's ``execution.config``, as Dagster documents
for each. Steps hand their results on through the IO manager, so steps in other pods or containers need
storage they share (docs/deploy.md).
"""

from typing import Any

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from book_assets.defs.catalog import crawl_name
from book_assets.defs.crawl.assets import crawl_asset, crawl_run_tags
from book_assets.settings import default
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site


def step_executor(name: str) -> dg.ExecutorDefinition:
    """The executor that places the drain steps (``name``: the ``step_executor`` setting)."""
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    if name == "docker":
        from dagster_docker import docker_executor

        return docker_executor
    if name == "in_process":
        return dg.in_process_executor
    return dg.multiprocess_executor


def crawl_run_config(site: Site | None = None, **config: Any) -> dict[str, Any]:
    """Run config of ``site``'s crawl graph (``ops: crawl: config:``; the default site's when None)."""
    crawled = site or site_named(default("site"))
    return {"ops": {crawl_asset(crawled).node_def.name: {"config": config}}}


def queue_jobs(executor: str, site: Site | None = None) -> list[UnresolvedAssetJobDefinition]:
    """``site``'s ``crawl_queue_job`` and ``drain_queue_job`` (the default site's when None) with their drain
    steps placed by ``executor``."""
    crawled = site or site_named(default("site"))
    executor_def = step_executor(executor)
    selection = dg.AssetSelection.assets(crawl_asset(crawled))
    tags = crawl_run_tags(crawled.name)
    return [
        dg.define_asset_job(
            name=crawl_name(crawled.name, "crawl_queue_job"),
            selection=selection,
            tags=tags,
            executor_def=executor_def,
            config=crawl_run_config(crawled, step_per_worker=True),
            description="Seed the start page and drain the queue in one step per worker (no snapshot); the "
            "crawl's checks follow.",
        ),
        dg.define_asset_job(
            name=crawl_name(crawled.name, "drain_queue_job"),
            selection=selection,
            tags=tags,
            executor_def=executor_def,
            config=crawl_run_config(crawled, seed=False, step_per_worker=True),
            description="Drain whatever is pending (after a requeue or an interrupted run), one step per "
            "worker; the details' checks follow.",
        ),
    ]
