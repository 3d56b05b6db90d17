-- Queries of the category-balanced snapshot (book_assets/scheduling/snapshot.py).

-- consistent_read --
-- Make the transaction's reads one consistent view (counts and rows must agree); must run first.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- category_counts --
-- Books available for the snapshot per category.
SELECT category, count(*)::int AS available
FROM books
WHERE category IS NOT NULL
GROUP BY category
ORDER BY category;

-- select_books --
-- The first quota[i] books of each category[i]: most recently scraped first, then lowest id.
SELECT b.url, b.title, b.category, b.price_amount::float8 AS price, b.rating_value::int AS rating,
       b.stock, b.scraped_at
FROM (
    SELECT b.*, row_number() OVER (PARTITION BY b.category ORDER BY b.scraped_at DESC, b.id) AS rank
    FROM books b
    WHERE b.category = ANY(%(categories)s::text[])
) b
JOIN unnest(%(categories)s::text[], %(quotas)s::int[]) AS q(category, quota) ON q.category = b.category
WHERE b.rank <= q.quota
ORDER BY b.category, b.rank;

-- clear_snapshot --
-- Remove the previous snapshot (DELETE, not TRUNCATE: readers keep seeing it until the new one commits).
DELETE FROM category_balanced_snapshot;

-- insert_snapshot --
-- Rows of the new snapshot (execute_values template).
INSERT INTO category_balanced_snapshot (url, title, category, price, rating, stock, scraped_at) VALUES %s;
