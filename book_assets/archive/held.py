"""The archived responses of the pages a crawl held at the door: ``book-pipeline reextract --from-warc``.

A book page that failed its contract (``missing_field``, ``bad_value``) was archived before it was parsed, as
every page the crawl used is. :func:`newest_responses` finds, for each held URL, its newest 2xx response in
the WARC files, as the fetch that failed (:func:`~book_assets.archive.rebuild.as_fetch`), so
:func:`~book_assets.store.held.reextract_held` can rebuild the held day from the archive alone when the
stored responses are gone (another machine, a restored backup). The files are read as a stream per call:
only the wanted URLs' newest responses are held.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from book_assets.archive.reader import ArchiveDamage, responses
from book_assets.archive.rebuild import as_fetch
from book_assets.scraper.fetching import NOT_MODIFIED, FetchResult
from book_assets.urls import canonical_url


def newest_responses(paths: list[Path], urls: Collection[str], damaged: list[ArchiveDamage]) -> dict[str, FetchResult]:
    """The newest 2xx response of each of ``urls`` (canonical) in ``paths``, by URL, at the time a later 304
    confirmed it; damage is appended."""
    wanted = set(urls)
    found: dict[str, FetchResult] = {}
    confirmed: dict[str, datetime] = {}
    for archived in responses(paths, damaged):
        url = canonical_url(archived.url)
        if url not in wanted:
            continue
        if archived.status == NOT_MODIFIED:
            confirmed[url] = max(archived.fetched_at, confirmed.get(url, archived.fetched_at))
        elif 200 <= archived.status < 300 and (url not in found or found[url].fetched_at <= archived.fetched_at):
            found[url] = as_fetch(archived)
    for url, when in confirmed.items():  # as rebuild does: a later 304 moves the fetch time, nothing else
        if url in found and found[url].fetched_at < when:
            found[url] = replace(found[url], fetched_at=when)
    return found


def archived_source(paths: list[Path], damaged: list[ArchiveDamage]) -> Callable[[list[str]], dict[str, FetchResult]]:
    """:func:`newest_responses` of ``paths`` as the source of :func:`~book_assets.store.held.reextract_held`."""
    return lambda urls: newest_responses(paths, urls, damaged)
