"""The ``book-pipeline`` command line.

Every command reads :class:`~book_assets.settings.Settings` (defaults, ``.env``, environment) and lets
options override them. Expected failures — bad settings, an unreachable database, a schema from the
future — end with one line on stderr naming the problem and a non-zero exit, never a traceback.

Exit statuses: 0 done; 1 a run that failed (every page failed, workers lost, archive damage); 2 a user's error
(a bad setting, no database); 3 (``DRIFT_EXIT``) a crawl whose fields drifted, with a ``drift:`` line per field
(and its ``error:`` line when its pages failed too, as a redesign that hides a required field makes them): the
books keep their last good values until the parser is fixed (``reextract``) or ``book-pipeline drift accept``
confirms the change.
"""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from book_assets import __version__
from book_assets.db import embedded
from book_assets.db.connection import Database, DatabaseUnavailable, mask_url, resolve_database_url
from book_assets.db.migrations import SchemaRefused, current_version, migrate
from book_assets.setting_options import setting_options
from book_assets.settings import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from book_assets.crawl.config import CrawlConfig
    from book_assets.publish import changes, export
    from book_assets.publish.publishing import Publishing
    from book_assets.queue import TaskQueue
    from book_assets.sites.site import Site

P = ParamSpec("P")
R = TypeVar("R")

#: The exit status of a crawl whose fields drifted (:mod:`book_assets.store.drift`).
DRIFT_EXIT = 3
#: Errors a user can fix; shown as one line, exit status 2.
USER_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    DatabaseUnavailable,
    SchemaRefused,
    embedded.EmbeddedError,
)


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn expected failures into ``error: <one line>``: exit status 2 for the user's, 1 for a run's."""
    from book_assets.crawl.drain import WorkersLost

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except WorkersLost as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper


def open_database(settings: Settings, *, migrate_schema: bool = True) -> Database:
    """Connect to the configured database (starting the embedded one if needed) and migrate it."""
    db = Database(resolve_database_url(settings))
    if migrate_schema:
        migrate(db)
    return db


def site_of(settings: Settings) -> Site:
    """The site a command acts on (the ``site`` setting, ``--site``); an unknown name is a one-line error."""
    from book_assets.sites.registry import site_named

    return site_named(settings.site)


#: The site whose tables the commands that read only the books' (``reextract --from-warc``) are written for.
BOOKS_ONLY = "books"


def books_only(settings: Settings, command: str) -> None:
    """Refuse, in one line, a site other than books for ``command``, which reads and writes only the books'
    tables: it never acts on the books when asked for another catalogue."""
    site = site_of(settings)
    if site.name != BOOKS_ONLY:
        raise ConfigError(
            f"invalid setting site (BOOK_PIPELINE_SITE): {command} supports site {BOOKS_ONLY} only, not {site.name!r}"
        )


def publishing_of(settings: Settings, command: str) -> tuple[Site, Publishing]:
    """The site ``command`` acts on and what it publishes (:mod:`book_assets.publish.publishing`); a site whose
    definition publishes nothing yet is refused in one line."""
    site = site_of(settings)
    if site.publishing is None:
        raise ConfigError(
            f"invalid setting site (BOOK_PIPELINE_SITE): {command} reads what a site publishes, and site "
            f"{site.name!r} publishes nothing yet (its definition's publishing is None; see docs/sites.md)"
        )
    return site, site.publishing


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="book-pipeline")
def main() -> None:
    """Crawl books.toscrape.com through a PostgreSQL task queue, orchestrated by Dagster."""
    from book_assets.logs import configure_from_settings

    configure_from_settings()  # once per process: levels, UTC times, run and trace ids (book_assets/logs.py)


@main.result_callback()
def _done(*_: object, **__: object) -> None:
    """A command that finished leaves its objects to the exit: frozen, the interpreter's last garbage
    collection skips them. That collection walks every object the imports made (pydantic's, aiohttp's,
    psycopg2's, Dagster's), 0.2 s of a crawl of the sandbox that takes 3; with them frozen, 0.02 s. Nothing
    is lost: files are closed by then, and atexit handlers and reference counting still run."""
    gc.freeze()


@main.group()
def db() -> None:
    """The PostgreSQL database: embedded server, URL, schema."""


@db.command("up")
@user_errors
def db_up() -> None:
    """Start the embedded server (unless DATABASE_URL is set) and apply migrations."""
    settings = load_settings()
    database = open_database(settings)
    click.echo(f"database ready: {mask_url(database.url)}")


@db.command("down")
@user_errors
def db_down() -> None:
    """Stop the embedded server (data is kept)."""
    settings = load_settings()
    if settings.database_url:
        click.echo("DATABASE_URL is set: nothing embedded to stop")
        return
    was_running = embedded.down(settings.pg_dir)
    click.echo("embedded PostgreSQL stopped" if was_running else "embedded PostgreSQL was not running")


@db.command("url")
@user_errors
def db_url() -> None:
    """Print a URL that psql and psycopg2 accept (starts the embedded server if needed)."""
    click.echo(resolve_database_url(load_settings()))


@db.command("migrate")
@user_errors
def db_migrate() -> None:
    """Apply pending schema migrations (idempotent)."""
    database = Database(resolve_database_url(load_settings()))
    report = migrate(database)
    applied = ", ".join(report.applied) or "nothing to apply"
    click.echo(f"schema at version {report.current_version} ({applied})")


@db.command("status")
@user_errors
def db_status() -> None:
    """Server, schema version and row counts."""
    settings = load_settings()
    if settings.database_url:
        click.echo(f"server:   external {mask_url(settings.database_url)}")
    else:
        state = embedded.status(settings.pg_dir)
        where = f"127.0.0.1:{state.port}" if state.port else "-"
        click.echo(f"server:   embedded PostgreSQL {embedded.POSTGRES_VERSION} at {where}, data {state.pgdata}")
        click.echo(f"running:  {f'yes (pid {state.pid})' if state.running else 'no'}")
        if not state.running:
            return
    database = Database(resolve_database_url(settings, start=False))
    version = current_version(database)
    click.echo(f"schema:   version {version}")
    if version == 0:
        return
    from book_assets.crawl.config import CrawlConfig, make_queue

    config = CrawlConfig.from_settings(settings)
    stats = make_queue(database, config).stats()
    for status in sorted({s for by_status in stats.counts.values() for s in by_status}):
        click.echo(f"tasks:    {status:<12} {stats.total(status)}")
    records = config.site.record_counts(database)
    click.echo(
        f"{config.site.record + 's:':<9} total {records['total']}, unique URLs {records['unique_urls']}, "
        f"with raw HTML {records['with_html']}"
    )


# --------------------------------------------------------------------------- crawling


#: The settings a crawl or a worker takes as options (a pair: a flag shorter than the setting's name).
CRAWL_OPTIONS: tuple[str | tuple[str, str], ...] = (
    "site",
    "base_url",
    "max_pages",
    "categories",
    "workers",
    "concurrency",
    "min_interval_s",
    ("fetch_mode", "--fetch"),
    "javascript",
    ("weights_file", "--weights"),
    ("weights", "--weights-inline"),
    "deep_budget",
    "interleave",
    "conditional_requests",
    "drift_threshold",
    "drift_length_ratio",
    "drift_top_share",
    "metrics_port",
    "metrics_host",
)


def _crawl_config(overrides: dict[str, Any], *, forks_workers: bool = False) -> tuple[str, CrawlConfig]:
    """The database URL (migrated) and the crawl the settings with ``overrides`` describe.

    ``forks_workers``: the command will fork the crawl's worker processes; their fork server starts first, so
    that its imports run beside this process's (the database, the crawl's policies, the seed) instead of after.
    """
    from book_assets.crawl.config import CrawlConfig
    from book_assets.crawl.drain import warm_up

    settings = load_settings(**overrides)
    config = CrawlConfig.from_settings(settings)
    if forks_workers:
        warm_up(config.workers, config.metrics_port)
    with open_database(settings) as database:
        return database.url, config


def _pages_in_flight(config: CrawlConfig) -> str:
    low, high = config.min_concurrency, config.fetch.concurrency
    return str(high) if low == high else f"{low}..{high} (autoscaled)"


@main.command("crawl")
@setting_options(*CRAWL_OPTIONS)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@click.option("--show-config", is_flag=True, help="End the summary with the crawl's resolved configuration (JSON).")
@user_errors
def crawl_cmd(progress: bool, show_config: bool, **overrides: Any) -> None:
    """Seed the queue from the start URL and drain it to completion, then print a summary."""
    from book_assets.crawl.pipeline import crawl

    url, config = _crawl_config(overrides, forks_workers=True)
    click.echo(
        f"crawling {config.base_url} with {config.workers} worker(s) x {_pages_in_flight(config)} pages "
        f"({config.fetch.mode} mode), {config.min_interval_s}s between requests per domain",
        err=True,
    )
    report = crawl(url, config, progress=progress)
    for line in report.summary_lines(show_config=show_config):
        click.echo(line)
    drifted = report.fields is not None and report.drift
    if drifted and report.fields is not None:
        for drift in report.fields.drifts:
            click.echo(f"drift: {drift.line()}", err=True)
    if report.failure:
        click.echo(f"error: {report.failure}", err=True)
    if drifted:  # the day is held whether or not its pages also failed: `drift accept` or a parser fix moves it on
        sys.exit(DRIFT_EXIT)
    if report.failure:
        sys.exit(1)


@main.group("drift")
def drift_group() -> None:
    """Field drift: the fields whose fill rate fell in a crawl, held at their last good values until accepted."""


@drift_group.command("status")
@user_errors
def drift_status() -> None:
    """Every drift no one accepted (crawl, field, figures), the losses it holds, the acceptances recorded, and the
    drifts resolved by judging their crawl again after ``reextract``."""
    from book_assets.store.drift import acceptances, held_losses, resolutions, unaccepted_drift

    with open_database(load_settings()) as database:
        drifts = unaccepted_drift(database)
        held = held_losses(database)
        accepted = acceptances(database)
        resolved = resolutions(database)
    if not drifts:
        click.echo("no field drift held")
    for row in drifts:
        assert row.crawl_id is not None  # read from crawl_fields, whose rows name their crawl
        losses = held.get((row.crawl_id, row.field), 0)
        click.echo(f"crawl {row.crawl_id}: {row.line()}; {losses} losses held")
    for acceptance in accepted[:20]:
        click.echo(acceptance.line())
    for resolution in resolved[:20]:
        click.echo(resolution.line())


@drift_group.command("accept")
@click.option("--crawl", "crawl_id", type=int, required=True, help="The crawl whose drift is accepted (its id).")
@click.option("--field", "field_name", required=True, help="The field whose change is the site's real one.")
@click.option("--by", "by", help="Who accepts it (recorded).  [default: $USER]")
@user_errors
def drift_accept(crawl_id: int, field_name: str, by: str | None) -> None:
    """Accept a field's drift in a crawl as the site's real change: recorded with who and when, its held values
    written (a version each, in the change feed); under Dagster, drift_cleared_sensor then runs the check
    no_field_drift again and the day is published."""
    import getpass

    from book_assets.store.drift import NoSuchDrift, accept, unaccepted_drift

    who = by or getpass.getuser()
    with open_database(load_settings()) as database:
        try:
            acceptance = accept(database, crawl_id, field_name, who)
        except NoSuchDrift as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        still = sorted({row.field for row in unaccepted_drift(database, crawl_id)})
    click.echo(acceptance.line())
    if still:
        click.echo(f"crawl {crawl_id} still drifts ({', '.join(still)}): accept each or fix the parser and reextract")
    else:
        click.echo(
            f"crawl {crawl_id} no longer drifts: under Dagster, drift_cleared_sensor runs the check no_field_drift "
            "again within a minute and the day is published (with the sensor off: launch recheck_drift_job)"
        )


@main.group("site")
def site_group() -> None:
    """Site definitions: start a new catalogue's (docs/sites.md, "Adding a catalogue")."""


@site_group.command("new")
@click.argument("name")
@click.option("--base-url", help="Where its crawl starts (its default_base_url).  [default: a TODO placeholder]")
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The project to write it into.  [default: this project's root]",
)
@click.option(
    "--record",
    "urls",
    multiple=True,
    metavar="URL",
    help="Fetch a listing page, then a detail page (repeat), once each, as the test's recorded pages.",
)
@user_errors
def site_new(name: str, base_url: str | None, into: Path | None, urls: tuple[str, ...]) -> None:
    """Write a definition package book_assets/sites/NAME/ and its tests book_assets_tests/sites/NAME/, every
    site-specific decision marked TODO(NAME); --site NAME reaches it once written."""
    from book_assets.settings import PROJECT_ROOT
    from book_assets.sites.registry import known
    from book_assets.sites.scaffold import PLACEHOLDER_URL, check, scaffold
    from book_assets.sites.scaffold.record import record

    root = into if into is not None else PROJECT_ROOT
    start_url = base_url or (urls[0] if urls else PLACEHOLDER_URL)
    check(name, root, known(), start_url)
    pages = record(urls) if urls else ()
    for path in scaffold(name, root, start_url, known(), pages):
        click.echo(f"wrote {path}")
    click.echo(f"next: fill the TODO({name}) marks until book_assets_tests/sites/{name}/ passes (docs/sites.md)")


@main.command("work")
@setting_options(*CRAWL_OPTIONS)
@user_errors
def work_cmd(**overrides: Any) -> None:
    """Run one long-lived worker (scale out by starting more); SIGTERM finishes or releases its pages."""
    import asyncio

    from book_assets.crawl.config import make_queue
    from book_assets.crawl.stats import WorkerFigures
    from book_assets.crawl.worker import Worker
    from book_assets.db.connection import Database
    from book_assets.observe.metrics import serve_workers

    url, config = _crawl_config(overrides)
    serve_workers(config.metrics_host, config.metrics_port, config.metrics_final_scrape_s)
    stats = asyncio.run(Worker(url, config, until_drained=False).run())
    with Database(url) as db:
        done = WorkerFigures.read(make_queue(db, config), stats, config.detail_kind)
    record = config.site.record
    click.echo(f"worker stopped: {done.pages} pages, {done.books} {record}s, released {stats.released}")


@main.command("status")
@setting_options("site")
@user_errors
def status_cmd(**overrides: Any) -> None:
    """Queue and record counts."""
    from book_assets.crawl.config import CrawlConfig, make_queue
    from book_assets.crawl.pipeline import budget_line
    from book_assets.scraper.errors import ErrorKind

    settings = load_settings(**overrides)
    config = CrawlConfig.from_settings(settings)
    database = open_database(settings)
    queue = make_queue(database, config)
    stats = queue.stats()
    for task_type, by_status in sorted(stats.counts.items()):
        for status, count in sorted(by_status.items()):
            click.echo(f"tasks   {task_type:<8} {status:<12} {count}")
    click.echo(f"oldest pending: {stats.oldest_pending_s or 0:.0f}s; last minute: {stats.completed_last_minute} done")
    click.echo(f"failed tasks: {stats.total('failed')}")
    for task_type, by_kind in sorted(stats.failed_by_kind.items()):
        for kind, count in by_kind.items():
            click.echo(f"failed  {count:>5}  {task_type:<8} {kind}")
    for error, count in stats.top_failures:
        click.echo(f"example {count:>5}  {error[:100]}")
    for domain, by_kind in sorted(stats.last_failure_by_domain.items()):
        if soft := by_kind.get(ErrorKind.SOFT_BLOCK):
            click.echo(f"soft    {soft:>5}  {domain}: pages a soft block turned away (retried)")
    budgets = queue.budget_report(config.detail_kind)
    if budgets:
        click.echo(budget_line(budgets))
    c = config.site.record_counts(database)
    click.echo(
        f"{config.site.record + 's':<7} total {c['total']} / unique URLs {c['unique_urls']} / "
        f"with raw HTML {c['with_html']}; versions {c['versions']}"
    )


@main.command("metrics")
@setting_options("metrics_host", ("queue_metrics_port", "--port"))
@user_errors
def metrics_cmd(**overrides: Any) -> None:
    """Serve the queue's figures to Prometheus (tasks, ages, dead letters, budgets, politeness) until stopped.

    The figures are read from PostgreSQL at each scrape, the same for every host: run one exporter.
    """
    import math
    import signal
    import threading

    from book_assets.crawl.config import CrawlConfig, make_queue
    from book_assets.observe.metrics import serve_queue
    from book_assets.store.lifecycle import last_successful_crawl

    settings = load_settings(**overrides)
    timeout_s = settings.queue_metrics_timeout_s
    open_database(settings).close()  # migrated (or a newer schema refused) before the first scrape
    # A scrape never waits for a reconnect loop: one attempt, within the scrape's bound (QueueCollector).
    database = Database(
        resolve_database_url(settings),
        application_name="book-pipeline-metrics",
        reconnect_for_s=0,
        connect_timeout_s=math.ceil(timeout_s),
    )
    queue = make_queue(database, CrawlConfig.from_settings(settings))
    _server, stop = serve_queue(
        queue,
        settings.metrics_host,
        settings.queue_metrics_port,
        answer_within_s=timeout_s,
        last_success=lambda: last_successful_crawl(database),
    )
    click.echo(f"queue metrics on http://{settings.metrics_host}:{settings.queue_metrics_port}/metrics", err=True)
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    stop()


@main.command("export")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default="jsonl", show_default=True)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file, for a site whose export is one table (books).  [default: <into>/<table>.<fmt>]",
)
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder of the files, one per table (<table>.<fmt>).  [default: .data/exports]",
)
@click.option("--with-html", is_flag=True, help="Include raw_html (where the site keeps a record's page).")
@setting_options("site")
@user_errors
def export_cmd(fmt: export.Format, output: Path | None, into: Path | None, with_html: bool, **overrides: Any) -> None:
    """Write the stored records (all structured fields) to files, one per table, each whole or not at all:
    books.<fmt> for books; quotes.<fmt> and authors.<fmt> for quotes."""
    from book_assets.publish.export import export_tables, write_table

    settings = load_settings(**overrides)
    site, publishing = publishing_of(settings, "export")
    with open_database(settings) as database:
        tables = publishing.export_tables(database, with_html=with_html)
    if output is not None and len(tables) != 1:
        names = ", ".join(t.name for t in tables)
        raise click.UsageError(f"--output names one file; site {site.name} exports {len(tables)} ({names}): use --into")
    if output is not None:
        written = [(output, write_table(tables[0], fmt, output))]
    else:
        written = export_tables(tables, fmt, into or settings.data_dir / "exports")
    for (path, n), table in zip(written, tables, strict=True):
        click.echo(f"wrote {n} {table.name} to {path}")


@main.command("changes")
@click.option(
    "--day",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="The day (UTC) whose changes to print, as YYYY-MM-DD.  [default: today]",
)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Default: standard output.")
@setting_options("site")
@user_errors
def changes_cmd(day: Any, fmt: changes.Format, output: Path | None, **overrides: Any) -> None:
    """The change feed of a day: each book new, changed (with its fields), removed or returned that day; each
    quote and author new or changed (with its fields) that day."""
    from datetime import UTC, datetime

    from book_assets.publish.changes import export_feed, write_changes

    settings = load_settings(**overrides)
    _site, publishing = publishing_of(settings, "changes")
    when = day.date() if day is not None else datetime.now(UTC).date()
    with open_database(settings) as database:
        feed = publishing.changes_of_day(database, when)
    if output is None:
        write_changes(feed.rows, fmt, sys.stdout, feed.columns)
        return
    n = export_feed(feed, fmt, output)
    click.echo(f"wrote {n} changes of {when} to {output}", err=True)


@main.command("reextract")
@click.option("--from-warc", is_flag=True, help="Rebuild the books from the WARC archive alone, not the stored HTML.")
@click.option("--day", type=click.DateTime(formats=["%Y-%m-%d"]), help="With --from-warc: one day (YYYY-MM-DD).")
@click.option(
    "--write",
    is_flag=True,
    help="With --from-warc: store the books as a crawl would (a newer stored fetch wins); default: compare.",
)
@setting_options("site")
@user_errors
def reextract_cmd(from_warc: bool, day: Any, write: bool, **overrides: Any) -> None:
    """Parse every stored raw HTML page again into the structured columns (no network); for books, also rebuild
    the book pages a crawl held for breaking their contract from their kept responses (their tasks then
    completed). For quotes, the authors' stored pages are parsed again (quotes keep no page of their own).

    With --from-warc the books are rebuilt from the archived responses alone and compared with the books
    table (each difference listed, exit status 1 if any), or stored with --write, the held pages among them
    rebuilt from their archived responses and their tasks completed. A WARC file cut short by
    an interrupted worker is named with the byte where it ends (exit status 1); its whole records are used.
    """
    settings = load_settings(**overrides)
    if from_warc:
        books_only(settings, "reextract --from-warc")
        _reextract_from_warc(settings, day.date() if day else None, write=write)
        return
    if day is not None or write:
        raise click.UsageError("--day and --write go with --from-warc")
    from book_assets.crawl.config import CrawlConfig, make_queue
    from book_assets.store.held import reextract_held

    site, publishing = publishing_of(settings, "reextract")
    database = open_database(settings)
    report = publishing.reextract(database)
    click.echo(report.line())
    for line in report.errors:
        click.echo(f"  {line}", err=True)
    if not site.drift_and_removals:  # the held pages and the drift judged again are the books' tables'
        return
    config = CrawlConfig.from_settings(settings)
    queue = make_queue(database, config)
    held = reextract_held(database, queue)
    click.echo(held.line())
    for line in held.errors:
        click.echo(f"  still failing: {line}", err=True)
    _judge_again(database, queue, config)


def _judge_again(database: Database, queue: TaskQueue, config: CrawlConfig) -> None:
    """The drifted crawls judged again from what reextract left stored: one line each."""
    from book_assets.crawl.pipeline import judge_again

    for rejudged in judge_again(database, queue, config):
        click.echo(f"fields judged again: {rejudged.line()}")


def _reextract_from_warc(settings: Settings, day: Any, *, write: bool) -> None:
    from book_assets.archive import archive_files, day_folder
    from book_assets.archive.held import archived_source
    from book_assets.archive.rebuild import compare, rebuild
    from book_assets.archive.rebuild import write as store
    from book_assets.crawl.config import CrawlConfig, make_queue
    from book_assets.store.held import reextract_held

    folder = day_folder(settings.archive_dir, day) if day else settings.archive_dir
    files = archive_files(folder)
    if not files:
        raise ConfigError(f"no WARC files under {folder} (the warc setting archives crawls; see warc_dir)")
    rebuilt = rebuild(files)
    click.echo(rebuilt.line())
    failed = bool(rebuilt.damaged)
    with open_database(settings) as database:
        if write:
            click.echo(store(database, rebuilt).line())
            config = CrawlConfig.from_settings(settings)
            queue = make_queue(database, config)
            click.echo(reextract_held(database, queue, source=archived_source(files, rebuilt.damaged)).line())
            _judge_again(database, queue, config)
        else:
            comparison = compare(database, rebuilt)
            click.echo(comparison.line())
            for line in comparison.differences[:20]:
                click.echo(f"  differs: {line}", err=True)
            failed = failed or bool(comparison.differences)
    for line in rebuilt.unparseable[:20]:
        click.echo(f"  unparseable: {line}", err=True)
    for damage in rebuilt.damaged:
        click.echo(f"error: {damage.line()}", err=True)
    if failed:
        sys.exit(1)


@main.command("replay")
@click.option(
    "--day",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="The archived day (UTC) to replay, as YYYY-MM-DD.  [default: today]",
)
@click.option("--json", "as_json", is_flag=True, help="Print the diff as one JSON object.")
@user_errors
def replay_cmd(day: Any, as_json: bool) -> None:
    """Run the current parsers over a day's WARC archive and diff every field against what was stored by that
    day's end: per field the values new, lost and changed, with samples; a parser change shows its effect
    before it ships. Nothing is written, nothing is fetched."""
    import json
    from datetime import UTC, datetime

    from book_assets.archive import archive_files, day_folder
    from book_assets.archive.rebuild import replay

    settings = load_settings()
    when = day.date() if day is not None else datetime.now(UTC).date()
    files = archive_files(day_folder(settings.archive_dir, when))
    if not files:
        raise ConfigError(f"no WARC files of {when} under {settings.archive_dir} (see the warc and warc_dir settings)")
    with open_database(settings) as database:
        result = replay(database, files, when)
    if as_json:
        click.echo(json.dumps(result.as_json(), sort_keys=True))
    else:
        for line in result.lines():
            click.echo(line)
    for damage in result.damaged:
        click.echo(f"warning: {damage.line()}", err=True)


def _dagster_env(settings: Settings) -> dict[str, str]:
    import os

    from book_assets.dagster_instance import dagster_environment

    env = dict(os.environ)
    env.update(dagster_environment(settings))
    return env


@main.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the web UI binds.")
@click.option("--port", default=3000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--daemon/--no-daemon", default=True, show_default=True, help="Also run the schedule/sensor daemon.")
@user_errors
def ui(host: str, port: int, daemon: bool) -> None:
    """Start the Dagster web UI (and daemon) on the project's instance; SIGTERM or Ctrl-C stops them all."""
    from book_assets.settings import PROJECT_ROOT
    from book_assets.supervise import run_together

    env = _dagster_env(load_settings())
    bindir = Path(sys.executable).parent
    workspace = str(PROJECT_ROOT / "workspace.yaml")
    commands = [[str(bindir / "dagster-webserver"), "-h", host, "-p", str(port), "-w", workspace]]
    if daemon:
        commands.append([str(bindir / "dagster-daemon"), "run", "-w", workspace])
    click.echo(f"Dagster UI on http://{host}:{port} (Ctrl-C to stop)")
    sys.exit(run_together(commands, env, status_when_stopped=0))  # a stop asked for is a clean exit


@main.command("daemon")
@user_errors
def daemon_cmd() -> None:
    """Run the Dagster daemon (schedules, sensors, run queue) on the project's instance."""
    from book_assets.settings import PROJECT_ROOT
    from book_assets.supervise import run_together

    env = _dagster_env(load_settings())
    bindir = Path(sys.executable).parent
    sys.exit(run_together([[str(bindir / "dagster-daemon"), "run", "-w", str(PROJECT_ROOT / "workspace.yaml")]], env))


@main.command("demo")
@click.option("--port", default=8800, show_default=True, type=click.IntRange(0, 65535), help="Sandbox port.")
@click.option("--day", default=0, show_default=True, type=click.IntRange(0), help="Simulated day of the sandbox.")
@setting_options(("fetch_mode", "--fetch"), "workers", "concurrency")
@click.option("--supervised/--in-process", default=True, hidden=True, help="Run the demo in a child process group.")
@user_errors
def demo_cmd(port: int, day: int, supervised: bool, **overrides: Any) -> None:
    """Crawl the local replica through Dagster (all three assets and their checks), then summarize."""
    if supervised:
        # In-process Dagster delays SIGTERM until the run ends (minutes, crawling on); as a process group of
        # its own, the demo and everything it started (workers, Playwright, Chromium) stop when we are asked.
        import os

        from book_assets.supervise import run_together

        child = [
            sys.executable,
            "-m",
            "book_assets.cli",
            "demo",
            "--in-process",
            "--port",
            str(port),
            "--day",
            str(day),
        ]
        flags = {"fetch_mode": "--fetch", "workers": "--workers", "concurrency": "--concurrency"}
        for name, value in overrides.items():
            if value is not None:
                child += [flags[name], str(value)]
        sys.exit(run_together([child], os.environ))
    from book_assets.demo import run_demo

    report = run_demo(load_settings(), port=port, day=day, overrides=overrides, echo=click.echo)
    for line in report.summary_lines():
        click.echo(line)
    click.echo("browse the run, its metadata and checks with: make ui")
    if not report.success or not all(report.checks.values()):
        sys.exit(1)


def _register_optional_commands() -> None:
    """Subcommands that live beside the modules they drive."""
    try:
        from book_assets.sandbox.cli import sandbox
    except ImportError:  # pragma: no cover - during development only
        return
    main.add_command(sandbox)


_register_optional_commands()

if __name__ == "__main__":
    main()
