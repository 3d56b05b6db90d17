-- Queries of the change feed: listing pages seen per crawl, removals decided at a crawl's end
-- (book_assets/store/removals.py), and the feed of a day (book_assets/publish/changes.py).

-- abandon_open_crawls --
-- A crawl of a site begins: earlier crawls of that site that never reported are closed, their removals never
-- decided. Another site's open crawl goes on.
UPDATE crawls SET finished_at = now(), outcome = 'abandoned', note = 'a later crawl started before it reported'
WHERE finished_at IS NULL AND site = %(site)s;

-- insert_crawl --
-- A new crawl of a site; listing pages processed from now on belong to it.
INSERT INTO crawls (site) VALUES (%(site)s) RETURNING id, started_at;

-- crawl_by_id --
-- One crawl, named by an explicit report step (the run that opened it was interrupted before it reported).
SELECT id, started_at FROM crawls WHERE id = %(id)s;

-- crawls_finished_since --
-- The crawl ledger of one site: its crawls that finished (decided, undecided or abandoned) after a time, oldest
-- first.
SELECT id, started_at, finished_at, outcome, removed, returned FROM crawls
WHERE finished_at > %(since)s AND site = %(site)s ORDER BY finished_at, id;

-- last_successful_crawl --
-- When the latest successful crawl ended (decided: every listing page of at least one category completed, so it
-- decided removals), on the database's clock; NULL when none has. The queue exporter's dead-man signal.
SELECT max(finished_at) AS finished_at FROM crawls WHERE outcome = 'decided';

-- running_crawl --
-- The crawl now running (opened, not yet reported): the trace a worker's task spans join.
SELECT id, started_at FROM crawls WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1;

-- record_listing_page --
-- A processed listing page, written in the transaction that completes its task.
INSERT INTO listing_pages (url, category, depth, next_url, result_count, cards, book_urls, sidebar, listed_at)
VALUES (%(url)s, %(category)s, %(depth)s, %(next_url)s, %(result_count)s, %(cards)s, %(book_urls)s, %(sidebar)s,
        now())
ON CONFLICT (url) DO UPDATE
SET category = EXCLUDED.category, depth = EXCLUDED.depth, next_url = EXCLUDED.next_url,
    result_count = EXCLUDED.result_count, cards = EXCLUDED.cards, book_urls = EXCLUDED.book_urls,
    sidebar = EXCLUDED.sidebar, listed_at = EXCLUDED.listed_at;

-- listing_pages_since --
-- The listing pages processed since a crawl started.
SELECT url, category, depth, next_url, result_count, cards, sidebar
FROM listing_pages WHERE listed_at >= %(since)s;

-- books_listed_since --
-- Books the listing pages processed since a moment showed (each once, however many pages or passes showed it).
SELECT count(DISTINCT listed.book) AS n
FROM listing_pages p, unnest(p.book_urls) AS listed(book) WHERE p.listed_at >= %(since)s;

-- chains_cut_since --
-- Listing pages processed since a moment at the depth bound with a next link: the chains max_pages cut there.
SELECT count(*) AS n FROM listing_pages
WHERE listed_at >= %(since)s AND depth >= %(max_depth)s AND next_url IS NOT NULL;

-- mark_returned --
-- Removed books that a listing page of this crawl shows again: listed once more, with a 'returned' event.
WITH listed AS (
    SELECT DISTINCT unnest(book_urls) AS url FROM listing_pages WHERE listed_at >= %(since)s
), back AS (
    UPDATE books b SET removed_at = NULL
    WHERE b.removed_at IS NOT NULL
      AND (b.url IN (SELECT url FROM listed) OR b.requested_url IN (SELECT url FROM listed))
    RETURNING b.id
)
INSERT INTO book_presence (book_id, at, event, crawl_id)
SELECT id, now(), 'returned', %(crawl_id)s FROM back
RETURNING book_id;

-- mark_removed --
-- Books of the complete (host, category) pairs that no listing page of this crawl showed: marked removed
-- (the row and its versions stay), with a 'removed' event.
WITH listed AS (
    SELECT DISTINCT unnest(book_urls) AS url FROM listing_pages WHERE listed_at >= %(since)s
), complete AS (
    SELECT * FROM unnest(%(hosts)s::text[], %(categories)s::text[]) AS c(host, category)
), gone AS (
    UPDATE books b SET removed_at = now()
    FROM complete c
    WHERE b.removed_at IS NULL
      AND b.category = c.category
      AND substring(b.url FROM '^[^:]+://([^/?#]+)') = c.host
      AND b.url NOT IN (SELECT url FROM listed)
      AND (b.requested_url IS NULL OR b.requested_url NOT IN (SELECT url FROM listed))
    RETURNING b.id
)
INSERT INTO book_presence (book_id, at, event, crawl_id)
SELECT id, now(), 'removed', %(crawl_id)s FROM gone
RETURNING book_id;

-- lock_crawl --
-- A crawl's row, locked while its end is decided (a decided crawl reports what it decided).
SELECT outcome, removed, returned, note FROM crawls WHERE id = %(id)s FOR UPDATE;

-- close_crawl --
-- The crawl reported: what it decided.
UPDATE crawls
SET finished_at = now(), outcome = %(outcome)s, complete_categories = %(complete)s,
    incomplete_categories = %(incomplete)s, removed = %(removed)s, returned = %(returned)s, note = %(note)s
WHERE id = %(id)s;

-- changes_of_day --
-- Each book's change on one day (UTC): new, changed (with its fields), removed or returned.
SELECT day, change, book_id, url, title, category, price, version, fields, changed_at
FROM book_changes_v1(%(day)s::date)
ORDER BY array_position(ARRAY['new', 'changed', 'returned', 'removed'], change), book_id;

-- changes_per_day --
-- How many books changed in each way on each day from %(first)s to %(last)s (days without changes omitted).
SELECT d::date AS day, c.change, count(*)::int AS books
FROM generate_series(%(first)s::date, %(last)s::date, interval '1 day') AS d
CROSS JOIN LATERAL book_changes_v1(d::date) AS c
GROUP BY 1, 2
ORDER BY 1, 2;
