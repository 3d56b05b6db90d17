"""Removed books: what the category listings showed in a crawl, and which books they no longer show.

A book is *removed* when a complete listing of its category, in this crawl, no longer shows it; it is marked
(``books.removed_at`` and a ``removed`` event in ``book_presence``), never deleted, and marked back
(``returned``) when a listing shows it again. Removal is decided only from positive evidence that a
category's listing was seen whole, so a partial crawl never removes anything it did not see:

* every listing page is recorded (``listing_pages``) in the transaction that completes its task, with its
  category, depth, next page, "N results" and the cards it showed (:func:`record_listing`);
* when the crawl reports, a (host, category) counts as complete only if the chain of its pages processed
  since the crawl started runs from a first page (depth 1) through every ``next`` link to a page without one,
  and the cards on the chain add up to the "N results" every page of it shows (:func:`walk_chains`). A failed,
  pending or never-enqueued page (``max_pages``), a category left out by ``--categories``, a loop, a first
  page without a result count, or a listing that changed while it was read (the counts disagree) all leave
  the category undecided;
* only a page that proved itself the listing its task asked for is recorded: a page with no card and no
  result count (a 200 error page in the site's template) or one of another category or another place in the
  chain fails its task instead (:func:`~book_assets.crawl.discovery.check_listing`), leaving a gap;
* only books whose category and host are complete, and whose URL no listing page of this crawl showed, are
  marked removed; books of other hosts or categories are never touched.

A deep budget limits detail pages only, never listing pages, so a budgeted crawl decides as a full one does.
A retry of the failures (:func:`~book_assets.crawl.pipeline.retry_failed`) sees only the pages it
retried and decides nothing. Only the run that opened a crawl (or a report that names it) settles it, and
only once no listing page is left in the queue (:func:`~book_assets.crawl.pipeline.settle_removals`): a
drain-only run, perhaps on another host while the crawl's own run is still at work, never closes it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from book_assets.categories import is_one_of
from book_assets.db.connection import Cursor, Database
from book_assets.sql import load_queries
from book_assets.store.lifecycle import OpenCrawl

Q = load_queries("changes")


@dataclass(frozen=True)
class ListedPage:
    """One processed listing page, as :func:`walk_chains` needs it."""

    url: str
    category: str | None
    depth: int
    next_url: str | None
    result_count: int | None = None
    cards: int = 0
    sidebar: tuple[str, ...] = ()

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc


@dataclass(frozen=True)
class Removals:
    """What a crawl's end decided (or why it decided nothing)."""

    decided: bool
    removed: int = 0
    returned: int = 0
    complete: int = 0
    #: ``"host category: why"`` for each (host, category) whose listing was not seen whole.
    incomplete: tuple[str, ...] = ()
    #: Why nothing was decided, when ``decided`` is false.
    reason: str = ""
    #: Categories the start page linked that no listing page of this crawl listed and the crawl did not ask for.
    not_crawled: int = 0
    #: ``"category (host)"`` of each category the crawl asked for whose first listing page did not complete
    #: (it failed, as an error page in the site's template does, or is still pending).
    unreached: tuple[str, ...] = ()

    def line(self) -> str:
        """The crawl summary's line about removals."""
        if not self.decided:
            return f"removed: not decided ({self.reason}); returned: {self.returned}"
        line = (
            f"removed: {self.removed} books no longer listed, marked (not deleted); returned: {self.returned}; "
            f"decided in {self.complete} categories whose every listing page completed"
        )
        skipped = []
        if self.incomplete:
            shown = "; ".join(self.incomplete[:3]) + ("; ..." if len(self.incomplete) > 3 else "")
            skipped.append(f"{len(self.incomplete)} with incomplete listings ({shown})")
        if self.unreached:
            shown = "; ".join(self.unreached[:3]) + ("; ..." if len(self.unreached) > 3 else "")
            skipped.append(f"{len(self.unreached)} whose first listing page did not complete ({shown})")
        if self.not_crawled:
            skipped.append(f"{self.not_crawled} not crawled")
        if skipped:
            line += "; not decided in " + ", ".join(skipped)
        return line


# --- recording, in the listing task's transaction ---------------------------------------------------------


def record_listing(cur: Cursor, row: dict[str, Any]) -> None:
    cur.execute(Q["record_listing_page"], row)


# --- a crawl's end ----------------------------------------------------------------------------------------


def books_listed_since(db: Database, since: datetime) -> int:
    """Books the listing pages processed since ``since`` showed, each once: the books a discovery found."""
    return int(db.query(Q["books_listed_since"], {"since": since})[0]["n"])


def chains_cut_since(db: Database, since: datetime, max_depth: int) -> int:
    """Listing chains processed since ``since`` whose page at ``max_depth`` had a next link, not followed."""
    return int(db.query(Q["chains_cut_since"], {"since": since, "max_depth": max_depth})[0]["n"])


def walk_chains(pages: Iterable[ListedPage]) -> dict[tuple[str, str], str | None]:
    """Per (host, category) with a first page: None when its listing was seen whole, else why not.

    A category with several first pages (two spellings of one listing) is complete only if each chain is.
    """
    by_url = {p.url: p for p in pages}
    verdicts: dict[tuple[str, str], str | None] = {}
    for first in sorted(by_url.values(), key=lambda p: p.url):
        if first.depth != 1 or first.category is None:
            continue
        key = (first.host, first.category)
        gap = _chain_gap(first, by_url)
        verdicts[key] = verdicts[key] if verdicts.get(key) else gap
    return verdicts


def _chain_gap(first: ListedPage, by_url: dict[str, ListedPage]) -> str | None:
    if first.result_count is None:
        return f"{first.url} shows no result count"
    seen: set[str] = set()
    page, cards = first, 0
    while True:
        if page.category != first.category:
            return f"{page.url} lists {page.category!r}"
        if page.result_count is not None and page.result_count != first.result_count:
            return f"{page.url} shows {page.result_count} results, its first page {first.result_count}"
        seen.add(page.url)
        cards += page.cards
        if page.next_url is None:
            break
        following = by_url.get(page.next_url)
        if following is None:
            return f"{page.next_url} not completed in this crawl"
        if following.url in seen:
            return f"{following.url} loops back"
        page = following
    if first.result_count is not None and cards != first.result_count:
        return f"{cards} cards on its pages but {first.result_count} results shown"
    return None


def settle(
    db: Database,
    crawl: OpenCrawl | None,
    *,
    undecided: str | None = None,
    categories: Collection[str] | None = None,
) -> Removals:
    """End ``crawl``: mark back the removed books its listings show, mark removed the books they no longer show.

    ``undecided`` gives the reason to decide no removals (books listed again are still marked back).
    ``categories`` are those the crawl asked for (None: every one), to tell a linked category whose listing
    did not complete from one left out.
    Idempotent: a crawl already closed reports what it decided; an abandoned one (a later crawl began before
    it reported) decides nothing.
    """
    if crawl is None:
        return Removals(decided=False, reason=undecided or "no crawl was started: the queue was drained unseeded")
    pages = [_listed_page(r) for r in db.query(Q["listing_pages_since"], {"since": crawl.started_at})]
    verdicts = walk_chains(pages)
    complete = sorted(key for key, gap in verdicts.items() if gap is None)
    incomplete = tuple(f"{cat} ({host}): {gap}" for (host, cat), gap in sorted(verdicts.items()) if gap)
    linked = {(p.host, name) for p in pages for name in p.sidebar}
    missing = linked - set(verdicts)
    unreached = tuple(sorted(f"{name} ({host})" for host, name in missing if is_one_of(name, categories)))
    not_crawled = len(missing) - len(unreached)
    if undecided is None and not complete:
        undecided = "no category's listing pages all completed in this crawl"
    verdict = _Verdict(tuple(h for h, _ in complete), tuple(c for _, c in complete), incomplete, not_crawled, unreached)
    return db.run(lambda cur: _close(cur, crawl, verdict, undecided))


@dataclass(frozen=True)
class _Verdict:
    """What the listing pages decided: the complete (host, category) pairs as two parallel tuples."""

    hosts: tuple[str, ...]
    categories: tuple[str, ...]
    incomplete: tuple[str, ...]
    not_crawled: int
    unreached: tuple[str, ...]


def _close(cur: Cursor, crawl: OpenCrawl, verdict: _Verdict, undecided: str | None) -> Removals:
    """Mark back the books listed again, mark removed (unless ``undecided``) and close ``crawl``, under its lock."""
    params = {"since": crawl.started_at, "crawl_id": crawl.id}
    cur.execute(Q["lock_crawl"], {"id": crawl.id})
    row = cur.fetchone()
    if row is not None and row["outcome"] == "abandoned":
        return Removals(decided=False, reason=row["note"] or "abandoned")
    if row is not None and row["outcome"] in ("decided", "undecided"):
        return Removals(
            decided=row["outcome"] == "decided",
            removed=row["removed"] or 0,
            returned=row["returned"] or 0,
            reason=row["note"] or "",
        )
    cur.execute(Q["mark_returned"], params)
    returned = len(cur.fetchall())
    removed = 0
    if undecided is None:
        cur.execute(Q["mark_removed"], {**params, "hosts": list(verdict.hosts), "categories": list(verdict.categories)})
        removed = len(cur.fetchall())
    cur.execute(
        Q["close_crawl"],
        {
            "id": crawl.id,
            "outcome": "decided" if undecided is None else "undecided",
            "complete": len(verdict.categories),
            "incomplete": len(verdict.incomplete),
            "removed": removed,
            "returned": returned,
            "note": undecided,
        },
    )
    if undecided is not None:
        return Removals(decided=False, returned=returned, reason=undecided)
    return Removals(
        decided=True,
        removed=removed,
        returned=returned,
        complete=len(verdict.categories),
        incomplete=verdict.incomplete,
        not_crawled=verdict.not_crawled,
        unreached=verdict.unreached,
    )


def _listed_page(row: dict[str, Any]) -> ListedPage:
    return ListedPage(
        url=row["url"],
        category=row["category"],
        depth=row["depth"],
        next_url=row["next_url"],
        result_count=row["result_count"],
        cards=row["cards"],
        sidebar=tuple(row["sidebar"] or ()),
    )
