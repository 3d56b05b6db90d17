-- Typed columns beside the seed's text ones, fetch provenance, and the history of changed books.
--
-- The seed's text columns (price '£51.77', rating 'Three', availability 'In stock (22 available)') keep
-- their meaning; the typed columns are what queries and the snapshot use.

ALTER TABLE books
    ADD COLUMN price_amount   NUMERIC(10, 2),
    ADD COLUMN price_excl_tax NUMERIC(10, 2),
    ADD COLUMN price_incl_tax NUMERIC(10, 2),
    ADD COLUMN tax            NUMERIC(10, 2),
    ADD COLUMN rating_value   SMALLINT CHECK (rating_value BETWEEN 1 AND 5),
    ADD COLUMN stock          INTEGER CHECK (stock >= 0),
    ADD COLUMN num_reviews    INTEGER CHECK (num_reviews >= 0),
    ADD COLUMN product_type   TEXT,
    ADD COLUMN content_hash   TEXT,
    ADD COLUMN http_status    SMALLINT,
    ADD COLUMN fetched_at     TIMESTAMPTZ,
    ADD COLUMN first_seen_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    ADD COLUMN updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    ADD COLUMN version        INTEGER NOT NULL DEFAULT 1,
    -- The DOM after scripts ran, kept only when it differs from raw_html (pages built by JavaScript).
    ADD COLUMN rendered_html  TEXT;

CREATE INDEX idx_books_category ON books (category);

-- One row per distinct state of a book: version 1 at first sight, a new row whenever a re-crawl finds
-- any extracted field changed. books always holds the latest version.
CREATE TABLE book_versions (
    book_id      BIGINT NOT NULL REFERENCES books (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    url          TEXT NOT NULL,
    fields       JSONB NOT NULL,
    changed      TEXT[] NOT NULL DEFAULT '{}',
    content_hash TEXT,
    fetched_at   TIMESTAMPTZ,
    recorded_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (book_id, version)
);
