-- The change feed per day: what the category listings showed in each crawl, books marked removed when a
-- complete listing of their category no longer shows them (never deleted), marked back when a listing shows
-- them again, and the crawls that decided it (book_assets/crawl/removals.py, book_assets/crawl/changes.py).

-- One row per crawl started by crawl.pipeline.Crawl; removals are decided when it reports.
CREATE TABLE crawls (
    id BIGSERIAL PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    -- decided: removals were decided for complete_categories; undecided: for none (why in note);
    -- abandoned: a later crawl started before this one reported.
    outcome TEXT CHECK (outcome IN ('decided', 'undecided', 'abandoned')),
    complete_categories INTEGER,
    incomplete_categories INTEGER,
    removed INTEGER,
    returned INTEGER,
    note TEXT
);

-- Every listing page as it was last processed (in the transaction that completed its task): the category
-- whose cards it lists (NULL for a start page, which only links categories), its place in the category's
-- chain of pages (depth 1: the first page), its next page, the "N results" it shows, the cards it showed.
CREATE TABLE listing_pages (
    url TEXT PRIMARY KEY,
    category TEXT,
    depth INTEGER NOT NULL CHECK (depth >= 1),
    next_url TEXT,
    result_count INTEGER,
    cards INTEGER NOT NULL,
    book_urls TEXT[] NOT NULL DEFAULT '{}',
    sidebar TEXT[] NOT NULL DEFAULT '{}',
    listed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_listing_pages_listed_at ON listing_pages (listed_at);

-- When the book was marked removed (no complete listing of its category showed it); NULL while listed.
ALTER TABLE books ADD COLUMN removed_at TIMESTAMPTZ;

-- Each change of a book's presence on the listings; books.removed_at is the latest state.
CREATE TABLE book_presence (
    book_id BIGINT NOT NULL REFERENCES books (id) ON DELETE CASCADE,
    at TIMESTAMPTZ NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('removed', 'returned')),
    crawl_id BIGINT REFERENCES crawls (id) ON DELETE SET NULL,
    PRIMARY KEY (book_id, at)
);
CREATE INDEX idx_book_presence_at ON book_presence (at);
CREATE INDEX idx_book_versions_recorded_at ON book_versions (recorded_at);

-- The changes of day p_day (UTC), one row per book, comparing the day's start with its end:
--   new       first version recorded that day (and not removed by its end);
--   removed   listed at the start, marked removed by the end;
--   returned  marked removed at the start, listed again by the end;
--   changed   any other book with a new version that day.
-- fields: the changed field names of the day's versions (book_versions.changed), title/category/price and
-- version: the book's latest version recorded by the day's end.
CREATE FUNCTION book_changes_v1(p_day DATE)
RETURNS TABLE (day DATE, change TEXT, book_id BIGINT, url TEXT, title TEXT, category TEXT, price NUMERIC(10, 2),
               version INTEGER, fields TEXT[], changed_at TIMESTAMPTZ)
LANGUAGE sql STABLE AS $$
    WITH bounds AS (
        SELECT p_day::timestamp AT TIME ZONE 'UTC' AS day_start, (p_day + 1)::timestamp AT TIME ZONE 'UTC' AS day_end
    ),
    versions AS (
        SELECT v.book_id, min(v.version) AS first_version, max(v.recorded_at) AS at,
               coalesce(array_agg(DISTINCT f.name ORDER BY f.name) FILTER (WHERE f.name IS NOT NULL), '{}') AS fields
        FROM bounds b
        JOIN book_versions v ON v.recorded_at >= b.day_start AND v.recorded_at < b.day_end
        LEFT JOIN LATERAL unnest(v.changed) AS f(name) ON true
        GROUP BY v.book_id
    ),
    last_event AS (
        SELECT DISTINCT ON (p.book_id) p.book_id, p.event, p.at
        FROM bounds b
        JOIN book_presence p ON p.at >= b.day_start AND p.at < b.day_end
        ORDER BY p.book_id, p.at DESC
    ),
    presence AS (
        SELECT e.book_id, e.event AS at_end, e.at,
               coalesce((SELECT q.event FROM book_presence q WHERE q.book_id = e.book_id AND q.at < b.day_start
                         ORDER BY q.at DESC LIMIT 1), 'returned') AS at_start
        FROM last_event e CROSS JOIN bounds b
    ),
    changes AS (
        SELECT coalesce(v.book_id, p.book_id) AS book_id,
               CASE
                   WHEN v.first_version = 1 THEN CASE WHEN p.at_end = 'removed' THEN NULL ELSE 'new' END
                   WHEN p.at_end IS DISTINCT FROM p.at_start THEN p.at_end
                   WHEN v.book_id IS NOT NULL THEN 'changed'
               END AS change,
               coalesce(v.fields, '{}') AS fields,
               greatest(v.at, p.at) AS at
        FROM versions v FULL JOIN presence p ON p.book_id = v.book_id
    )
    SELECT p_day, c.change, c.book_id, bk.url, lv.fields ->> 'title', lv.fields ->> 'category',
           (lv.fields ->> 'price_amount')::numeric(10, 2), lv.version, c.fields, c.at
    FROM changes c
    CROSS JOIN bounds b
    JOIN books bk ON bk.id = c.book_id
    LEFT JOIN LATERAL (
        SELECT v.version, v.fields FROM book_versions v
        WHERE v.book_id = c.book_id AND v.recorded_at < b.day_end
        ORDER BY v.version DESC LIMIT 1
    ) lv ON true
    WHERE c.change IS NOT NULL
$$;
