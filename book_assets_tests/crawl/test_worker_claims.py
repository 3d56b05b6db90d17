"""A worker refills its page slots in batches: a claim costs the queue about as much for one task as for ten.

Tasks leased by one claim share its ``started_at`` (the claim's time), so the claims a crawl made are
counted from the database after it, whatever the machine's speed.
"""

from __future__ import annotations

from typing import Any

from book_assets.crawl.pipeline import crawl
from book_assets.crawl.worker import SLOT_WAITERS_PER_PAGE, claim_room, refill_batch
from book_assets.db.connection import Database
from book_assets_tests.crawl.conftest import sandbox_config

CATEGORIES = ("Travel", "Mystery", "Poetry")


def test_refill_batch_is_half_the_slots_and_at_least_one() -> None:
    assert [refill_batch(c) for c in (1, 2, 3, 4, 8, 9, 16)] == [1, 1, 1, 2, 4, 4, 8]


def test_tasks_waiting_for_their_politeness_slot_take_no_page_slot_up_to_a_cap() -> None:
    assert claim_room(8, held=8, waiting=0) == 0  # every page slot busy
    assert claim_room(8, held=8, waiting=8) == 8  # all eight wait for slots: room for eight pages more
    assert claim_room(8, held=10, waiting=4) == 2
    cap = 8 * (1 + SLOT_WAITERS_PER_PAGE)
    assert claim_room(8, held=cap - 3, waiting=cap - 3) == 3  # waiting tasks are capped
    assert claim_room(8, held=12, waiting=2) == 0  # slots that came while the pages were busy: over capacity


def test_a_worker_with_eight_slots_claims_once_half_of_them_are_free_not_once_per_finished_page(
    db: Database, database_url: str, sandbox_factory: Any
) -> None:
    site = sandbox_factory()
    report = crawl(database_url, sandbox_config(site.url, concurrency=8, categories=CATEGORIES))
    assert report.counts["total"] == 62
    row = db.query(
        "SELECT count(*) AS pages, count(DISTINCT started_at) AS claims FROM tasks WHERE status = 'completed'"
    )[0]
    # 62 books and 5 listing pages (the root, three categories, Mystery's page 2). Claiming as each page
    # finished took about one claim per page; four slots at a time, at most a quarter as many plus the
    # start (the root alone, then its categories) and the tail.
    assert row["pages"] == 67, row
    assert row["claims"] <= row["pages"] // 4 + 6, row
