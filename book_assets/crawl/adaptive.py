"""Adaptive fetching: render in the browser only the page types whose records rendering changes.

Why: plain HTTP crawls the sandbox several times faster than the browser (``benchmarks/browser_bench.py``,
``docs/benchmarks.md``), yet the books' site serves all its data in the HTML. Crawlee's
``AdaptivePlaywrightCrawler`` answers the same question per page by rendering a sample; here the answer is
kept per (domain, page type) in PostgreSQL (``adaptive_decisions``), so every worker on every host shares it:

- ``probe``: a page is fetched both ways; its HTTP body and the browser's rendered DOM are parsed and the
  records compared (the site's :meth:`~book_assets.sites.site.Site.records_agree`). ``adaptive_probe_pages``
  agreements switch the page type to ``http``. A worker renders one probe per page type at a time and fetches
  the rest plain meanwhile: storage prefers the served HTML whenever it is a complete page (the site's
  ``parse_detail``), so a plain page stores exactly what the browser would, and one that does not parse is
  rendered anyway (see ``http``).
- ``http``: pages are fetched plain; a sample (``adaptive_sample_rate``, chosen by a hash of the URL so a
  retry samples the same pages) is re-checked in the browser, and a page whose plain HTML does not parse is
  rendered before it is given up.
- ``browser``: any disagreement, found by any worker, switches that page type to the browser for the rest
  of the crawl (modes only move forward).

Probes and sampled re-checks are rendered by one worker per host, its *renderer* (:class:`RendererRole`, a
lock file every worker of the crawl on the host tries): starting a browser costs far more CPU than a render,
so a browser in every worker for a handful of renders would cost the adaptive crawl a large share of plain
HTTP's speed (``benchmarks/browser_bench.py``). The other workers
fetch plain and check nothing; the renderer samples its own pages at the rate times the crawl's workers, so
the crawl's share of re-checked pages stays near the rate. A worker starts a browser only when a render is
due: as the renderer, or for a page type switched to the browser, or for a plain page that does not parse.
A re-check of a page type already decided ``http`` renders with scripts off unless ``javascript=on``: as in
browser mode's ``auto``, scripts run only where a page type has shown it needs them (its probes ran them).

Page types are the site's page kinds, the crawl's task types (books: ``listing``, ``detail``; a kind whose pages
need JavaScript is a kind of its own, so only its pages are rendered). Counts are flushed to PostgreSQL at most
once a second per page type (and at once after a check), which is also how often a worker re-reads the
shared mode; a page fetched plain in that second that needed rendering fails to parse and is rendered
anyway, so a stale mode costs time, never a book.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from book_assets.db.connection import Database
from book_assets.sql import load_queries

Q = load_queries("adaptive")
#: How long a worker trusts its copy of a shared decision before flushing its counts and re-reading it.
REFRESH_S = 1.0


class Mode(StrEnum):
    """How a page type is fetched in adaptive mode."""

    PROBE = "probe"
    HTTP = "http"
    BROWSER = "browser"


@dataclass(frozen=True)
class Decision:
    """One (domain, page type)'s shared decision and what led to it."""

    domain: str
    page_type: str
    mode: Mode
    agreements: int
    disagreements: int
    rendered: int
    plain: int
    decided_at: datetime | None = None

    def line(self) -> str:
        """One summary line: the mode, then the evidence."""
        return (
            f"adaptive {self.domain} {self.page_type}: {self.mode} ({self.rendered} rendered, {self.plain} plain; "
            f"{self.agreements} agreed, {self.disagreements} disagreed)"
        )


def sampled(url: str, rate: float) -> bool:
    """Whether ``url`` is in the re-check sample: a stable hash, so every worker and retry agrees."""
    if rate <= 0:
        return False
    digest = int.from_bytes(hashlib.blake2b(url.encode(), digest_size=8).digest(), "big")
    return digest / 2**64 < rate


@dataclass
class _Pending:
    """Counts not yet written to PostgreSQL for one (domain, page type)."""

    agreements: int = 0
    disagreements: int = 0
    rendered: int = 0
    plain: int = 0

    def any(self) -> bool:
        return bool(self.agreements or self.disagreements or self.rendered or self.plain)


@dataclass
class AdaptiveState:
    """One worker's view of the shared decisions, with the counts it has yet to write.

    All methods that touch the database are plain functions meant for the worker's database thread.
    """

    db: Database
    probe_pages: int
    pending: dict[tuple[str, str], _Pending] = field(default_factory=dict)
    modes: dict[tuple[str, str], tuple[Mode, float]] = field(default_factory=dict)

    def cached(self, domain: str, page_type: str) -> Mode | None:
        """The mode known for this key if it is fresh (under ``REFRESH_S``), else None: call :meth:`sync`."""
        known = self.modes.get((domain, page_type))
        if known is None or time.monotonic() - known[1] > REFRESH_S:
            return None
        return known[0]

    def known(self, domain: str, page_type: str) -> Mode | None:
        """The mode last read or decided for this key, however old (None: never read)."""
        known = self.modes.get((domain, page_type))
        return None if known is None else known[0]

    def count(
        self, domain: str, page_type: str, *, rendered: int = 0, plain: int = 0, agreed: bool | None = None
    ) -> None:
        """Add counts (and a check's outcome) to what this worker will write at its next :meth:`sync`."""
        pending = self.pending.setdefault((domain, page_type), _Pending())
        pending.rendered += rendered
        pending.plain += plain
        if agreed is True:
            pending.agreements += 1
        elif agreed is False:
            pending.disagreements += 1
            # Act on a disagreement at once, before the shared row says so.
            self.modes[(domain, page_type)] = (Mode.BROWSER, time.monotonic())

    def sync(self, domain: str, page_type: str) -> Mode:
        """Write this key's pending counts and read the shared mode (database thread)."""
        pending = self.pending.pop((domain, page_type), _Pending())
        params = {
            "domain": domain,
            "page_type": page_type,
            "probe_pages": self.probe_pages,
            "agreements": pending.agreements,
            "disagreements": pending.disagreements,
            "rendered": pending.rendered,
            "plain": pending.plain,
        }
        mode = Mode(self.db.query(Q["record_pages"], params)[0]["mode"])
        self.modes[(domain, page_type)] = (mode, time.monotonic())
        return mode

    def flush(self) -> None:
        """Write every pending count (database thread); the worker calls it before it exits."""
        for domain, page_type in list(self.pending):
            if self.pending[(domain, page_type)].any():
                self.sync(domain, page_type)


class RendererRole:
    """Whether this worker is its host's renderer for one crawl: the holder of an exclusive lock on a file.

    The file is named by ``key`` (the crawl's database), so crawls of different databases on one host have a
    renderer each. The kernel drops the lock when its holder exits or is killed, and the other workers try
    it again at most every ``REFRESH_S``, so a lost renderer is replaced.
    """

    def __init__(self, key: str, folder: Path | None = None) -> None:
        digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
        self.path = (folder or Path(tempfile.gettempdir())) / f"book-pipeline-renderer-{digest}.lock"
        self._fd: int | None = None
        self._tried_at = float("-inf")

    @property
    def held(self) -> bool:
        """True while this worker holds the role; tries to take it when last tried over ``REFRESH_S`` ago."""
        if self._fd is None and time.monotonic() - self._tried_at >= REFRESH_S:
            self._tried_at = time.monotonic()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
            else:
                self._fd = fd
        return self._fd is not None

    def release(self) -> None:
        """Give the role up (closing the file drops the lock)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def forget_decisions(db: Database, domains: list[str]) -> None:
    """Start a crawl's decisions afresh for ``domains``."""
    db.query(Q["forget_decisions"], {"domains": domains})


def list_decisions(db: Database) -> list[Decision]:
    """Every stored decision, for the summary and Dagster metadata."""
    return [
        Decision(
            domain=row["domain"],
            page_type=row["page_type"],
            mode=Mode(row["mode"]),
            agreements=row["agreements"],
            disagreements=row["disagreements"],
            rendered=row["rendered"],
            plain=row["plain"],
            decided_at=row["decided_at"],
        )
        for row in db.query(Q["list_decisions"])
    ]
