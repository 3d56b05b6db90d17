"""Every catalogue the code location serves, each with its own crawl asset, checks, jobs, schedule and sensors.

The Dagster layer names no site: :func:`catalogue_definitions` builds one catalogue's definitions from its site
definition (:class:`~book_assets.sites.site.Site`), and the code location applies it to every catalogue it
serves (:func:`served_sites`): the sites shipped with the engine (:data:`book_assets.sites.registry.SITES`:
books and quotes) and every site found by its folder (:func:`book_assets.sites.registry.discovered`, what
``book-pipeline site new`` writes) whose definition loads. Discovered sites are served by default, so a new
catalogue's assets appear in the UI once its definition imports (its schedule off, as every schedule here);
one whose definition does not load is skipped with a warning naming its error, so a half-written scaffold
never breaks the code location, and its assets appear once it loads.

What a catalogue gets (books' names unprefixed, every other's under its site:
:func:`~book_assets.defs.catalog.crawl_keys`, :func:`~book_assets.defs.catalog.crawl_name`):

- its crawl asset (:func:`~book_assets.defs.crawl.assets.crawl_asset`: ``listing_discovery`` and
  ``book_details``; ``quotes/listing_discovery`` and ``quotes/details``), the one crawl composition of steps;
- its checks (:func:`~book_assets.defs.crawl.checks.crawl_checks`): the engine's and the site's data checks;
- its jobs (:func:`~book_assets.defs.crawl.jobs.crawl_jobs`, :func:`~book_assets.defs.crawl.fan_out.queue_jobs`):
  ``full_refresh_job``, ``recrawl_failed_job``, ``crawl_queue_job``, ``drain_queue_job``
  (``quotes_full_refresh_job``, ...);
- its daily schedule (:func:`~book_assets.defs.crawl.schedules.full_refresh_schedule`: ``daily_full_refresh``,
  ``quotes_daily_full_refresh``), on the one ``schedule_cron``;
- its ``failed_tasks_sensor`` (``quotes_failed_tasks_sensor``:
  :func:`~book_assets.defs.crawl.sensors.build_failed_tasks_sensor`), which requests its ``recrawl_failed_job``
  when enough of its failures are due;
- its observer of the records written outside a Dagster run (:func:`~book_assets.defs.crawl.observe.details_observer`:
  ``book_details_observer``, ``quotes_details_observer``).

The settings read here (``schedule_cron``, ``step_executor``, ``failed_tasks_threshold`` and the requeue policy)
are read when the location loads, once for every catalogue.
"""

import warnings

import dagster as dg

from book_assets.crawl.config import requeue_policy
from book_assets.defs.crawl.assets import crawl_asset
from book_assets.defs.crawl.checks import crawl_checks
from book_assets.defs.crawl.fan_out import queue_jobs
from book_assets.defs.crawl.jobs import crawl_jobs
from book_assets.defs.crawl.observe import details_observer
from book_assets.defs.crawl.schedules import full_refresh_schedule
from book_assets.defs.crawl.sensors import build_failed_tasks_sensor
from book_assets.settings import ConfigError, Settings, load_settings
from book_assets.sites import registry
from book_assets.sites.site import Site


def served_sites() -> tuple[Site, ...]:
    """The catalogues the code location serves: the shipped sites, then every discovered site whose definition
    loads, by name; one that does not load is left out with a warning naming its error."""
    served = list(registry.SITES.values())
    for name in registry.discovered():
        try:
            served.append(registry.site_named(name))
        except ConfigError as exc:
            warnings.warn(f"{exc}: the code location serves no assets of site {name}", UserWarning, stacklevel=2)
    return tuple(served)


def catalogue_definitions(site: Site, settings: Settings) -> dg.Definitions:
    """``site``'s crawl asset, checks, jobs, schedule and sensors, with the cron, executor, threshold and requeue
    policy of ``settings``."""
    jobs = crawl_jobs(site)
    policy = requeue_policy(settings.requeue_max, settings.requeue_backoff_s)
    return dg.Definitions(
        assets=[crawl_asset(site)],
        asset_checks=crawl_checks(site).every,
        jobs=[jobs.full_refresh, jobs.recrawl_failed, *queue_jobs(settings.step_executor, site)],
        schedules=[full_refresh_schedule(site, settings.schedule_cron)],
        sensors=[details_observer(site), build_failed_tasks_sensor(settings.failed_tasks_threshold, policy, site=site)],
    )


@dg.definitions
def catalogues() -> dg.Definitions:
    """Every served catalogue's definitions, with the settings at load time (a bad cron fails the load)."""
    settings = load_settings()
    return dg.Definitions.merge(*(catalogue_definitions(site, settings) for site in served_sites()))
