-- Queries of field drift (book_assets/store/drift.py): the values held while a crawl runs, each crawl's field
-- coverage and its judgement, the acceptances, and the stored versions a replay of the archive compares with.

-- hold_values --
-- A page shows these values in place of a stored book's (JSON: field -> the columns the page showed, a loss a
-- null): hold them. While a crawl runs (and stage is true) the running crawl holds them, taking a held value over;
-- outside one only a value held already is replaced (nothing will judge a new one, so the caller writes it).
-- Returns the fields held.
WITH shown AS (SELECT key AS field, value FROM jsonb_each(%(values)s::jsonb)),
running AS (SELECT id FROM crawls WHERE finished_at IS NULL AND %(stage)s ORDER BY id DESC LIMIT 1),
replaced AS (
    UPDATE held_losses h SET value = s.value, crawl_id = coalesce((SELECT id FROM running), h.crawl_id),
           held_at = now()
    FROM shown s WHERE h.book_id = %(book_id)s AND h.field = s.field
    RETURNING h.field
),
added AS (
    INSERT INTO held_losses (book_id, field, value, crawl_id)
    SELECT %(book_id)s, s.field, s.value, r.id FROM shown s CROSS JOIN running r
    WHERE NOT EXISTS (SELECT 1 FROM held_losses h WHERE h.book_id = %(book_id)s AND h.field = s.field)
    ON CONFLICT (book_id, field) DO NOTHING
    RETURNING field
)
SELECT field FROM replaced UNION SELECT field FROM added;

-- release_held --
-- A page shows these fields of a book as stored again: their held values are void.
DELETE FROM held_losses WHERE book_id = %(book_id)s AND field = ANY (%(fields)s::text[]);

-- release_held_values --
-- The held values of these fields held by a crawl up to this one, but in the (field, category) pairs held (an
-- empty category: everywhere): deleted and returned with their book's URL, for the caller to write.
DELETE FROM held_losses h USING books b
WHERE h.book_id = b.id AND h.crawl_id <= %(crawl_id)s AND h.field = ANY (%(fields)s::text[])
  AND NOT EXISTS (
      SELECT 1 FROM unnest(%(hold_fields)s::text[], %(hold_categories)s::text[]) AS k(field, category)
      WHERE k.field = h.field AND k.category IN ('', coalesce(b.category, ''))
  )
RETURNING b.url, h.field, h.value;

-- stored_coverage --
-- Of the books whose page was fetched since the crawl began (and, judged again, by its end), per category and
-- contract field and in the whole crawl (whole = true): the pages, those that showed the field, and the shape of
-- the values shown: the most common one and how many showed it, the median length of their text. A held value
-- counts as the one the page showed (a held loss as none). Each value is counted once, by hashing, and every
-- figure is read from those counts: sorting every value the crawl stored by its text was most of the cost.
WITH shown AS (
    SELECT coalesce(b.category, '') AS category, f.field,
           CASE WHEN h.book_id IS NULL THEN f.value ELSE h.value ->> f.col END AS value
    FROM books b
    CROSS JOIN LATERAL (VALUES
        ('title', 'title', b.title), ('category', 'category', b.category), ('upc', 'upc', b.upc),
        ('product_type', 'product_type', b.product_type), ('price', 'price_amount', b.price_amount::text),
        ('price_excl_tax', 'price_excl_tax', b.price_excl_tax::text),
        ('price_incl_tax', 'price_incl_tax', b.price_incl_tax::text), ('tax', 'tax', b.tax::text),
        ('availability', 'availability', b.availability), ('num_reviews', 'num_reviews', b.num_reviews::text),
        ('rating', 'rating_value', b.rating_value::text), ('description', 'description', b.description),
        ('stock', 'stock', b.stock::text)
    ) AS f(field, col, value)
    LEFT JOIN held_losses h ON h.book_id = b.id AND h.field = f.col
    WHERE b.fetched_at >= %(since)s AND (%(until)s::timestamptz IS NULL OR b.fetched_at <= %(until)s)
),
counted AS (  -- how many pages of a category showed each value of a field (NULL: none)
    SELECT category, field, value, count(*)::int AS n FROM shown GROUP BY category, field, value
),
per_set AS (  -- the same per category and, whole = true, in the whole crawl
    SELECT false AS whole, category, field, value, n FROM counted
    UNION ALL
    SELECT true, '', field, value, sum(n)::int FROM counted GROUP BY field, value
),
measured AS (
    SELECT whole, category, field, sum(n)::int AS pages,
           coalesce(sum(n) FILTER (WHERE value IS NOT NULL), 0)::int AS filled,
           max(n) FILTER (WHERE value IS NOT NULL) AS top_count
    FROM per_set GROUP BY whole, category, field
),
tops AS (  -- of the values shown most often, the first in the text's order
    SELECT s.whole, s.category, s.field, min(s.value) AS top_value
    FROM per_set s JOIN measured m USING (whole, category, field)
    WHERE s.value IS NOT NULL AND s.n = m.top_count
    GROUP BY s.whole, s.category, s.field
),
medians AS (  -- percentile_disc(0.5) of the lengths shown: the first length at or past half the values
    SELECT whole, category, field, min(len)::int AS median_length
    FROM (
        SELECT whole, category, field, len, sum(n) OVER (PARTITION BY whole, category, field ORDER BY len) AS upto
        FROM (SELECT whole, category, field, length(value) AS len, sum(n) AS n FROM per_set
              WHERE value IS NOT NULL GROUP BY whole, category, field, length(value)) lengths
    ) c
    JOIN measured m USING (whole, category, field)
    WHERE c.upto >= 0.5 * m.filled
    GROUP BY whole, category, field
)
SELECT m.whole, m.category, m.field, m.pages, m.filled, coalesce(m.top_count, 0) AS top_count,
       left(t.top_value, 80) AS top_value, d.median_length
FROM measured m LEFT JOIN tops t USING (whole, category, field) LEFT JOIN medians d USING (whole, category, field);

-- last_good_crawl --
-- The latest crawl before this one whose fields were judged and whose every drifted field was accepted.
SELECT max(f.crawl_id) AS crawl_id FROM crawl_fields f
WHERE f.crawl_id < %(crawl_id)s
  AND NOT EXISTS (
      SELECT 1 FROM crawl_fields d
      WHERE d.crawl_id = f.crawl_id AND d.drifted
        AND NOT EXISTS (SELECT 1 FROM drift_acceptances a WHERE a.crawl_id = d.crawl_id AND a.field = d.field)
  );

-- crawl_coverage --
-- One crawl's coverage rows, as its judgement wrote them.
SELECT crawl_id, category, field, pages, filled, base_crawl_id, base_pages, base_filled, drifted, measured,
       top_count, top_value, median_length, base_measured, base_top_count, base_median_length, drifted_on
FROM crawl_fields WHERE crawl_id = %(crawl_id)s ORDER BY field, category;

-- forget_coverage --
-- A crawl judged again (its report re-run) replaces its rows.
DELETE FROM crawl_fields WHERE crawl_id = %(crawl_id)s;

-- record_coverage --
-- One row of a crawl's judgement.
INSERT INTO crawl_fields (crawl_id, category, field, pages, filled, base_crawl_id, base_pages, base_filled, drifted,
                          measured, top_count, top_value, median_length, base_measured, base_top_count,
                          base_median_length, drifted_on)
VALUES (%(crawl_id)s, %(category)s, %(field)s, %(pages)s, %(filled)s, %(base_crawl_id)s, %(base_pages)s,
        %(base_filled)s, %(drifted)s, %(measured)s, %(top_count)s, %(top_value)s, %(median_length)s,
        %(base_measured)s, %(base_top_count)s, %(base_median_length)s, %(drifted_on)s);

-- unaccepted_drift --
-- The drifted rows of crawls (one crawl, or every crawl when crawl_id is NULL) that no acceptance covers.
SELECT d.crawl_id, d.category, d.field, d.pages, d.filled, d.base_crawl_id, d.base_pages, d.base_filled, d.drifted,
       d.measured, d.top_count, d.top_value, d.median_length, d.base_measured, d.base_top_count,
       d.base_median_length, d.drifted_on
FROM crawl_fields d
WHERE d.drifted AND (%(crawl_id)s::bigint IS NULL OR d.crawl_id = %(crawl_id)s)
  AND NOT EXISTS (SELECT 1 FROM drift_acceptances a WHERE a.crawl_id = d.crawl_id AND a.field = d.field)
ORDER BY d.crawl_id, d.field, d.category;

-- held_by_crawl --
-- The values held, per crawl and field.
SELECT crawl_id, field, count(*)::int AS books FROM held_losses GROUP BY crawl_id, field ORDER BY crawl_id, field;

-- accept_drift --
-- An operator accepts a field's drift in a crawl: who and when (a second acceptance keeps the first); and in
-- every later crawl where the field drifted against a crawl before it (the same change, judged against the same
-- stale baseline). Returns the crawls whose acceptance was recorded now.
INSERT INTO drift_acceptances (crawl_id, field, accepted_by)
SELECT DISTINCT d.crawl_id, d.field, %(accepted_by)s FROM crawl_fields d
WHERE d.field = %(field)s AND d.drifted
  AND (d.crawl_id = %(crawl_id)s OR (d.crawl_id > %(crawl_id)s AND d.base_crawl_id < %(crawl_id)s))
ON CONFLICT (crawl_id, field) DO NOTHING
RETURNING crawl_id;

-- record_applied --
-- How many held losses an acceptance applied; returns the acceptance.
UPDATE drift_acceptances SET applied = applied + %(applied)s
WHERE crawl_id = %(crawl_id)s AND field = %(field)s
RETURNING crawl_id, field, accepted_by, accepted_at, applied;

-- acceptances --
-- Every acceptance recorded, newest first.
SELECT crawl_id, field, accepted_by, accepted_at, applied FROM drift_acceptances ORDER BY accepted_at DESC;

-- stored_as_of --
-- Each book's fields as stored before a moment: its latest version recorded by then (what a replay compares).
SELECT DISTINCT ON (v.book_id) v.url, v.fields
FROM book_versions v WHERE v.recorded_at < %(until)s
ORDER BY v.book_id, v.version DESC;

-- crawl_window --
-- When a crawl began and ended (NULL: it has not), to judge it again.
SELECT started_at, finished_at FROM crawls WHERE id = %(crawl_id)s;

-- record_resolution --
-- A drifted field that a new judgement of its crawl cleared: what cleared it and the figures before and after.
INSERT INTO drift_resolutions (crawl_id, field, category, resolved_by, judged_crawl_id, drifted_pages,
                               drifted_filled, pages, filled, drifted_on, drifted_measured, drifted_top_count,
                               drifted_median_length, measured, top_count, median_length)
VALUES (%(crawl_id)s, %(field)s, %(category)s, %(resolved_by)s, %(judged_crawl_id)s, %(drifted_pages)s,
        %(drifted_filled)s, %(pages)s, %(filled)s, %(drifted_on)s, %(drifted_measured)s, %(drifted_top_count)s,
        %(drifted_median_length)s, %(measured)s, %(top_count)s, %(median_length)s)
ON CONFLICT (crawl_id, field) DO UPDATE SET resolved_by = EXCLUDED.resolved_by, resolved_at = now(),
    category = EXCLUDED.category, judged_crawl_id = EXCLUDED.judged_crawl_id,
    drifted_pages = EXCLUDED.drifted_pages, drifted_filled = EXCLUDED.drifted_filled,
    pages = EXCLUDED.pages, filled = EXCLUDED.filled, drifted_on = EXCLUDED.drifted_on,
    drifted_measured = EXCLUDED.drifted_measured, drifted_top_count = EXCLUDED.drifted_top_count,
    drifted_median_length = EXCLUDED.drifted_median_length, measured = EXCLUDED.measured,
    top_count = EXCLUDED.top_count, median_length = EXCLUDED.median_length;

-- clear_drift --
-- A crawl's drift of a field resolved by a later crawl's new judgement: its rows no longer count as drifted.
UPDATE crawl_fields SET drifted = false, drifted_on = NULL
WHERE crawl_id = %(crawl_id)s AND field = %(field)s AND drifted;

-- forget_resolutions --
-- A crawl judged again drifts in these fields: no resolution of them stands.
DELETE FROM drift_resolutions WHERE crawl_id = %(crawl_id)s AND field = ANY (%(fields)s::text[]);

-- resolutions --
-- Every drift a new judgement resolved, newest first.
SELECT crawl_id, field, category, resolved_by, resolved_at, judged_crawl_id, drifted_pages, drifted_filled,
       pages, filled, drifted_on, drifted_measured, drifted_top_count, drifted_median_length, measured, top_count,
       median_length
FROM drift_resolutions ORDER BY resolved_at DESC, crawl_id, field;
