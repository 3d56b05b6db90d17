-- The last response of every page the crawl fetched, for conditional re-crawls: its validators, its headers,
-- and (for pages no other table keeps) its body, so a 304 Not Modified can be answered from the stored copy.
-- Written in the transaction that completes the page's task, under its lease.

CREATE TABLE pages (
    -- The URL requested: the task's (canonical) URL.
    url           TEXT PRIMARY KEY,
    -- The URL that served the stored response, after redirects: the validators belong to it.
    final_url     TEXT NOT NULL,
    -- Status of the stored response (2xx) and its headers, names lower-cased.
    status        SMALLINT NOT NULL,
    headers       JSONB NOT NULL,
    etag          TEXT,
    last_modified TEXT,
    -- The body exactly as served; NULL for a book page, whose copy is the book's raw_html / raw_body.
    body          BYTEA,
    -- sha256 hex of the served body: a 304 reuses a copy with this hash and no other.
    content_hash  TEXT NOT NULL,
    -- When the stored response was fetched, and when the site last confirmed it (a 200 or a 304).
    fetched_at    TIMESTAMPTZ NOT NULL,
    validated_at  TIMESTAMPTZ NOT NULL
);
