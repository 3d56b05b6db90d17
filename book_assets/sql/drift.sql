-- Queries of field drift (book_assets/store/drift.py): the losses held while a crawl runs, each crawl's field
-- coverage and its judgement, the acceptances, and the stored versions a replay of the archive compares with.

-- hold_losses --
-- A page of the running crawl no longer shows these optional fields of a stored book: hold the losses (none
-- held when no crawl is running: nothing will judge them, so the caller writes them). Returns the fields held.
INSERT INTO held_losses (book_id, field, crawl_id)
SELECT %(book_id)s, f.field, c.id
FROM unnest(%(fields)s::text[]) AS f(field)
CROSS JOIN (SELECT id FROM crawls WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1) c
ON CONFLICT (book_id, field) DO UPDATE SET crawl_id = EXCLUDED.crawl_id, held_at = now()
RETURNING field;

-- release_held --
-- A page shows these fields of a book again: their held losses are void.
DELETE FROM held_losses WHERE book_id = %(book_id)s AND field = ANY (%(fields)s::text[]);

-- stored_coverage --
-- Of the books whose page was fetched since the crawl began (and, judged again, by its end), per category and
-- contract field: the pages, and those that showed the field (an optional field's held loss counts as not shown).
SELECT coalesce(b.category, '') AS category, f.field, count(*)::int AS pages,
       (count(*) FILTER (WHERE f.filled))::int AS filled
FROM books b
LEFT JOIN LATERAL (SELECT array_agg(h.field) AS held FROM held_losses h WHERE h.book_id = b.id) h ON true
CROSS JOIN LATERAL (VALUES
    ('title', b.title IS NOT NULL), ('category', b.category IS NOT NULL), ('upc', b.upc IS NOT NULL),
    ('product_type', b.product_type IS NOT NULL), ('price', b.price_amount IS NOT NULL),
    ('price_excl_tax', b.price_excl_tax IS NOT NULL), ('price_incl_tax', b.price_incl_tax IS NOT NULL),
    ('tax', b.tax IS NOT NULL), ('availability', b.availability IS NOT NULL),
    ('num_reviews', b.num_reviews IS NOT NULL), ('rating', b.rating_value IS NOT NULL),
    ('description', b.description IS NOT NULL AND NOT ('description' = ANY (coalesce(h.held, '{}')))),
    ('stock', b.stock IS NOT NULL AND NOT ('stock' = ANY (coalesce(h.held, '{}'))))
) AS f(field, filled)
WHERE b.fetched_at >= %(since)s AND (%(until)s::timestamptz IS NULL OR b.fetched_at <= %(until)s)
GROUP BY 1, 2;

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
SELECT crawl_id, category, field, pages, filled, base_crawl_id, base_pages, base_filled, drifted
FROM crawl_fields WHERE crawl_id = %(crawl_id)s ORDER BY field, category;

-- forget_coverage --
-- A crawl judged again (its report re-run) replaces its rows.
DELETE FROM crawl_fields WHERE crawl_id = %(crawl_id)s;

-- record_coverage --
-- One row of a crawl's judgement.
INSERT INTO crawl_fields (crawl_id, category, field, pages, filled, base_crawl_id, base_pages, base_filled, drifted)
VALUES (%(crawl_id)s, %(category)s, %(field)s, %(pages)s, %(filled)s, %(base_crawl_id)s, %(base_pages)s,
        %(base_filled)s, %(drifted)s);

-- apply_losses --
-- Apply the held losses of one field up to a crawl, but in the categories given (drift_apply_losses_v1).
SELECT drift_apply_losses_v1(%(crawl_id)s, %(field)s, %(hold)s::text[]) AS applied;

-- unaccepted_drift --
-- The drifted rows of crawls (one crawl, or every crawl when crawl_id is NULL) that no acceptance covers.
SELECT d.crawl_id, d.category, d.field, d.pages, d.filled, d.base_crawl_id, d.base_pages, d.base_filled, d.drifted
FROM crawl_fields d
WHERE d.drifted AND (%(crawl_id)s::bigint IS NULL OR d.crawl_id = %(crawl_id)s)
  AND NOT EXISTS (SELECT 1 FROM drift_acceptances a WHERE a.crawl_id = d.crawl_id AND a.field = d.field)
ORDER BY d.crawl_id, d.field, d.category;

-- held_by_crawl --
-- The losses held, per crawl and field.
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
                               drifted_filled, pages, filled)
VALUES (%(crawl_id)s, %(field)s, %(category)s, %(resolved_by)s, %(judged_crawl_id)s, %(drifted_pages)s,
        %(drifted_filled)s, %(pages)s, %(filled)s)
ON CONFLICT (crawl_id, field) DO UPDATE SET resolved_by = EXCLUDED.resolved_by, resolved_at = now(),
    category = EXCLUDED.category, judged_crawl_id = EXCLUDED.judged_crawl_id,
    drifted_pages = EXCLUDED.drifted_pages, drifted_filled = EXCLUDED.drifted_filled,
    pages = EXCLUDED.pages, filled = EXCLUDED.filled;

-- clear_drift --
-- A crawl's drift of a field resolved by a later crawl's new judgement: its rows no longer count as drifted.
UPDATE crawl_fields SET drifted = false WHERE crawl_id = %(crawl_id)s AND field = %(field)s AND drifted;

-- forget_resolutions --
-- A crawl judged again drifts in these fields: no resolution of them stands.
DELETE FROM drift_resolutions WHERE crawl_id = %(crawl_id)s AND field = ANY (%(fields)s::text[]);

-- resolutions --
-- Every drift a new judgement resolved, newest first.
SELECT crawl_id, field, category, resolved_by, resolved_at, judged_crawl_id, drifted_pages, drifted_filled,
       pages, filled
FROM drift_resolutions ORDER BY resolved_at DESC, crawl_id, field;
