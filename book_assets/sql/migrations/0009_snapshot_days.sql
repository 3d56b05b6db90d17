-- The category-balanced snapshot keeps one set of rows per day (the Dagster asset is partitioned by day) and
-- is built from book_versions as the books stood at the end of that day, so rebuilding a past day gives the
-- same rows again. The columns stay; snapshot_day joins the key. Rows written before this migration belong to
-- the day they were written (UTC).

ALTER TABLE category_balanced_snapshot ADD COLUMN snapshot_day DATE;
UPDATE category_balanced_snapshot SET snapshot_day = (snapshot_at AT TIME ZONE 'UTC')::date;
ALTER TABLE category_balanced_snapshot ALTER COLUMN snapshot_day SET NOT NULL;
ALTER TABLE category_balanced_snapshot DROP CONSTRAINT category_balanced_snapshot_pkey;
ALTER TABLE category_balanced_snapshot ADD PRIMARY KEY (snapshot_day, url);
DROP INDEX idx_category_balanced_snapshot_category;
CREATE INDEX idx_category_balanced_snapshot_day_category ON category_balanced_snapshot (snapshot_day, category);

-- Every book as it stood before p_until: the latest version of each book recorded before then, with the
-- snapshot's typed fields read from the version's JSON (fields as book_assets/crawl/storage.py records them).
CREATE FUNCTION snapshot_books_as_of_v1(p_until TIMESTAMPTZ)
RETURNS TABLE (book_id BIGINT, url TEXT, title TEXT, category TEXT, price NUMERIC(10, 2), rating SMALLINT,
               stock INTEGER, recorded_at TIMESTAMPTZ)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (v.book_id)
           v.book_id, v.url, v.fields ->> 'title', v.fields ->> 'category',
           (v.fields ->> 'price_amount')::numeric(10, 2), (v.fields ->> 'rating_value')::smallint,
           (v.fields ->> 'stock')::integer, v.recorded_at
    FROM book_versions v
    WHERE v.recorded_at < p_until
    ORDER BY v.book_id, v.version DESC
$$;
