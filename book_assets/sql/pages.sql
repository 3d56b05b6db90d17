-- page_validators --
-- What conditional requests for pages send: the validators of their stored responses (one query for a
-- worker's whole claimed batch).
SELECT url, final_url, etag, last_modified, content_hash FROM pages WHERE url = ANY(%(urls)s);

-- store_page --
-- The response a task just stored; an older fetch (a stalled worker's) never replaces a newer one.
INSERT INTO pages (url, final_url, status, headers, etag, last_modified, body, content_hash, fetched_at,
                   validated_at)
VALUES (%(url)s, %(final_url)s, %(status)s, %(headers)s, %(etag)s, %(last_modified)s, %(body)s, %(content_hash)s,
        %(fetched_at)s, %(validated_at)s)
ON CONFLICT (url) DO UPDATE
SET final_url = EXCLUDED.final_url, status = EXCLUDED.status, headers = EXCLUDED.headers, etag = EXCLUDED.etag,
    last_modified = EXCLUDED.last_modified, body = EXCLUDED.body, content_hash = EXCLUDED.content_hash,
    fetched_at = EXCLUDED.fetched_at, validated_at = greatest(pages.validated_at, EXCLUDED.validated_at)
WHERE pages.fetched_at <= EXCLUDED.fetched_at;

-- stored_copy --
-- The stored response a 304 refers to, if it is still the one whose validators were sent.
SELECT final_url, status, headers, body, content_hash, fetched_at
FROM pages WHERE url = %(url)s AND content_hash = %(content_hash)s AND body IS NOT NULL;

-- kept_responses --
-- The stored responses of these URLs that kept their body (a listing's, or a book page that failed its
-- contract), as last confirmed: a later 304 moves the fetch time, as it moves a stored book's.
SELECT url, final_url, status, headers, body, greatest(fetched_at, validated_at) AS fetched_at
FROM pages WHERE url = ANY(%(urls)s) AND body IS NOT NULL;

-- revalidate_page --
-- A 304 confirmed the stored response (the one with this hash) at this time.
UPDATE pages SET validated_at = greatest(validated_at, %(validated_at)s)
WHERE url = %(url)s AND content_hash = %(content_hash)s
RETURNING final_url;

-- forget_page --
-- Drop a page's stored response: the next fetch of it is unconditional.
DELETE FROM pages WHERE url = %(url)s;

-- revalidated_since --
-- Pages a 304 confirmed since a moment (confirmed then, fetched before it).
SELECT count(*) AS n FROM pages WHERE validated_at >= %(since)s AND fetched_at < %(since)s;
