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

-- confirm_author --
-- A 304 for an author page: the stored author stands, seen at the 304's fetch, when it still holds the copy the
-- validators describe (no row: the copy changed since, and the page is fetched again).
UPDATE authors SET fetched_at = %(fetched_at)s
WHERE url = %(url)s AND content_hash = %(content_hash)s
RETURNING id;

-- author_counts --
-- The stored authors, and those with their page's HTML, for a crawl's figures and status.
SELECT count(*) AS total, count(*) FILTER (WHERE raw_html <> '') AS with_html FROM authors;

-- authors_since --
-- Authors stored as new and as changed since a time (by the database's clock), for a run's figures.
SELECT count(*) FILTER (WHERE first_seen_at >= %(since)s) AS new,
       count(*) FILTER (WHERE first_seen_at < %(since)s AND updated_at >= %(since)s) AS changed
FROM authors;

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
-- The quotes and authors new on a day (first stored that day, UTC) or changed on it (stored before it, their
-- latest change that day), in their latest state: quotes and authors keep no versions, so a change that a later
-- change superseded is not shown, and the values are today's, not the day's end.
WITH bounds AS (
    SELECT %(day)s::date::timestamp AT TIME ZONE 'UTC' AS since,
           (%(day)s::date + 1)::timestamp AT TIME ZONE 'UTC' AS until
), changed AS (
    SELECT 'quote' AS record, q.id, q.author_url AS url, q.author, q.text, q.tags,
           NULL::date AS birth_date, NULL::text AS birth_place, NULL::text AS description,
           q.first_seen_at, q.updated_at
    FROM quotes q, bounds b
    WHERE (q.first_seen_at >= b.since AND q.first_seen_at < b.until)
       OR (q.first_seen_at < b.since AND q.updated_at >= b.since AND q.updated_at < b.until)
    UNION ALL
    SELECT 'author', a.id, a.url, a.name, NULL, NULL, a.birth_date, a.birth_place, a.description,
           a.first_seen_at, a.updated_at
    FROM authors a, bounds b
    WHERE (a.first_seen_at >= b.since AND a.first_seen_at < b.until)
       OR (a.first_seen_at < b.since AND a.updated_at >= b.since AND a.updated_at < b.until)
)
SELECT %(day)s::date AS day,
       CASE WHEN c.first_seen_at >= b.since THEN 'new' ELSE 'changed' END AS change,
       c.record, c.id, c.url, c.author, c.text, c.tags, c.birth_date, c.birth_place, c.description,
       c.first_seen_at, c.updated_at
FROM changed c, bounds b
ORDER BY c.first_seen_at < b.since, c.record, c.id;

-- authors_for_reextract --
-- Stored author pages to parse again, in id order, a batch after a given id (keyset pagination).
SELECT id, url, raw_html FROM authors WHERE id > %(after)s ORDER BY id LIMIT %(limit)s;

-- reextract_author --
-- An author's fields parsed again from its stored page (the stored fetch stays); updated_at moves only when a
-- field changed. Returns whether one did (no row: the author is gone, or nothing changed).
UPDATE authors SET name = %(name)s, birth_date = %(birth_date)s, birth_place = %(birth_place)s,
                   description = %(description)s, updated_at = now()
WHERE id = %(id)s
  AND (name, birth_date, birth_place, description)
      IS DISTINCT FROM (%(name)s, %(birth_date)s::date, %(birth_place)s, %(description)s)
RETURNING id;

-- snapshot_tag_counts --
-- Quotes first stored before a time, per tag (a quote's first tag; a quote with no tag is in none).
SELECT tags[1] AS category, count(*)::int AS available
FROM quotes
WHERE first_seen_at < %(until)s AND cardinality(tags) > 0
GROUP BY tags[1]
ORDER BY tags[1];

-- snapshot_select --
-- The first quota[i] quotes of each tag[i] (first tag) first stored before a time: the latest first, then
-- lowest id.
SELECT q.text, q.author, q.author_url, q.category, q.tags, q.first_seen_at
FROM (
    SELECT q.*, q.tags[1] AS category,
           row_number() OVER (PARTITION BY q.tags[1] ORDER BY q.first_seen_at DESC, q.id) AS rank
    FROM quotes q
    WHERE q.first_seen_at < %(until)s AND q.tags[1] = ANY(%(categories)s::text[])
) q
JOIN unnest(%(categories)s::text[], %(quotas)s::int[]) AS t(category, quota) ON t.category = q.category
WHERE q.rank <= t.quota
ORDER BY q.category, q.rank;
