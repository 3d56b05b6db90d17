"""``book-pipeline sandbox quotes``: the quotes.toscrape.com stand-in in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8801, show_default=True, help="0 picks a free port.")
@click.option("--log-requests/--no-log-requests", default=True, show_default=True, help="A line per request on stderr.")
def quotes(host: str, port: int, log_requests: bool) -> None:
    """The local stand-in for quotes.toscrape.com: its own application (zytedata/spidyquotes) and data."""
    from book_assets.sandbox.quotes import truth  # Flask and the data load only when the command runs
    from book_assets.sandbox.quotes.server import QuotesServer

    server = QuotesServer(host, port, log_requests=log_requests)
    try:
        server.start()
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    click.echo(
        f"Quotes stand-in serving {len(truth.quotes())} quotes by {len(truth.authors())} authors at {server.url}/"
    )
    click.echo(f"Pages written by JavaScript: {server.url}{truth.JS_LISTING_PREFIX}", err=True)
    try:
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        click.echo("Quotes stand-in stopped.", err=True)
