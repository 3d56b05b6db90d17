"""Every setting of book-pipeline, with its default, in one place.

Each field can be overridden from the environment as ``BOOK_PIPELINE_<NAME>`` (for example
``BOOK_PIPELINE_CONCURRENCY=8``) or from a ``.env`` file in the working directory; the database is the
one exception and reads the conventional ``DATABASE_URL``. CLI options and Dagster config override these
per run. Invalid values raise :class:`ConfigError` with a one-line message that names the setting.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
LIVE_SITE_URL = "https://books.toscrape.com/"
#: Pages in flight per worker a browser or adaptive crawl starts at unless ``min_concurrency`` is set: each is
#: a Chromium tab (tens of MB). An http crawl starts at ``max_concurrency``: a request in flight costs kilobytes,
#: and with fewer of them a worker sits idle while its next claim is on its way (the claim is the queue's
#: dearest statement; ``benchmarks/queue_bench.py``): an http crawl of the sandbox ran 4.4 s at 4 per worker, 3.3 s
#: at 16, where autoscaling (a step every 5 s) never got there.
BROWSER_MIN_CONCURRENCY = 4
#: Worker processes a crawl runs unless ``workers`` is set. An http or adaptive crawl's cost is its Python process
#: (fetch, parse, store), so it runs one worker per core of a 2-core machine. A browser crawl's is Chromium's
#: processes (nine tenths of its CPU a page, ``benchmarks/browser_cpu.py``), which one worker's autoscaled tabs
#: keep as busy as two workers', with one Chromium and one Playwright driver instead of two (docs/benchmarks.md).
WORKERS = 2
BROWSER_WORKERS = 1


class ConfigError(ValueError):
    """A setting has an impossible value; the message names the setting."""


def _default_data_dir() -> Path:
    # In a checkout the data lives beside the code (git-ignored); installed elsewhere, in the working dir.
    if (PROJECT_ROOT / "pyproject.toml").exists():
        return PROJECT_ROOT / ".data"
    return Path.cwd() / ".data"


class Settings(BaseSettings):
    """Defaults for every component. Field docs are the reference documentation of each setting."""

    model_config = SettingsConfigDict(
        env_prefix="BOOK_PIPELINE_", env_file=".env", extra="ignore", validate_default=True
    )

    # --- storage -------------------------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "BOOK_PIPELINE_DATABASE_URL"),
        description="PostgreSQL URL (postgresql://user:pass@host:port/db). Unset: the embedded server.",
    )
    database_direct_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_DIRECT_URL", "BOOK_PIPELINE_DATABASE_DIRECT_URL"),
        description="PostgreSQL itself when DATABASE_URL is a pooler in transaction mode (PgBouncer): migrations "
        "take their lock here, and connections to any other URL keep no session state (timeouts set per "
        "transaction, idle workers poll instead of LISTEN). Unset: no pooler.",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Folder for the embedded PostgreSQL cluster, exports, snapshots and artifacts.",
    )
    warc: bool = Field(
        default=True,
        description="Archive every fetched response (request and response, exact body) in WARC files, one set per "
        "day under warc_dir, indexed (CDXJ) when a crawl ends.",
    )
    warc_dir: Path | None = Field(default=None, description="Folder of the WARC archive; unset: <data_dir>/warc.")
    database_name: str = Field(
        default="bookpipeline", description="Database created on the embedded server for the pipeline."
    )

    # --- target site ---------------------------------------------------------------------------
    site: str = Field(
        default="books",
        description="The site definition the crawl runs on: its page kinds, parsers, store and categories "
        "(book_assets.sites); books: books.toscrape.com, quotes: quotes.toscrape.com.",
    )
    base_url: str = Field(
        default=LIVE_SITE_URL,
        description="Where the crawl starts (root, listing or category page); not set: the site's own start page.",
    )
    allowed_domains: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="Hosts the crawler may fetch; empty means the start URL's host only."
    )
    min_interval_s: float = Field(
        default=1.0,
        ge=0,
        description="Minimum seconds between request starts per domain; 0 disables. Not set and the start URL "
        "on loopback (your own replica): 0.",
    )
    max_in_flight_per_domain: int | None = Field(default=None, ge=1, description="Cap on tasks in flight per domain.")
    obey_robots: bool = Field(
        default=True,
        description="Obey each site's robots.txt (fetched once per domain per crawl): disallowed URLs are never "
        "fetched, and a Crawl-delay raises the domain's interval.",
    )
    crawl_delay_max_s: float = Field(
        default=60.0,
        ge=0,
        description="Cap on a robots.txt Crawl-delay (seconds); a longer one is applied as this, and the crawl "
        "summary says so.",
    )
    autothrottle: bool = Field(
        default=False,
        description="AutoThrottle: a domain's interval follows its observed latency toward the target concurrency "
        "and backs off on 429/503, never below min_interval_s (or the Crawl-delay).",
    )
    autothrottle_target_concurrency: float = Field(
        default=1.0, gt=0, description="AutoThrottle: requests in flight at the site at once, all workers together."
    )
    autothrottle_max_interval_s: float = Field(
        default=60.0, ge=0, description="AutoThrottle: the most seconds between request starts per domain."
    )
    max_pages: int = Field(
        default=1000,
        ge=1,
        description="Listing pages followed per chain of next links (a category's pages): a bound on a pagination "
        "that never ends; a chain cut at it is counted in the crawl's summary.",
    )
    listing_trap_pages: int = Field(
        default=5,
        ge=1,
        description="Listing pages in a row that bring no book new to the crawl after which their chain is not "
        "followed: the page is failed as listing_trap (a pagination repeating its books).",
    )
    categories: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="Only these categories (names or slugs, comma-separated); empty: all."
    )
    drop_query_params: Annotated[tuple[str, ...], NoDecode] = Field(
        default=("utm_*", "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "mc_cid", "mc_eid", "_ga", "_gl"),
        description="Query parameters dropped from every discovered link before it is enqueued (tracking tags, so "
        "one page is one task and one book): shell-style patterns matched against the parameter's name, any case, "
        "comma-separated; NAME applies on every site, HOST:NAME on the hosts matching HOST only (*.example.com:sid); "
        "empty: keep every parameter.",
    )

    # --- fetching ------------------------------------------------------------------------------
    fetch_mode: Literal["browser", "http", "adaptive"] = Field(
        default="browser",
        description="browser (Playwright), http, or adaptive (http where it gives the browser's records).",
    )
    javascript: Literal["on", "off", "auto"] = Field(
        default="auto",
        description="Browser JavaScript: on, off, or auto (off until a page type's served HTML does not parse).",
    )
    adaptive_probe_pages: int = Field(
        default=5, ge=1, description="Adaptive: pages per (domain, page type) fetched both ways before trusting http."
    )
    adaptive_sample_rate: float = Field(
        default=0.02, ge=0, le=1, description="Adaptive: share of plain-fetched pages re-checked in the browser."
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description=f"Worker processes for a crawl. Unset: {WORKERS} in http and adaptive mode (one per core), "
        f"{BROWSER_WORKERS} in browser mode (Chromium's own processes use the cores).",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Pages in flight per worker: a number pins it; unset, it autoscales (min/max_concurrency).",
    )
    min_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Autoscaling: pages in flight per worker at the start and at least. Unset: "
        f"{BROWSER_MIN_CONCURRENCY} in browser and adaptive mode (a tab each), max_concurrency in http mode.",
    )
    max_concurrency: int = Field(default=16, ge=1, le=64, description="Autoscaling: most pages in flight per worker.")
    timeout_s: float = Field(default=30.0, gt=0, description="Navigation / request timeout in seconds.")
    chromium_path: str | None = Field(
        default=None,
        validation_alias=AliasChoices("BOOK_PIPELINE_CHROMIUM", "BOOK_PIPELINE_CHROMIUM_PATH"),
        description="Chromium executable; unset: Playwright's own, then /usr/bin/chromium.",
    )
    block_resource_types: Annotated[tuple[str, ...], NoDecode] = Field(
        default=("image", "stylesheet", "font", "media"),
        description="Resource types the browser never loads.",
    )
    block_url_patterns: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(
            r"google-analytics\.com",
            r"googletagmanager\.com",
            r"googlesyndication\.com",
            r"doubleclick\.net",
            r"facebook\.(com|net)",
            r"connect\.facebook\.net",
            r"hotjar\.com",
            r"scorecardresearch\.com",
            r"adservice\.google\.",
        ),
        description="Regular expressions of URLs the browser never loads (analytics, ads).",
    )
    relaunch_after_pages: int = Field(default=500, ge=1, description="Restart Chromium after this many pages.")
    recycle_page_after: int = Field(
        default=25, ge=1, description="Replace a browser tab after this many fetches (bounds renderer memory)."
    )
    recycle_scripted_page_after: int = Field(
        default=12,
        ge=1,
        description="Replace a browser tab that runs scripts after this many fetches (its scripts' heap grows faster).",
    )
    max_body_bytes: int = Field(
        default=10 * 1024 * 1024, ge=1024, description="Pages larger than this fail permanently (real ones: ~50 KB)."
    )
    max_redirects: int = Field(default=10, ge=0, description="Redirects followed per fetch before it fails.")
    max_url_length: int = Field(
        default=2048,
        ge=256,
        le=2500,
        description="Links longer than this (characters, canonical form) are never enqueued: each fails alone as "
        "url_too_long (PostgreSQL cannot index a key much past 2,700 bytes).",
    )
    conditional_requests: bool = Field(
        default=True,
        description="Re-crawls send If-None-Match / If-Modified-Since from the stored response (http and the plain "
        "leg of adaptive mode; browser mode always downloads); a 304 reuses the stored page.",
    )
    user_agent: str = Field(
        default="book-pipeline/0.1 (open-source crawler of books.toscrape.com; +book-pipeline)",
        description="User-Agent header sent by both fetch modes.",
    )

    # --- queue ---------------------------------------------------------------------------------
    lease_s: float = Field(default=60.0, gt=0, description="How long a claimed task stays leased without heartbeat.")
    health_file: Path | None = Field(
        default=None,
        description="A file the worker touches at each turn of its claim loop (at most every second): its age "
        "tells a probe whether the worker claims (deploy/k8s/worker-deployment.yaml). Unset: none.",
    )
    max_attempts: int = Field(default=5, ge=1, description="Attempts before a task is dead-lettered as failed.")
    backoff_base_s: float = Field(default=1.0, ge=0, description="First retry delay; doubles each attempt.")
    backoff_max_s: float = Field(default=300.0, ge=0, description="Cap on a retry delay.")
    retry_after_max_s: float = Field(
        default=600.0, ge=0, description="Cap on a server's Retry-After (seconds); longer requests are clamped."
    )

    # --- database sessions ---------------------------------------------------------------------
    db_lock_timeout_s: float = Field(
        default=10.0, ge=0, description="A statement waiting longer than this for a lock fails and is retried."
    )
    db_statement_timeout_s: float = Field(
        default=300.0, ge=0, description="A statement running longer than this is cancelled; 0 disables."
    )
    db_idle_in_transaction_timeout_s: float = Field(
        default=30.0,
        ge=0,
        description="A session idle this long inside a transaction (a frozen client) is ended, releasing its locks.",
    )

    # --- scheduling ----------------------------------------------------------------------------
    weights_file: Path | None = Field(default=None, description="JSON/YAML file of category weights.")
    weights: Annotated[str | dict[str, float] | None, NoDecode] = Field(
        default=None,
        description='Category weights over the file\'s, e.g. "Travel=3,Mystery=2,*=1" or {"Travel": 3, "*": 1}.',
    )
    deep_budget: int | None = Field(default=None, ge=0, description="Detail pages per run; unset: all.")
    interleave: int = Field(default=20, ge=1, description="Detail pages handed out after each listing page.")
    snapshot_budget: int = Field(default=200, ge=1, description="Books in the category-balanced snapshot.")

    # --- orchestration -------------------------------------------------------------------------
    schedule_cron: str = Field(default="0 3 * * *", description="Cron of the daily full refresh (UTC).")
    refresh_deadline_minutes: int = Field(
        default=60,
        ge=1,
        description="Minutes after each schedule_cron tick by which its crawl must have materialized book_details; "
        "later, book_details is overdue (its freshness policy fails).",
    )
    step_executor: Literal["multiprocess", "in_process", "k8s", "docker"] = Field(
        default="multiprocess",
        description="Where the queue jobs' drain steps (one per worker) run: multiprocess (a process each on "
        "this host), in_process (one after the other), k8s (a Kubernetes Job each), docker (a container each).",
    )
    failed_tasks_threshold: int = Field(
        default=10, ge=1, description="Pages failing now and due for a requeue that trigger a requeue run."
    )
    requeue_max: int = Field(
        default=3, ge=0, description="Requeues of one failed page (transient failures only) before it is left."
    )
    requeue_backoff_s: float = Field(
        default=3600.0,
        ge=0,
        description="Delay before a failed page's first requeue; each further requeue waits four times longer.",
    )
    task_retention_days: float = Field(
        default=14.0, ge=0, description="Finished tasks older than this are pruned when a crawl reports; 0: keep all."
    )
    drift_threshold: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="A field drifts when its fill rate in a crawl falls by more than this (0.2: 20 points) below "
        "the last good crawl's, in the whole crawl or in a category: the crawl exits non-zero, its losses of "
        "the field stay held and the Dagster check no_field_drift fails until the drift is accepted.",
    )
    drift_min_pages: int = Field(
        default=20,
        ge=1,
        description="Book pages a crawl (and a category in it) needs, in the crawl and in the last good one, for "
        "its fill rates to be judged (and values of a field, for their shape).",
    )
    drift_length_ratio: float = Field(
        default=2.0,
        gt=1,
        description="A text field's values drift when their median length in a crawl is more than this many "
        "times shorter or longer than in the last good crawl's (a selector that now matches a heading or a "
        "whole section): judged as a fall of the fill rate is.",
    )
    drift_top_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="A field's values drift when the share of its most common value rises by more than this "
        "(0.5: 50 points) above the last good crawl's (a selector that now matches one constant element: every "
        "rating 1, every price 0): judged as a fall of the fill rate is.",
    )
    snapshot_start_date: str = Field(
        default="2026-01-01", pattern=r"^\d{4}-\d{2}-\d{2}$", description="First day of the daily snapshot (UTC)."
    )

    # --- metrics (docs/observability.md) -------------------------------------------------------
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Serve the crawl's Prometheus metrics at http://<metrics_host>:<port>/metrics while a crawl or "
        "worker runs (one endpoint per drain, its worker processes' figures summed); unset: off.",
    )
    metrics_host: str = Field(
        default="127.0.0.1", description="Address the metrics endpoints bind (the workers' and the queue exporter's)."
    )
    metrics_final_scrape_s: float = Field(
        default=30.0,
        ge=0,
        description="At exit, a process that served metrics waits up to this long for one more scrape, so the "
        "crawl's last figures reach Prometheus (only if it was scraped before); 0: no wait.",
    )
    queue_metrics_port: int = Field(
        default=9465, ge=1, le=65535, description="Port of the queue exporter (`book-pipeline metrics`)."
    )
    queue_metrics_timeout_s: float = Field(
        default=5.0,
        ge=2,
        le=60,
        description="The queue exporter answers a scrape within this: a database that does not answer in time "
        "(or cannot be connected to) gives queue_up 0; keep it under Prometheus' scrape timeout (10 s by default).",
    )

    # --- logs (book_assets/logs.py) ----------------------------------------------------------------
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO",
        description="Lowest level of the lines logged to stderr (any case: debug, info, warning, error).",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text: one line per record (UTC time, level, logger, the Dagster run and trace ids when known, "
        "message); json: one JSON object per line with the same fields, for a log collector.",
    )

    # --- alerts (read by the daemon when a run fails; none set: no alert) -------------------------
    alert_webhook_url: str | None = Field(
        default=None, description='HTTP(S) URL receiving a JSON POST {"text", "run_id"} for every failed run.'
    )
    slack_token: str | None = Field(default=None, repr=False, description="Slack bot token for run-failure alerts.")
    slack_channel: str | None = Field(default=None, description="Slack channel of run-failure alerts.")
    slack_api_url: str | None = Field(default=None, description="Another Slack-compatible API (tests, proxies).")
    webserver_url: str = Field(
        default="http://127.0.0.1:3000", description="Base URL of the Dagster UI, for the run links in alerts."
    )

    @field_validator(
        "categories",
        "allowed_domains",
        "block_resource_types",
        "block_url_patterns",
        "drop_query_params",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: object) -> object:
        # From the environment or a CLI option: "Travel,Mystery"; from code or JSON: a list.
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return json.loads(value)
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _any_case(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, str):
            return value
        return value.upper() if info.field_name == "log_level" else value.lower()

    @field_validator("database_url", "database_direct_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("postgresql", "postgres", "postgresql+psycopg2"):
            raise ValueError("must start with postgresql:// (for example postgresql://user:pass@host:5432/db)")
        if not parts.path.strip("/") and "dbname=" not in parts.query:
            raise ValueError("must name a database (postgresql://user:pass@host:5432/<database>)")
        try:
            parts.port  # noqa: B018 - raises on a malformed port
        except ValueError as exc:
            raise ValueError(f"has a bad port: {exc}") from None
        return value

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host, e.g. https://books.toscrape.com/")
        return value

    @cached_property
    def pg_dir(self) -> Path:
        return self.data_dir / "pg"

    @cached_property
    def archive_dir(self) -> Path:
        """The WARC archive's folder (read by ``reextract --from-warc`` and ``raw_archive`` even with warc off)."""
        return self.warc_dir or self.data_dir / "warc"


def default(name: str) -> Any:
    """The declared default of setting ``name``, for the typed views of the settings (e.g. ``FetchSettings``)."""
    return Settings.model_fields[name].get_default(call_default_factory=True)


def describe(name: str) -> str:
    """The documentation of setting ``name`` (CLI help, Dagster config descriptions)."""
    return Settings.model_fields[name].description or name


def load_settings(**overrides: object) -> Settings:
    """Settings from defaults, ``.env``, the environment and ``overrides`` (None values are ignored)."""
    clean: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}  # pydantic validates them
    try:
        return Settings(**clean)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None
    except (SettingsError, ValueError) as exc:  # a value the environment source cannot even decode
        raise ConfigError(f"invalid setting: {exc}") from None


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    name = ".".join(str(p) for p in first["loc"]) or "settings"
    env = {"database_url": "DATABASE_URL", "database_direct_url": "DATABASE_DIRECT_URL"}.get(
        name, f"BOOK_PIPELINE_{name.upper()}"
    )
    msg = first["msg"].removeprefix("Value error, ")
    return f"invalid setting {name} ({env}): {msg}"
