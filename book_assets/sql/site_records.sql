-- The generic record store (book_assets/sites/generic/store.py): the detail records of every catalogue that keeps
-- no tables of its own, one row of site_records per site and page URL, the record's fields as JSON.

-- upsert_site_record --
-- One detail page's record, keyed by its site and URL: a new row at first sight, else its fields and the page they
-- were read from; version and updated_at move only when its fields or category changed. The CTE reads the row as
-- the statement's snapshot has it (as upsert_author in quotes.sql does), so the result says whether the record is
-- new (inserted) and whether it changed (changed: NULL when inserted).
WITH old AS (
    SELECT fields, category FROM site_records WHERE site = %(site)s AND url = %(url)s
)
INSERT INTO site_records (site, url, fields, category, raw_html, raw_body, content_hash, http_status, fetched_at)
VALUES (%(site)s, %(url)s, %(fields)s, %(category)s, %(raw_html)s, %(raw_body)s, %(content_hash)s,
        %(http_status)s, %(fetched_at)s)
ON CONFLICT (site, url) DO UPDATE
SET fields = EXCLUDED.fields, category = EXCLUDED.category, raw_html = EXCLUDED.raw_html,
    raw_body = EXCLUDED.raw_body, content_hash = EXCLUDED.content_hash, http_status = EXCLUDED.http_status,
    fetched_at = EXCLUDED.fetched_at,
    version = site_records.version
              + CASE WHEN (EXCLUDED.fields, EXCLUDED.category) IS DISTINCT FROM (site_records.fields, site_records.category)
                     THEN 1 ELSE 0 END,
    updated_at = CASE WHEN (EXCLUDED.fields, EXCLUDED.category) IS DISTINCT FROM (site_records.fields, site_records.category)
                      THEN now() ELSE site_records.updated_at END
RETURNING id, version, NOT EXISTS (SELECT 1 FROM old) AS inserted,
          (SELECT (o.fields, o.category) IS DISTINCT FROM (site_records.fields, site_records.category) FROM old o)
          AS changed;

-- confirm_site_record --
-- A 304 for a detail page: its stored record stands, seen at the 304's fetch, when it still holds the copy the
-- validators describe (no row: the copy changed since, and the page is fetched again).
UPDATE site_records SET fetched_at = %(fetched_at)s
WHERE site = %(site)s AND url = %(url)s AND content_hash = %(content_hash)s
RETURNING id, version;

-- site_record_counts --
-- A site's stored records, those with their page's HTML, and the states they went through (each record's version),
-- for a crawl's figures and status.
SELECT count(*) AS total, count(*) FILTER (WHERE raw_html <> '') AS with_html,
       coalesce(sum(version), 0)::bigint AS versions
FROM site_records WHERE site = %(site)s;

-- site_records_since --
-- A site's records stored as new since a time (by the database's clock), and those stored before it whose fields
-- changed since, for a run's figures.
SELECT count(*) FILTER (WHERE first_seen_at >= %(since)s) AS new,
       count(*) FILTER (WHERE first_seen_at < %(since)s AND updated_at >= %(since)s) AS changed
FROM site_records WHERE site = %(site)s;

-- export_site_records --
-- Every stored record of a site with its fields (the page's HTML only when asked), in id order.
SELECT id, url, category, fields, version, content_hash, http_status, fetched_at, first_seen_at, updated_at,
       CASE WHEN %(with_html)s THEN raw_html END AS raw_html
FROM site_records WHERE site = %(site)s ORDER BY id;

-- duplicate_site_record_urls --
-- A site's record URLs stored more than once (site_records is UNIQUE by site and URL, so this guards against a
-- dropped constraint).
SELECT coalesce(sum(n - 1), 0)::bigint AS bad,
       (SELECT count(*) FROM site_records WHERE site = %(site)s) AS total,
       coalesce((array_agg(url ORDER BY url))[1:5], '{}') AS sample
FROM (SELECT url, count(*) AS n FROM site_records WHERE site = %(site)s GROUP BY url HAVING count(*) > 1) AS dup;

-- site_records_missing_raw_html --
-- A site's records stored without the HTML of their page.
SELECT count(*) FILTER (WHERE raw_html = '') AS bad,
       count(*) AS total,
       coalesce((array_agg(url ORDER BY id) FILTER (WHERE raw_html = ''))[1:5], '{}') AS sample
FROM site_records WHERE site = %(site)s;

-- site_records_missing_required_fields --
-- A site's records lacking one of the fields its record requires (absent, JSON null or an empty string).
WITH bad AS (
    SELECT id, url FROM site_records r
    WHERE site = %(site)s
      AND EXISTS (SELECT 1 FROM unnest(%(required)s::text[]) AS f(name) WHERE coalesce(r.fields ->> f.name, '') = '')
)
SELECT (SELECT count(*) FROM bad) AS bad,
       (SELECT count(*) FROM site_records WHERE site = %(site)s) AS total,
       coalesce((SELECT (array_agg(url ORDER BY id))[1:5] FROM bad), '{}') AS sample;

-- site_records_for_reextract --
-- A site's stored pages to parse again, in id order, a batch after a given id (keyset pagination).
SELECT id, url, raw_html FROM site_records WHERE site = %(site)s AND id > %(after)s ORDER BY id LIMIT %(limit)s;

-- reextract_site_record --
-- A record's fields parsed again from its stored page (the stored fetch stays): written, with one more version,
-- only when its fields or category changed. Returns the row when they did (no row: nothing changed).
UPDATE site_records SET fields = %(fields)s, category = %(category)s, version = version + 1, updated_at = now()
WHERE id = %(id)s AND (fields, category) IS DISTINCT FROM (%(fields)s::jsonb, %(category)s::text)
RETURNING id;
