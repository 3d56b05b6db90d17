-- Data-quality checks of the Dagster asset checks (book_assets/defs/*/checks.py) and the failed-tasks sensor.
-- Each check query returns one row: `bad` (rows that break the rule), `total` (rows looked at) and
-- `sample` (up to five offending URLs, for the check's metadata).

-- duplicate_urls --
-- Book URLs stored more than once (books.url is UNIQUE, so this guards against a dropped constraint).
SELECT coalesce(sum(n - 1), 0)::bigint AS bad,
       (SELECT count(*) FROM books) AS total,
       coalesce((array_agg(url ORDER BY url))[1:5], '{}') AS sample
FROM (SELECT url, count(*) AS n FROM books GROUP BY url HAVING count(*) > 1) AS dup;

-- missing_raw_html --
-- Books stored without the raw HTML of their page.
SELECT count(*) FILTER (WHERE raw_html IS NULL OR raw_html = '') AS bad,
       count(*) AS total,
       coalesce((array_agg(url ORDER BY id) FILTER (WHERE raw_html IS NULL OR raw_html = ''))[1:5], '{}') AS sample
FROM books;

-- error_pages_stored --
-- Books whose stored page is an error page: no product block in the served (or, for pages built by
-- JavaScript, the rendered) HTML, a 404-like title, or a status other than 200.
WITH bad AS (
    SELECT id, url FROM books
    WHERE coalesce(raw_html, '') NOT LIKE '%product_main%'
          AND coalesce(rendered_html, '') NOT LIKE '%product_main%'
       OR title IS NULL OR btrim(title) IN ('', '404', 'Not Found', '404 Not Found')
       OR http_status IS DISTINCT FROM 200
)
SELECT (SELECT count(*) FROM bad) AS bad,
       (SELECT count(*) FROM books) AS total,
       coalesce((SELECT (array_agg(url ORDER BY id))[1:5] FROM bad), '{}') AS sample;

-- missing_required_fields --
-- Books without one of the fields every book page has: title, price, UPC, category.
WITH bad AS (
    SELECT id, url FROM books
    WHERE title IS NULL OR price_amount IS NULL OR upc IS NULL OR category IS NULL
)
SELECT (SELECT count(*) FROM bad) AS bad,
       (SELECT count(*) FROM books) AS total,
       coalesce((SELECT (array_agg(url ORDER BY id))[1:5] FROM bad), '{}') AS sample;

-- books_by_category --
-- Stored books per category: what the snapshot could draw from.
SELECT category, count(*)::int AS books FROM books WHERE category IS NOT NULL GROUP BY category ORDER BY category;

-- snapshot_by_category --
-- Books per category in the published snapshot table.
SELECT category, count(*)::int AS books FROM category_balanced_snapshot GROUP BY category ORDER BY category;

-- site_book_counts --
-- The three counts (books, unique URLs, with raw HTML) restricted to one site (URL prefix), for the demo's summary when the database holds others.
SELECT count(*) AS total, count(DISTINCT url) AS unique_urls, count(raw_html) AS with_html
FROM books WHERE left(url, length(%(prefix)s)) = %(prefix)s;
