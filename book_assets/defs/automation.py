"""``publish_after_crawl``: the sensor that evaluates the publishing assets' automation condition.

The daily assets (snapshot, change feed, archive, and every other catalogue's snapshot after its own crawl's
details asset) carry :data:`book_assets.defs.catalog.PUBLISH_AUTOMATION`:
once a crawl has updated ``book_details`` on day D and its blocking checks passed, the next tick requests D's
partition of each (one run); a new day's partition appearing at midnight requests nothing. A sensor of their
own, rather than Dagster's implicit default one, so that it has a name and a description in the UI and starts
running with the daemon: it launches no crawl, only rebuilds from the database what a crawl has just stored.
"""

import dagster as dg

from book_assets.defs.crawl.jobs import PUBLISH_ASSETS
from book_assets.defs.snapshot.catalogues import SITE_SNAPSHOT_ASSETS

publish_after_crawl = dg.AutomationConditionSensorDefinition(
    "publish_after_crawl",
    target=dg.AssetSelection.assets(*PUBLISH_ASSETS, *SITE_SNAPSHOT_ASSETS),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Publish the day's snapshot, change feed and archive once a crawl has updated book_details that "
    "day and passed its blocking checks.",
)
