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
