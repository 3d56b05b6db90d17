"""``book-pipeline sandbox serve``: run the replica in the foreground until Ctrl-C or SIGTERM.

The group is importable on its own (``from book_assets.sandbox.cli import sandbox``) so the main CLI can
attach it with ``main.add_command(sandbox)``, and runnable directly with
``python -m book_assets.sandbox.cli serve --port 8800``.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from book_assets.sandbox.catalogue import BOOK_COUNT, CATEGORY_COUNT
from book_assets.sandbox.faults import Faults, parse_action
from book_assets.sandbox.fleet import SandboxFleet
from book_assets.sandbox.quotes.cli import quotes
from book_assets.sandbox.redesign import DROP_SHARE, Change, Redesign, parse_changes
from book_assets.sandbox.server import SandboxServer

_RATE = click.FloatRange(0.0, 1.0)
_SECONDS = click.FloatRange(min=0.0)


def _parse_scripts(values: tuple[str, ...]) -> dict[str, list[str]]:
    scripts: dict[str, list[str]] = {}
    for value in values:
        path, sep, steps = value.partition("=")
        if not sep or not path.startswith("/") or not steps:
            raise click.BadParameter(f"expected PATH=STEP,STEP,... (e.g. /index.html=503,503), got {value!r}")
        try:
            scripts[path] = [parse_action(step).value for step in steps.split(",")]
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return scripts


def _parse_redesign_changes(ctx: click.Context, param: click.Parameter, value: str | None) -> frozenset[Change] | None:
    if value is None:
        return None
    try:
        return parse_changes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group()
def sandbox() -> None:
    """The local replica of books.toscrape.com (deterministic, with fault injection)."""


@sandbox.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8800, show_default=True, help="0 picks a free port.")
@click.option("--seed", type=int, default=0, show_default=True, help="Catalogue and fault seed.")
@click.option("--day", type=click.IntRange(min=0), default=0, show_default=True, help="Simulated day (changes).")
@click.option(
    "--books",
    type=click.IntRange(min=1),
    default=BOOK_COUNT,
    show_default=True,
    help="Books on day 0, over all hosts (the default is the live site's catalogue).",
)
@click.option(
    "--categories", type=click.IntRange(min=1), default=CATEGORY_COUNT, show_default=True, help="Categories per host."
)
@click.option(
    "--hosts",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Sites on consecutive ports from --port, each its own domain and catalogue (seed + i).",
)
@click.option("--js-mode", is_flag=True, help="Book pages carry their data only in a script (needs a browser).")
@click.option("--latency", type=_SECONDS, default=0.0, show_default=True, help="Fixed delay per page (s).")
@click.option("--jitter", type=_SECONDS, default=0.0, show_default=True, help="Extra random delay up to this (s).")
@click.option("--error-rate", type=_RATE, default=0.0, show_default=True, help="Probability of 500/503.")
@click.option("--rate-limit-rate", type=_RATE, default=0.0, show_default=True, help="Probability of 429.")
@click.option("--retry-after", type=click.IntRange(min=0), default=1, show_default=True, help="429 Retry-After.")
@click.option("--reset-rate", type=_RATE, default=0.0, show_default=True, help="Probability of a TCP reset.")
@click.option("--hang-rate", type=_RATE, default=0.0, show_default=True, help="Probability of a hang.")
@click.option("--hang-seconds", type=_SECONDS, default=30.0, show_default=True, help="Length of a hang.")
@click.option("--truncate-rate", type=_RATE, default=0.0, show_default=True, help="Probability of a cut body.")
@click.option(
    "--bomb-rate", type=_RATE, default=0.0, show_default=True, help="Probability of a gzip body inflating to 1 GiB."
)
@click.option(
    "--soft-block-rate",
    type=_RATE,
    default=0.0,
    show_default=True,
    help="Probability of a 200 that is not the page: a bot challenge, a login wall or an empty body.",
)
@click.option(
    "--redesign-day",
    type=click.IntRange(min=0),
    default=None,
    help="Serve the --redesign markup changes from this simulated day on; earlier days, and every day without "
    "this option, render the live site's markup.",
)
@click.option(
    "--redesign",
    "redesign_changes",
    metavar="CHANGES",
    callback=_parse_redesign_changes,
    default=None,
    help="Comma-separated changes from --redesign-day (default: all): "
    "rating_class (star-rating becomes rating-stars), description_id (product_description becomes "
    "product-description), upc_moved (UPC in a dl, not the table), description_dropped (no description in "
    "some categories), description_teaser (a few words of the description where the text was), "
    "rating_widget (a one-star widget above the rating).",
)
@click.option(
    "--redesign-drop-share",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=DROP_SHARE,
    show_default=True,
    help="Share of categories whose book pages lose the description under description_dropped.",
)
@click.option(
    "--script",
    "scripts",
    multiple=True,
    metavar="PATH=STEPS",
    help="Scripted failures, consumed in order, e.g. /index.html=503,reset,soft_block (repeatable).",
)
@click.option("--max-connections", type=click.IntRange(min=1), default=None, help="Cap on open connections.")
@click.option(
    "--over-capacity",
    type=click.Choice(["wait", "refuse"]),
    default="wait",
    show_default=True,
    help="Connections beyond the cap wait for a slot or are reset.",
)
@click.option(
    "--robots-txt",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="File served as /robots.txt (default: 404, as on the live site).",
)
def serve(
    host: str,
    port: int,
    seed: int,
    day: int,
    books: int,
    categories: int,
    hosts: int,
    js_mode: bool,
    latency: float,
    jitter: float,
    error_rate: float,
    rate_limit_rate: float,
    retry_after: int,
    reset_rate: float,
    hang_rate: float,
    hang_seconds: float,
    truncate_rate: float,
    bomb_rate: float,
    soft_block_rate: float,
    redesign_day: int | None,
    redesign_changes: frozenset[Change] | None,
    redesign_drop_share: float,
    scripts: tuple[str, ...],
    max_connections: int | None,
    over_capacity: str,
    robots_txt: Path | None,
) -> None:
    """Serve the sandbox in the foreground; prints its URL, stops on Ctrl-C or SIGTERM."""
    try:
        faults = Faults(
            latency_s=latency,
            jitter_s=jitter,
            error_rate=error_rate,
            rate_limit_rate=rate_limit_rate,
            retry_after_s=retry_after,
            reset_rate=reset_rate,
            hang_rate=hang_rate,
            hang_s=hang_seconds,
            truncate_rate=truncate_rate,
            bomb_rate=bomb_rate,
            soft_block_rate=soft_block_rate,
            scripted=_parse_scripts(scripts),
            max_connections=max_connections,
            over_capacity="refuse" if over_capacity == "refuse" else "wait",
            robots_txt=robots_txt.read_text(encoding="utf-8") if robots_txt else None,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if redesign_changes is not None and redesign_day is None:
        raise click.UsageError("--redesign needs --redesign-day: the simulated day the changes land")
    redesign = (
        None
        if redesign_day is None
        else Redesign(redesign_day, redesign_changes or frozenset(Change), redesign_drop_share)
    )
    if books < hosts:
        raise click.UsageError(f"--books {books} cannot fill --hosts {hosts}: each host needs at least one book")
    if hosts > 1:
        fleet = SandboxFleet(
            hosts,
            seed=seed,
            day=day,
            books=books,
            categories=categories,
            faults=faults,
            js_mode=js_mode,
            host=host,
            port=port,
            redesign=redesign,
        )
        try:
            fleet.start()
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host} from port {port}: {exc.strerror or exc}") from None
        _serve_until_stopped(fleet.servers)
        return
    server = SandboxServer(
        seed=seed,
        day=day,
        books=books,
        categories=categories,
        faults=faults,
        js_mode=js_mode,
        host=host,
        port=port,
        redesign=redesign,
    )
    try:
        server.start()
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    _serve_until_stopped([server])


def _serve_until_stopped(servers: list[SandboxServer]) -> None:
    """Keep started ``servers`` up until Ctrl-C or SIGTERM; prints every site's URL."""
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    for server in servers:
        seed, day = server.catalogue.seed, server.catalogue.day
        click.echo(
            f"Sandbox serving {len(server.catalogue)} books (seed {seed}, day {day}) at {server.url}/", err=False
        )
    control = f"{servers[0].url}/__sandbox__/"
    click.echo(f"Stats: {control}stats  Reset: {control}reset", err=True)
    click.echo(f"Next day: POST {control}day  Fault burst: POST {control}faults?error_rate=0.3&seconds=60", err=True)
    redesign = servers[0].redesign
    if redesign is not None:
        changes = ",".join(sorted(c.value for c in redesign.changes))
        click.echo(f"Redesign from day {redesign.day}: {changes}", err=True)
    click.echo(f"Redesign: POST {control}redesign?day=N&changes=rating_class,...  (changes=none: off)", err=True)
    if len(servers) > 1:
        click.echo("Each host has its own /__sandbox__/ endpoints.", err=True)
    try:
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        for server in servers:
            server.stop()
        click.echo("Sandbox stopped.", err=True)


sandbox.add_command(quotes)

if __name__ == "__main__":
    sandbox()
