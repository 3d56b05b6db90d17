-- Queries of the category-balanced snapshot (book_assets/publish/snapshot/) and its check.
-- A day's books are snapshot_books_as_of_v1(<the next midnight, UTC>): each book's latest version by then.

-- consistent_read --
-- Make the transaction's reads one consistent view (counts and rows must agree); must run first.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- category_counts --
-- Books available for the snapshot per category, as of %(until)s.
SELECT category, count(*)::int AS available
FROM snapshot_books_as_of_v1(%(until)s)
WHERE category IS NOT NULL
GROUP BY category
ORDER BY category;

-- select_books --
-- The first quota[i] books of each category[i] as of %(until)s: most recently recorded first, then lowest id.
SELECT b.url, b.title, b.category, b.price::float8 AS price, b.rating::int AS rating, b.stock,
       b.recorded_at AS scraped_at
FROM (
    SELECT b.*, row_number() OVER (PARTITION BY b.category ORDER BY b.recorded_at DESC, b.book_id) AS rank
    FROM snapshot_books_as_of_v1(%(until)s) b
    WHERE b.category = ANY(%(categories)s::text[])
) b
JOIN unnest(%(categories)s::text[], %(quotas)s::int[]) AS q(category, quota) ON q.category = b.category
WHERE b.rank <= q.quota
ORDER BY b.category, b.rank;

-- clear_day --
-- Remove one day's rows (DELETE, not TRUNCATE: readers keep seeing them until the new ones commit).
DELETE FROM category_balanced_snapshot WHERE snapshot_day = %(day)s;

-- insert_rows --
-- Rows of a day's snapshot (execute_values template).
INSERT INTO category_balanced_snapshot (snapshot_day, url, title, category, price, rating, stock, scraped_at)
VALUES %s;

-- day_by_category --
-- Books per category in one day's published snapshot.
SELECT category, count(*)::int AS books
FROM category_balanced_snapshot
WHERE snapshot_day = %(day)s
GROUP BY category
ORDER BY category;

-- days --
-- The days the table holds a snapshot for, with their row counts.
SELECT snapshot_day AS day, count(*)::int AS books
FROM category_balanced_snapshot
GROUP BY snapshot_day
ORDER BY snapshot_day;
