"""Catalog facts shared by the assets of the code location: owners, tags, the crawl pool, freshness, the
publishing assets' automation, the published tables' column schemas, and counter tables as typed metadata.

The tag ``book-pipeline/layer`` says where an asset sits in the one-way flow site → crawl → publish. The column
schemas are declared here, ahead of any run, and a test keeps them equal to the migrated database's columns.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar

import dagster as dg
from dagster._utils.schedules import get_smallest_cron_interval, is_valid_cron_string

from book_assets.settings import ConfigError, default

if TYPE_CHECKING:
    from book_assets.sites.site import Site

T = TypeVar("T")

#: Owners shown in the catalog (Dagster accepts e-mail addresses and ``team:`` names).
OWNERS = ["team:book-pipeline"]
#: The concurrency pool of the crawl steps that run one crawl at a time, seed_queue and share_work (dagster.yaml
#: gives each pool one slot); the drain steps are in none.
CRAWL_POOL = "crawl"
#: Asset metadata as these assets record it: numbers, strings, None and Dagster's typed values (tables, Markdown).
AssetMetadata: TypeAlias = dict[str, dg.MetadataValue | str | int | float | None]


@dataclass(frozen=True)
class CrawlKeys:
    """The asset keys of one catalogue's crawl: its discovery pass and its details pass."""

    listing_discovery: dg.AssetKey
    details: dg.AssetKey


def crawl_keys(site: str) -> CrawlKeys:
    """The crawl assets' keys of catalogue ``site``: ``listing_discovery`` and ``book_details`` for the default
    site (books, whose keys predate the other catalogues), ``<site>/listing_discovery`` and ``<site>/details``
    for every other, so each catalogue's assets sit under its own prefix in one code location."""
    if site == default("site"):
        return CrawlKeys(dg.AssetKey("listing_discovery"), dg.AssetKey("book_details"))
    return CrawlKeys(dg.AssetKey([site, "listing_discovery"]), dg.AssetKey([site, "details"]))


def crawl_name(site: str, name: str) -> str:
    """The name of one of catalogue ``site``'s crawl definitions (a graph, job or schedule): ``name`` for the
    default site (books, whose names predate the other catalogues), ``<site>_<name>`` for every other."""
    return name if site == default("site") else f"{site}_{name}"


def once_per_site(build: Callable[["Site"], T]) -> Callable[["Site"], T]:
    """``build`` called once per site name: a catalogue's definitions are one object each, however often they
    are asked for, so the jobs and checks that name an asset and the code location that serves it hold the
    same one (the loader keeps an object found in several modules once)."""
    built: dict[str, T] = {}

    @wraps(build)
    def once(site: "Site") -> T:
        if site.name not in built:
            built[site.name] = build(site)
        return built[site.name]

    return once


def invalid_cron(cron: str) -> ConfigError:
    """The load error of a ``schedule_cron`` that is no cron expression."""
    return ConfigError(
        f"invalid setting schedule_cron (BOOK_PIPELINE_SCHEDULE_CRON): {cron!r} is not a five-field "
        "cron expression such as '0 3 * * *'"
    )


def refresh_freshness(cron: str, deadline_minutes: int) -> dg.FreshnessPolicy:
    """Fresh while the run each tick of the full refresh's ``cron`` starts has landed ``deadline_minutes`` later.

    The code location gives it to ``book_details`` with the ``schedule_cron`` and ``refresh_deadline_minutes``
    of its load (:func:`book_assets.definitions.build_definitions`). The daily assets carry none: Dagster judges
    freshness by the newest materialization of any partition, which a backfill of old days would renew.

    A cron policy, not a fixed window, so that any cron (weekly, weekdays only) is judged by its own ticks.
    Dagster judges a cron policy at each tick of its deadline cron: fresh when the newest materialization is
    at most ``lower_bound_delta`` older. The deadline is each tick of ``cron`` moved ``deadline_minutes`` on
    (:func:`deadline_cron`) and the bound reaches back to the tick, so a crawl that failed or never started
    is flagged within that time of being due, not at the next tick. A cron whose moved ticks are no cron (a
    move across midnight with set days) keeps its own ticks as the deadline: each tick must find a
    materialization made since the tick before. Dagster 1.13's cron policy has no warn window.
    """
    if not is_valid_cron_string(cron):
        raise invalid_cron(cron)
    interval = get_smallest_cron_interval(cron, "UTC")
    deadline = deadline_cron(cron, deadline_minutes)
    if deadline is None:
        return dg.FreshnessPolicy.cron(deadline_cron=cron, lower_bound_delta=interval, timezone="UTC")
    # Dagster requires the bound within the deadline cron's smallest interval: a tick every few minutes is
    # judged at each one.
    bound = min(timedelta(minutes=deadline_minutes), get_smallest_cron_interval(deadline, "UTC"))
    return dg.FreshnessPolicy.cron(deadline_cron=deadline, lower_bound_delta=bound, timezone="UTC")


def deadline_cron(cron: str, minutes: int) -> str | None:
    """``cron`` with each tick moved ``minutes`` later (mod a day), or None when that set of times is no cron:
    its minute and hour fields must be numbers, lists, ranges or steps, the moved times a product of minutes
    and hours, and a move past midnight is only allowed when every day is one (day fields ``*``)."""
    minute, hour, *days = cron.split()
    minutes_of, hours_of = _values(minute, 59), _values(hour, 23)
    if minutes_of is None or hours_of is None:
        return None
    moved = {h * 60 + m + minutes for h in hours_of for m in minutes_of}
    if any(t >= 24 * 60 for t in moved) and days != ["*", "*", "*"]:
        return None
    ticks = {t % (24 * 60) for t in moved}
    new_minutes, new_hours = sorted({t % 60 for t in ticks}), sorted({t // 60 for t in ticks})
    if len(new_minutes) * len(new_hours) != len(ticks):
        return None
    return " ".join([_field(new_minutes, 59), _field(new_hours, 23), *days])


def _values(field: str, top: int) -> list[int] | None:
    """The numbers a cron minute or hour field names (``top`` its largest), or None for a form not read here."""
    values: set[int] = set()
    try:
        for part in field.split(","):
            base, _, step = part.partition("/")
            first, _, last = base.partition("-")
            start, end = (0, top) if base == "*" else (int(first), int(last) if last else (top if step else int(first)))
            values.update(range(start, end + 1, int(step) if step else 1))
    except ValueError:
        return None
    return sorted(values) if values and max(values) <= top else None


def _field(values: list[int], top: int) -> str:
    return "*" if values == list(range(top + 1)) else ",".join(str(v) for v in values)


#: When a day partition of the publishing assets starts (00:00 UTC, their ``DailyPartitionsDefinition``'s cron).
DAY_START_CRON = "0 0 * * *"
#: The publishing assets follow the crawl: day D's partition is requested once a crawl has updated
#: ``book_details`` since D began and passed its blocking checks (and the crawl is no longer running); again
#: after a later crawl the same day (a recrawl of the failures); past days only by a backfill. Not ``eager()``:
#: its ``newly_missing`` requests each new day's partition as it appears at midnight, from yesterday's crawl.
#: ``all_deps_updated_since_cron`` orders the crawl's materialization against the midnight tick by their
#: times, so a crawl stored before midnight and first seen after it (the daemon down across midnight) does
#: not publish the new day. A day without a crawl stays missing.
#:
#: A crawl's update is consumed by the day's materialization, not by its request (``since_last_handled``
#: would count a failed run as handled and lose the day): a day whose publication failed is requested
#: again, at most once an hour (``RETRY_PUBLISH_CRON``), until it is published or the day ends.
RETRY_PUBLISH_CRON = "0 * * * *"
PUBLISH_AUTOMATION = (
    dg.AutomationCondition.in_latest_time_window()
    & dg.AutomationCondition.any_deps_updated().since(dg.AutomationCondition.newly_updated())
    & ~dg.AutomationCondition.newly_requested().since(
        dg.AutomationCondition.cron_tick_passed(RETRY_PUBLISH_CRON, "UTC")
    )
    & dg.AutomationCondition.all_deps_updated_since_cron(DAY_START_CRON, "UTC")
    & dg.AutomationCondition.all_deps_blocking_checks_passed()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("once the day's crawl passed its blocking checks")

Layer = Literal["crawl", "publish"]


def tags_for(layer: Layer) -> dict[str, str]:
    """The catalog tags of an asset of ``layer``."""
    return {"book-pipeline/layer": layer}


def _column(name: str, type_: str, description: str | None = None, *, required: bool = False) -> dg.TableColumn:
    constraints = dg.TableColumnConstraints(nullable=False) if required else None
    return dg.TableColumn(name, type_, description=description, constraints=constraints)


#: ``books``: one row per book URL, its latest state (history in ``book_versions``).
BOOKS_TABLE = "public.books"
BOOKS_SCHEMA = dg.TableSchema(
    columns=[
        _column("id", "bigint", required=True),
        _column("url", "text", "Canonical URL of the book page (unique).", required=True),
        _column("title", "text"),
        _column("price", "text", "Price as the page shows it, e.g. '£51.77'."),
        _column("rating", "text", "Star rating as the page names it, e.g. 'Three'."),
        _column("category", "text"),
        _column("availability", "text", "e.g. 'In stock (22 available)'."),
        _column("upc", "text"),
        _column("description", "text"),
        _column("raw_html", "text", "The served HTML of the page."),
        _column("scraped_at", "timestamptz", "When the current version was stored.", required=True),
        _column("price_amount", "numeric(10,2)", "Price in pounds."),
        _column("price_excl_tax", "numeric(10,2)"),
        _column("price_incl_tax", "numeric(10,2)"),
        _column("tax", "numeric(10,2)"),
        _column("rating_value", "smallint", "Star rating, 1 to 5."),
        _column("stock", "integer", "Copies in stock."),
        _column("num_reviews", "integer"),
        _column("product_type", "text"),
        _column("content_hash", "text", "sha256 of the served bytes."),
        _column("http_status", "smallint"),
        _column("fetched_at", "timestamptz", "When the page was last fetched."),
        _column("first_seen_at", "timestamptz", required=True),
        _column("updated_at", "timestamptz", required=True),
        _column("version", "integer", "Number of distinct states recorded (book_versions).", required=True),
        _column("rendered_html", "text", "The DOM after scripts ran, when it differs from raw_html."),
        _column("requested_url", "text", "The URL asked for, when a redirect led elsewhere."),
        _column("raw_body", "bytea", "The served bytes, when raw_html does not reproduce them."),
        _column("removed_at", "timestamptz", "When no complete listing of its category showed it; NULL while listed."),
    ],
    constraints=dg.TableConstraints(other=["unique (url)"]),
)

#: ``category_balanced_snapshot``: one set of rows per day.
SNAPSHOT_TABLE = "public.category_balanced_snapshot"
SNAPSHOT_SCHEMA = dg.TableSchema(
    columns=[
        _column("url", "text", "Canonical URL of the book page.", required=True),
        _column("title", "text"),
        _column("category", "text", required=True),
        _column("price", "numeric(10,2)", "Price shown on the page, in pounds."),
        _column("rating", "smallint", "Star rating, 1 to 5."),
        _column("stock", "integer", "Copies in stock."),
        _column("scraped_at", "timestamptz", "When the chosen version of the book was recorded.", required=True),
        _column("snapshot_at", "timestamptz", "When the row was written.", required=True),
        _column("snapshot_day", "date", "The day (UTC) whose end the books are taken at.", required=True),
    ],
    constraints=dg.TableConstraints(other=["primary key (snapshot_day, url)"]),
)


def count_table(counts: Mapping[str, int], key: str, value: str) -> dg.MetadataValue:
    """``counts`` as a two-column Dagster table (``key`` text, ``value`` int), largest first."""
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return dg.MetadataValue.table(
        records=[dg.TableRecord({key: name, value: int(n)}) for name, n in rows],
        schema=dg.TableSchema(columns=[dg.TableColumn(key, "string"), dg.TableColumn(value, "int")]),
    )
