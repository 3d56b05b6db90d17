"""robots.txt is obeyed: disallowed URLs are never requested, Crawl-delay spaces every worker's requests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest

from book_assets.crawl.config import DETAIL, DETAIL_PRIORITY, make_queue
from book_assets.crawl.pipeline import crawl, drain, finish, join, prepare
from book_assets.crawl.robots import Q as ROBOTS_SQL
from book_assets.crawl.robots import RobotsGate, Verdict, origin_of
from book_assets.crawl.stats import WorkerFigures
from book_assets.crawl.worker import Worker
from book_assets.db.connection import Database
from book_assets.sandbox import Faults
from book_assets.sandbox.server import SandboxServer
from book_assets_tests.crawl.conftest import sandbox_config

ROBOTS = "/robots.txt"
#: How far before its slot a request may reach the site: both are readings of this host's clock, and a worker
#: waits for the latest moment its slot can be. How late one arrives (a busy machine) is not a promise.
EARLY_S = 0.005


def _books_of(server: SandboxServer, category: str) -> list[str]:
    return sorted(p for p, b in server.catalogue.ground_truth().items() if b.category == category)


def _category_path(server: SandboxServer, name: str) -> str:
    return next(c.url_path for c in server.catalogue.categories if c.name == name)


def _enqueue_details(db: Database, config: Any, server: SandboxServer, paths: list[str]) -> None:
    queue = make_queue(db, config)
    for path in paths:
        queue.enqueue(DETAIL, {"url": server.url_for(path), "category": "Poetry"}, priority=DETAIL_PRIORITY)


def _one_book_queued(db: Database, sandbox_factory: Any, interval: float) -> tuple[SandboxServer, Any]:
    """A sandbox behind a politeness interval, and a crawl of it prepared with one Poetry book's detail queued."""
    server = sandbox_factory()
    config = sandbox_config(server.url, min_interval_s=interval, allowed_domains=["127.0.0.1"])
    prepare(db, config)
    _enqueue_details(db, config, server, _books_of(server, "Poetry")[:1])
    return server, config


def test_a_disallowed_category_and_book_are_never_fetched_and_fail_as_robots_disallowed(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    plain = sandbox_factory()
    travel = _category_path(plain, "Travel")
    poetry_books = _books_of(plain, "Poetry")
    banned_book = poetry_books[0]
    robots = (
        "User-agent: *\n"
        f"Disallow: {travel.rsplit('/', 1)[0]}/\n"
        f"Disallow: {banned_book}\n"
        "\nUser-agent: some-other-bot\nDisallow: /\n"
    )
    server = sandbox_factory(faults=Faults(robots_txt=robots))
    report = crawl(database_url, sandbox_config(server.url, categories=("Travel", "Poetry"), workers=2))

    hits = server.stats().hits
    assert hits[ROBOTS] == 1  # once per domain per crawl, for both workers
    fetched_travel = [p for p in hits if p.startswith(travel.rsplit("/", 1)[0]) or p in _books_of(server, "Travel")]
    assert fetched_travel == []
    assert banned_book not in hits
    assert all(hits.get(p) == 1 for p in poetry_books[1:])
    assert report.failed_by_reason == {"robots_disallowed": 2}
    failed = db.query("SELECT payload->>'url' AS url, error, attempts FROM tasks WHERE status = 'failed'")
    assert {r["url"] for r in failed} == {server.url_for(travel), server.url_for(banned_book)}
    assert all(r["error"].startswith("robots_disallowed: ") and r["attempts"] == 1 for r in failed)
    assert report.counts["total"] == len(poetry_books) - 1
    summary = "\n".join(report.summary_lines())
    assert "robots.txt obeyed: 2 URLs disallowed" in summary
    assert f"robots.txt {server.url}: HTTP 200, rules obeyed" in summary

    # A new crawl reads robots.txt again, once; with obey_robots off it is never requested.
    server.reset_stats()
    crawl(database_url, sandbox_config(server.url, categories=("Poetry",), workers=2))
    assert server.stats().hits[ROBOTS] == 1
    server.reset_stats()
    unruly = crawl(database_url, sandbox_config(server.url, categories=("Poetry",), obey_robots=False))
    assert ROBOTS not in server.stats().hits and server.stats().hits[banned_book] == 1
    assert unruly.counts["total"] == len(poetry_books)


def test_crawl_delay_spaces_the_request_starts_of_two_workers(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    server = sandbox_factory(faults=Faults(robots_txt="User-agent: *\nCrawl-delay: 0.2\n"))
    config = sandbox_config(server.url, workers=2, concurrency=4)
    assert config.min_interval_s == 0  # the sandbox is on loopback: only the Crawl-delay paces it
    prepare(db, config)
    books = _books_of(server, "Poetry")[:10]
    _enqueue_details(db, config, server, books)
    # Both workers claim at once, before either knows the Crawl-delay.
    stats = drain(database_url, config, task_types=(DETAIL,), workers=2)

    assert WorkerFigures.read(make_queue(db, config), stats).books == 10
    seen = server.stats()
    assert seen.hits[ROBOTS] == 1 and seen.request_paths[0] == ROBOTS
    # The queue hands out request-start slots at least the Crawl-delay apart, across both workers ...
    rows = db.query("SELECT payload->>'url' AS url, slot_at FROM tasks")
    slots = {urlsplit(r["url"]).path: r["slot_at"].timestamp() for r in rows}
    assert len(slots) == 10 and None not in slots.values()
    assert min(b - a for a, b in itertools.pairwise(sorted(slots.values()))) >= 0.2 - 1e-6
    # ... and no request reaches the site before its slot (a request may arrive late on a busy host).
    arrivals = [(path, t) for path, t in zip(seen.request_paths, seen.request_times, strict=True) if path != ROBOTS]
    assert sorted(path for path, _ in arrivals) == sorted(slots)
    early = {path: round(slots[path] - t, 3) for path, t in arrivals if t < slots[path] - EARLY_S}
    assert early == {}, f"requests that reached the site before their slot (s early): {early}"
    report = finish(database_url, join(database_url, config), stats)
    assert "Crawl-delay 0.2 s applied" in "\n".join(report.summary_lines())


def test_an_unreachable_robots_txt_holds_the_domain_until_it_can_be_read(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # Three 503s: the first fetch's every attempt fails; the file (a 404, as on the live site) is read on
    # the next try, after backoff_max_s.
    server = sandbox_factory(faults=Faults(scripted={ROBOTS: [503, 503, 503]}))
    config = sandbox_config(server.url, workers=1)
    prepare(db, config)
    books = _books_of(server, "Poetry")[:3]
    _enqueue_details(db, config, server, books)
    stats = drain(database_url, config, task_types=(DETAIL,), workers=1)

    assert WorkerFigures.read(make_queue(db, config), stats).books == 3
    retries = db.query("SELECT sum(attempts - 1) AS n FROM tasks")[0]["n"]
    assert stats.errors["robots_unreachable"] == 3 and retries == 3
    paths = server.stats().request_paths
    assert paths[:4] == [ROBOTS] * 4 and sorted(paths[4:]) == books  # no page before robots.txt was read


@pytest.mark.parametrize("shape", ["over the body limit", "with a NUL byte"])
def test_a_robots_txt_over_the_body_limit_or_holding_a_nul_is_obeyed(
    db: Database, database_url: str, sandbox_factory: Any, shape: str
) -> None:
    books = _books_of(sandbox_factory(), "Poetry")
    banned, allowed = books[0], books[1:4]
    rules = f"User-agent: *\nDisallow: {banned}\n"
    if shape == "over the body limit":  # 600 KiB against a 64 KiB page limit; a rule past 500 KiB is ignored
        robots = rules + "# padding\n" * (600 * 1024 // 10) + "Disallow: /\n"
    else:
        robots = rules + "# a NUL \x00 in a comment\nDisallow: /\x00\n"
    server = sandbox_factory(faults=Faults(robots_txt=robots))
    config = sandbox_config(server.url, workers=1, max_body_bytes=64 * 1024)
    prepare(db, config)
    _enqueue_details(db, config, server, [banned, *allowed])
    stats = drain(database_url, config, task_types=(DETAIL,), workers=1)

    hits = server.stats().hits
    assert banned not in hits and all(hits.get(p) == 1 for p in allowed)
    assert WorkerFigures.read(make_queue(db, config), stats).books == len(allowed)
    failed = db.query("SELECT payload->>'url' AS url, error_kind FROM tasks WHERE status = 'failed'")
    assert failed == [{"url": server.url_for(banned), "error_kind": "robots_disallowed"}]


@pytest.mark.parametrize("how", ["stop", "cancel"])
def test_a_worker_stopped_or_cancelled_while_fetching_robots_txt_releases_the_fetch_at_once(
    db: Database, database_url: str, sandbox_factory: Any, how: str
) -> None:
    # robots.txt hangs past the request timeout: the worker is stopped (SIGTERM's handler, no grace) or its
    # run cancelled while the fetch is in flight.
    server = sandbox_factory(faults=Faults(scripted={ROBOTS: ["hang"]}, hang_s=60.0))
    config = sandbox_config(server.url)
    prepare(db, config)
    _enqueue_details(db, config, server, _books_of(server, "Poetry")[:1])

    async def stopped_while_fetching() -> None:
        worker = Worker(database_url, config, grace_s=0.0)
        run = asyncio.create_task(worker.run())
        while ROBOTS not in (await asyncio.to_thread(server.stats)).hits:
            await asyncio.sleep(0.02)
        if how == "stop":
            worker.stop()
            await run
        else:
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run

    asyncio.run(stopped_while_fetching())

    held = db.query("SELECT holder FROM robots_txt WHERE state = 'fetching' AND held_until > clock_timestamp()")
    assert held == [], f"robots.txt still held by {held} after the worker stopped"
    # The next worker fetches the file at once rather than waiting out the hold.
    assert db.query("SELECT count(*) AS n FROM tasks WHERE status = 'in_progress'")[0]["n"] == 0
    stats = drain(database_url, config, task_types=(DETAIL,), workers=1)
    assert WorkerFigures.read(make_queue(db, config), stats).books == 1 and server.stats().hits[ROBOTS] == 2


def test_tasks_waiting_for_their_domains_robots_txt_hold_no_page_slot(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # Politely limited hosts and one page slot: each host's first task waits for its host's robots.txt, and then
    # goes back to the queue for its host's next slot. Waiting, it holds no page slot (as a task waiting for its
    # politeness slot holds none), so a task of a fifth host enqueued meanwhile is claimed at once, not after the
    # four hosts' pages are done.
    servers = [sandbox_factory() for _ in range(5)]
    hosts = [urlsplit(s.url).netloc for s in servers]
    allowed = ["127.0.0.1", *hosts[1:]]  # the start URL's host, and each other host's domain (host and port)
    config = sandbox_config(servers[0].url, min_interval_s=2.0, concurrency=1, allowed_domains=allowed)
    prepare(db, config)
    queue = make_queue(db, config)

    def enqueue(server: SandboxServer) -> None:
        path = _books_of(server, "Poetry")[0]
        queue.enqueue(DETAIL, {"url": server.url_for(path), "category": "Poetry"}, priority=DETAIL_PRIORITY)

    for server in servers[:4]:
        enqueue(server)
    with ThreadPoolExecutor(1) as pool:
        drained = pool.submit(drain, database_url, config, task_types=(DETAIL,), workers=1)
        in_progress = "SELECT count(*) AS n FROM tasks WHERE status = 'in_progress'"
        deadline = time.monotonic() + 60
        while db.query(in_progress)[0]["n"] < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # past the four tasks' slots: each waits for its host's robots.txt now
        enqueue(servers[4])
        stats = drained.result(timeout=120)

    assert WorkerFigures.read(queue, stats).books == 5
    first_page = min(t for s in servers[:4] for p, t in zip(*_requests(s), strict=True) if p != ROBOTS)
    fifth_robots = next(t for p, t in zip(*_requests(servers[4]), strict=True) if p == ROBOTS)
    assert fifth_robots < first_page, "the fifth host waited for a page slot"


def _requests(server: SandboxServer) -> tuple[list[str], list[float]]:
    seen = server.stats()
    return seen.request_paths, seen.request_times


def test_robots_txt_goes_out_on_the_first_tasks_slot_and_the_task_waits_for_the_next_in_the_queue(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # A host's robots.txt is the first request its first claimed slot allows. The task then goes back to the queue
    # (no attempt spent) and is claimed again within its window of the host's next slot: it is never held for the
    # intervals between, which at a crawl's start would keep one task a new host out of the worker's room.
    interval = 2.0
    server, config = _one_book_queued(db, sandbox_factory, interval)
    stats = drain(database_url, config, task_types=(DETAIL,), workers=1)

    assert WorkerFigures.read(make_queue(db, config), stats).books == 1
    seen = server.stats()
    assert seen.request_paths[0] == ROBOTS and seen.hits[ROBOTS] == 1
    robots_at, page_at = seen.request_times[:2]
    assert page_at >= robots_at + interval - EARLY_S, "the page came less than an interval after robots.txt"
    (task,) = db.query("SELECT attempts, started_at, slot_at FROM tasks")
    assert task["attempts"] == 1
    held_s = (task["slot_at"] - task["started_at"]).total_seconds()
    assert held_s < interval, f"the task was held {held_s:.2f} s for its slot: robots.txt took another"


def test_robots_txt_goes_out_at_once_for_a_task_that_arrives_late_for_its_slot(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # A claim hands a new domain's slot out a moment ahead of the claim's start; a claim that waits on a lock (or a
    # busy worker) delivers the task after that slot. robots.txt then goes out on a fresh slot of the task's, at
    # once, not on the domain's next (an interval later), and the page comes one interval after robots.txt. The
    # interval leaves a busy machine seconds between the two.
    interval = 4.0
    server, config = _one_book_queued(db, sandbox_factory, interval)
    domain = urlsplit(server.url).netloc
    with Database(database_url, application_name="book-pipeline-tests-lock") as holder, ThreadPoolExecutor(1) as pool:
        with holder.transaction() as cur:
            # The claim takes its moment, then waits for the domain's row: its slot is past when it returns.
            cur.execute("SELECT 1 FROM domains WHERE domain = %s FOR UPDATE", (domain,))
            draining = pool.submit(drain, database_url, config, task_types=(DETAIL,), workers=1)
            deadline = time.monotonic() + 120  # a broken set-up fails instead of hanging; never a verdict
            while not db.query(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%%queue_claim%%'"
            ):
                assert time.monotonic() < deadline and not draining.done(), "no claim waited for the domain"
                time.sleep(0.02)
            time.sleep(0.3)
            released_at = time.time()
        stats = draining.result()

    assert WorkerFigures.read(make_queue(db, config), stats).books == 1
    seen = server.stats()
    assert seen.request_paths[0] == ROBOTS and seen.hits[ROBOTS] == 1
    robots_at, page_at = seen.request_times[:2]
    assert robots_at - released_at < interval / 2, "robots.txt waited for the domain's next slot"
    assert interval - EARLY_S <= page_at - robots_at < 1.5 * interval


@pytest.mark.slow
def test_a_worker_claims_politely_limited_work_when_the_queue_says_it_is_in_reach_not_after_each_page(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # Six politely limited hosts, eight pages each, at an interval as long as the claims' horizon (each claim can
    # give a domain one slot). Claiming after each page ends would hand out one domain's slot a claim, a claim
    # per page; waiting for the moment the queue names, one claim takes every domain whose slot came within
    # reach meanwhile.
    servers = [sandbox_factory() for _ in range(6)]
    hosts = [urlsplit(s.url).netloc for s in servers]
    config = sandbox_config(servers[0].url, min_interval_s=2.0, allowed_domains=["127.0.0.1", *hosts[1:]])
    prepare(db, config)
    queue = make_queue(db, config)
    for server in servers:
        for path in _books_of(server, "Poetry")[:8]:
            queue.enqueue(DETAIL, {"url": server.url_for(path), "category": "Poetry"}, priority=DETAIL_PRIORITY)
    stats = drain(database_url, config, task_types=(DETAIL,), workers=1)

    assert WorkerFigures.read(queue, stats).books == 48
    claims = sum(stats.claim_ms.values())
    assert claims < 48 / 2, f"{claims} claims for 48 pages"  # one a page and more when claiming after each page


def test_a_worker_that_waits_for_or_rereads_a_shared_robots_txt_only_reads_its_row(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    # A worker waiting for the fetch another worker holds looks at the row every POLL_S, and each worker reads a
    # stored file again every REFRESH_S; at a thousand hosts those reads outnumber the fetches five to one. A read
    # that tries to take the fetch first locks the row (an upsert whose condition fails still locks it) and
    # costs a transaction id and a WAL record; a plain read leaves the row's xmax at 0.
    server = sandbox_factory()
    config = sandbox_config(server.url)
    prepare(db, config)
    url = server.url_for("/private/page.html")
    origin = origin_of(url)
    body = "User-agent: *\nDisallow: /private/\n"
    locked = "SELECT xmax::text <> '0' AS locked FROM robots_txt"
    held = {"origin": origin, "host": urlsplit(origin).hostname, "holder": "other", "hold_s": 600, "max_age_s": 60}
    assert db.query(ROBOTS_SQL["take_robots_fetch"], held) == [{"origin": origin}]
    reads = itertools.count()

    async def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        next(reads)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def check(holder: str, until_stored: bool) -> tuple[Verdict, bool]:
        worker_db = Database(database_url, application_name="book-pipeline-tests-robots")
        gate = RobotsGate(config, make_queue(worker_db, config), holder, run)
        try:
            checking = asyncio.create_task(gate.check(url, claimed_at=0.0))
            if not until_stored:
                return (await checking).verdict, db.query(locked)[0]["locked"]
            deadline = time.monotonic() + 60  # a broken set-up fails instead of hanging; never a verdict
            while next(reads) < 8:  # a few looks at the held row (this count is one of them)
                assert time.monotonic() < deadline and not checking.done(), "the waiter did not look at the row"
                await asyncio.sleep(0.02)
            locked_while_held = db.query(locked)[0]["locked"]
            stored = {"origin": origin, "holder": "other", "state": "fetched", "http_status": 200, "body": body}
            db.query(ROBOTS_SQL["store_robots"], {**stored, "crawl_delay_s": None, "error": None, "retry_s": 1})
            return (await checking).verdict, locked_while_held
        finally:
            await gate.close()
            worker_db.close()

    verdict, locked_while_held = asyncio.run(check("waiter", until_stored=True))
    assert verdict is Verdict.DISALLOWED
    assert not locked_while_held, "the waiting worker locked the row another worker holds"
    verdict, locked_by_reread = asyncio.run(check("later", until_stored=False))
    assert verdict is Verdict.DISALLOWED
    assert not locked_by_reread, "reading the stored file locked its row"
