-- upsert_quote --
-- One quote of a listing page, keyed by its text and author: a new row at first sight, else its tags and its
-- page move to the page just read; a page without the author link (a script wrote it) never clears one.
-- The CTE reads the row as the statement's snapshot has it, before the statement's own write (a FOR UPDATE
-- there would skip the row this statement updates), so the result says whether the quote is new (inserted)
-- and whether its link or tags changed (changed: NULL when inserted).
WITH old AS (
    SELECT author_url, tags FROM quotes WHERE text = %(text)s AND author = %(author)s
)
INSERT INTO quotes (text, author, author_url, tags, page_url, content_hash, fetched_at)
VALUES (%(text)s, %(author)s, %(author_url)s, %(tags)s, %(page_url)s, %(content_hash)s, %(fetched_at)s)
ON CONFLICT (text, author) DO UPDATE
SET author_url = coalesce(EXCLUDED.author_url, quotes.author_url), tags = EXCLUDED.tags,
    page_url = EXCLUDED.page_url, content_hash = EXCLUDED.content_hash, fetched_at = EXCLUDED.fetched_at,
    updated_at = CASE WHEN (coalesce(EXCLUDED.author_url, quotes.author_url), EXCLUDED.tags)
                           IS DISTINCT FROM (quotes.author_url, quotes.tags) THEN now()
                      ELSE quotes.updated_at END
RETURNING id, NOT EXISTS (SELECT 1 FROM old) AS inserted,
          (SELECT (o.author_url, o.tags) IS DISTINCT FROM (quotes.author_url, quotes.tags) FROM old o) AS changed;

-- upsert_author --
-- One author page, keyed by its URL: a new row at first sight, else its fields and the page they were read
-- from; updated_at moves only when a field changed. Says, as upsert_quote, whether it is new or changed.
WITH old AS (
    SELECT name, birth_date, birth_place, description FROM authors WHERE url = %(url)s
)
INSERT INTO authors (url, name, birth_date, birth_place, description, raw_html, raw_body, content_hash,
                     http_status, fetched_at)
VALUES (%(url)s, %(name)s, %(birth_date)s, %(birth_place)s, %(description)s, %(raw_html)s, %(raw_body)s,
        %(content_hash)s, %(http_status)s, %(fetched_at)s)
ON CONFLICT (url) DO UPDATE
SET name = EXCLUDED.name, birth_date = EXCLUDED.birth_date, birth_place = EXCLUDED.birth_place,
    description = EXCLUDED.description, raw_html = EXCLUDED.raw_html, raw_body = EXCLUDED.raw_body,
    content_hash = EXCLUDED.content_hash, http_status = EXCLUDED.http_status, fetched_at = EXCLUDED.fetched_at,
    updated_at = CASE WHEN (EXCLUDED.name, EXCLUDED.birth_date, EXCLUDED.birth_place, EXCLUDED.description)
                           IS DISTINCT FROM (authors.name, authors.birth_date, authors.birth_place,
                                             authors.description) THEN now()
                      ELSE authors.updated_at END
RETURNING id, NOT EXISTS (SELECT 1 FROM old) AS inserted,
          (SELECT (o.name, o.birth_date, o.birth_place, o.description)
                  IS DISTINCT FROM (authors.name, authors.birth_date, authors.birth_place, authors.description)
           FROM old o) AS changed;

-- record_quote_version --
-- A quote's state as a new version when it differs from its latest one (or it has none): run after
-- upsert_quote, in its transaction, which holds the quote's row, so two writers of one quote number their
-- versions in turn. Returns the version recorded (no row: the state is the latest version's).
INSERT INTO quote_versions (quote_id, version, author_url, tags)
SELECT q.id, coalesce(v.version, 0) + 1, q.author_url, q.tags
FROM quotes q
LEFT JOIN LATERAL (
    SELECT version, author_url, tags FROM quote_versions WHERE quote_id = q.id ORDER BY version DESC LIMIT 1
) v ON true
WHERE q.id = %(id)s AND (v.version IS NULL OR (v.author_url, v.tags) IS DISTINCT FROM (q.author_url, q.tags))
RETURNING version;

-- record_author_version --
-- An author's state as a new version when it differs from its latest one (or it has none), as
-- record_quote_version does for a quote.
INSERT INTO author_versions (author_id, version, name, birth_date, birth_place, description)
SELECT a.id, coalesce(v.version, 0) + 1, a.name, a.birth_date, a.birth_place, a.description
FROM authors a
LEFT JOIN LATERAL (
    SELECT version, name, birth_date, birth_place, description FROM author_versions
    WHERE author_id = a.id ORDER BY version DESC LIMIT 1
) v ON true
WHERE a.id = %(id)s
  AND (v.version IS NULL OR (v.name, v.birth_date, v.birth_place, v.description)
                            IS DISTINCT FROM (a.name, a.birth_date, a.birth_place, a.description))
RETURNING version;

-- confirm_author --
-- A 304 for an author page: the stored author stands, seen at the 304's fetch, when it still holds the copy the
-- validators describe (no row: the copy changed since, and the page is fetched again).
UPDATE authors SET fetched_at = %(fetched_at)s
WHERE url = %(url)s AND content_hash = %(content_hash)s
RETURNING id;

-- author_counts --
-- The stored authors, those with their page's HTML, and their versions, for a crawl's figures and status.
SELECT count(*) AS total, count(*) FILTER (WHERE raw_html <> '') AS with_html,
       (SELECT count(*) FROM author_versions) AS versions
FROM authors;

-- authors_since --
-- Authors stored as new (version 1) and as changed (a later version) since a time (by the database's clock), for a
-- run's figures.
SELECT count(*) FILTER (WHERE version = 1) AS new, count(*) FILTER (WHERE version > 1) AS changed
FROM author_versions WHERE recorded_at >= %(since)s;

-- export_quotes --
-- Every stored quote, in id order (book_assets/sites/quotes/publishing.py).
SELECT id, text, author, author_url, tags, page_url, content_hash, fetched_at, first_seen_at, updated_at
FROM quotes ORDER BY id;

-- export_authors --
-- Every stored author's fields (the page's HTML only when asked), in id order.
SELECT id, url, name, birth_date, birth_place, description, content_hash, http_status, fetched_at,
       first_seen_at, updated_at, CASE WHEN %(with_html)s THEN raw_html END AS raw_html
FROM authors ORDER BY id;

-- changes_of_day --
-- Each quote and author whose state changed on a day (UTC), compared between the day's start and its end: new
-- (no version before the day), changed (its state at the end differs from the start's: fields names the
-- columns that differ), in its state at the day's end. A record changed and changed back within the day is not
-- listed. Quotes and authors are never removed here (a quotes crawl decides no removals).
WITH bounds AS (
    SELECT %(day)s::date::timestamp AT TIME ZONE 'UTC' AS since,
           (%(day)s::date + 1)::timestamp AT TIME ZONE 'UTC' AS until
), quote_days AS (
    SELECT q.id, q.text, q.author, e.author_url, e.tags, e.version, e.recorded_at,
           s.version AS start_version, s.author_url AS start_author_url, s.tags AS start_tags
    FROM quotes q, bounds b
    CROSS JOIN LATERAL (
        SELECT version, author_url, tags, recorded_at FROM quote_versions
        WHERE quote_id = q.id AND recorded_at < b.until ORDER BY version DESC LIMIT 1
    ) e
    LEFT JOIN LATERAL (
        SELECT version, author_url, tags FROM quote_versions
        WHERE quote_id = q.id AND recorded_at < b.since ORDER BY version DESC LIMIT 1
    ) s ON true
    WHERE e.recorded_at >= b.since
), author_days AS (
    SELECT a.id, a.url, e.name, e.birth_date, e.birth_place, e.description, e.version, e.recorded_at,
           s.version AS start_version, s.name AS start_name, s.birth_date AS start_birth_date,
           s.birth_place AS start_birth_place, s.description AS start_description
    FROM authors a, bounds b
    CROSS JOIN LATERAL (
        SELECT version, name, birth_date, birth_place, description, recorded_at FROM author_versions
        WHERE author_id = a.id AND recorded_at < b.until ORDER BY version DESC LIMIT 1
    ) e
    LEFT JOIN LATERAL (
        SELECT version, name, birth_date, birth_place, description FROM author_versions
        WHERE author_id = a.id AND recorded_at < b.since ORDER BY version DESC LIMIT 1
    ) s ON true
    WHERE e.recorded_at >= b.since
), changed AS (
    SELECT 'quote' AS record, id, author_url AS url, author, text, tags, NULL::date AS birth_date,
           NULL::text AS birth_place, NULL::text AS description, version, recorded_at,
           start_version IS NULL AS is_new,
           array_remove(ARRAY[CASE WHEN author_url IS DISTINCT FROM start_author_url THEN 'author_url' END,
                              CASE WHEN tags IS DISTINCT FROM start_tags THEN 'tags' END], NULL) AS fields
    FROM quote_days
    UNION ALL
    SELECT 'author', id, url, name, NULL, NULL, birth_date, birth_place, description, version, recorded_at,
           start_version IS NULL,
           array_remove(ARRAY[CASE WHEN name IS DISTINCT FROM start_name THEN 'name' END,
                              CASE WHEN birth_date IS DISTINCT FROM start_birth_date THEN 'birth_date' END,
                              CASE WHEN birth_place IS DISTINCT FROM start_birth_place THEN 'birth_place' END,
                              CASE WHEN description IS DISTINCT FROM start_description THEN 'description' END],
                        NULL)
    FROM author_days
)
SELECT %(day)s::date AS day, CASE WHEN is_new THEN 'new' ELSE 'changed' END AS change, record, id, url, author,
       text, tags, birth_date, birth_place, description, version,
       CASE WHEN is_new THEN '{}'::text[] ELSE fields END AS fields, recorded_at AS changed_at
FROM changed
WHERE is_new OR cardinality(fields) > 0
ORDER BY NOT is_new, record, id;

-- authors_for_reextract --
-- Stored author pages to parse again, in id order, a batch after a given id (keyset pagination).
SELECT id, url, raw_html FROM authors WHERE id > %(after)s ORDER BY id LIMIT %(limit)s;

-- reextract_author --
-- An author's fields parsed again from its stored page (the stored fetch stays); updated_at moves only when a
-- field changed. Returns whether one did (no row: the author is gone, or nothing changed); the caller then
-- records the version (record_author_version).
UPDATE authors SET name = %(name)s, birth_date = %(birth_date)s, birth_place = %(birth_place)s,
                   description = %(description)s, updated_at = now()
WHERE id = %(id)s
  AND (name, birth_date, birth_place, description)
      IS DISTINCT FROM (%(name)s, %(birth_date)s::date, %(birth_place)s, %(description)s)
RETURNING id;

-- snapshot_tag_counts --
-- Quotes per tag as they stood at a time: each quote's latest version recorded before it, its category the first
-- of that version's tags (a quote with no tag then is in none).
SELECT v.tags[1] AS category, count(*)::int AS available
FROM quotes q
CROSS JOIN LATERAL (
    SELECT tags FROM quote_versions WHERE quote_id = q.id AND recorded_at < %(until)s ORDER BY version DESC LIMIT 1
) v
WHERE cardinality(v.tags) > 0
GROUP BY v.tags[1]
ORDER BY v.tags[1];

-- snapshot_select --
-- The first quota[i] quotes of each tag[i] as they stood at a time (each quote's latest version before it, its
-- category that version's first tag): the most recently recorded first, then lowest id.
SELECT s.text, s.author, s.author_url, s.category, s.tags, s.recorded_at
FROM (
    SELECT q.id, q.text, q.author, v.author_url, v.tags, v.tags[1] AS category, v.recorded_at,
           row_number() OVER (PARTITION BY v.tags[1] ORDER BY v.recorded_at DESC, q.id) AS rank
    FROM quotes q
    CROSS JOIN LATERAL (
        SELECT author_url, tags, recorded_at FROM quote_versions
        WHERE quote_id = q.id AND recorded_at < %(until)s ORDER BY version DESC LIMIT 1
    ) v
    WHERE v.tags[1] = ANY(%(categories)s::text[])
) s
JOIN unnest(%(categories)s::text[], %(quotas)s::int[]) AS t(category, quota) ON t.category = s.category
WHERE s.rank <= t.quota
ORDER BY s.category, s.rank;

-- duplicate_author_urls --
-- Author URLs stored more than once (authors.url is UNIQUE, so this guards against a dropped constraint); a
-- data check of the quotes' details asset, as every query below: bad, total and a sample of offending URLs.
SELECT coalesce(sum(n - 1), 0)::bigint AS bad,
       (SELECT count(*) FROM authors) AS total,
       coalesce((array_agg(url ORDER BY url))[1:5], '{}') AS sample
FROM (SELECT url, count(*) AS n FROM authors GROUP BY url HAVING count(*) > 1) AS dup;

-- authors_missing_raw_html --
-- Authors stored without the HTML of their page.
SELECT count(*) FILTER (WHERE raw_html = '') AS bad,
       count(*) AS total,
       coalesce((array_agg(url ORDER BY id) FILTER (WHERE raw_html = ''))[1:5], '{}') AS sample
FROM authors;

-- authors_missing_required_fields --
-- Authors without one of the fields every author page shows: a name, a birth date and a birth place.
WITH bad AS (
    SELECT id, url FROM authors
    WHERE btrim(name) = '' OR birth_date IS NULL OR btrim(birth_place) IN ('', 'in')
)
SELECT (SELECT count(*) FROM bad) AS bad,
       (SELECT count(*) FROM authors) AS total,
       coalesce((SELECT (array_agg(url ORDER BY id))[1:5] FROM bad), '{}') AS sample;

-- quotes_without_their_author --
-- Quotes whose author link names no stored author (the sample: the author links); a quote a script wrote
-- carries no link and is not judged.
WITH bad AS (
    SELECT q.id, q.author_url FROM quotes q
    WHERE q.author_url IS NOT NULL AND NOT EXISTS (SELECT 1 FROM authors a WHERE a.url = q.author_url)
)
SELECT (SELECT count(*) FROM bad) AS bad,
       (SELECT count(*) FROM quotes WHERE author_url IS NOT NULL) AS total,
       coalesce((SELECT (array_agg(DISTINCT author_url))[1:5] FROM bad), '{}') AS sample;
