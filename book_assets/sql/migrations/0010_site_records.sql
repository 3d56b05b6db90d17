-- The records of every catalogue written by `book-pipeline site new` that keeps no tables of its own: one row per
-- (site, detail page URL), the record's fields as JSON beside the page it was read from, written by
-- book_assets/sites/generic/store.py with the named queries of site_records.sql. A site may still keep its own
-- tables, as quotes do (docs/sites.md, "Adding a catalogue").

CREATE TABLE public.site_records (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site text NOT NULL,
    url text NOT NULL,
    fields jsonb NOT NULL,
    category text,
    version integer DEFAULT 1 NOT NULL,
    raw_html text NOT NULL,
    raw_body bytea,
    content_hash text NOT NULL,
    http_status smallint,
    fetched_at timestamp with time zone,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT site_records_site_url_key UNIQUE (site, url)
);

COMMENT ON TABLE public.site_records IS 'Every detail record of the catalogues stored by the generic record store, one row per site and page URL, in
its latest state with the page it was read from (upsert_site_record in site_records.sql). Its earlier states are
not kept: version counts them.';
COMMENT ON COLUMN public.site_records.id IS 'Surrogate key.';
COMMENT ON COLUMN public.site_records.site IS 'The site definition''s name (--site).';
COMMENT ON COLUMN public.site_records.url IS 'The canonical URL the page was served from: the record''s key within its site.';
COMMENT ON COLUMN public.site_records.fields IS 'The record''s fields but its URL and category, as JSON (dates as ISO text, decimals as text, tuples as arrays).';
COMMENT ON COLUMN public.site_records.category IS 'The record''s category field, where its record has one; else NULL.';
COMMENT ON COLUMN public.site_records.version IS '1 when first stored, then one more each time its fields or category changed.';
COMMENT ON COLUMN public.site_records.raw_html IS 'The served HTML the row was read from, as decoded.';
COMMENT ON COLUMN public.site_records.raw_body IS 'The served bytes when raw_html does not reproduce them (invalid UTF-8, a legacy charset), else NULL.';
COMMENT ON COLUMN public.site_records.content_hash IS 'sha256 of the served bytes of that fetch: what a 304 is checked against.';
COMMENT ON COLUMN public.site_records.http_status IS 'HTTP status of that fetch.';
COMMENT ON COLUMN public.site_records.fetched_at IS 'When the page was last fetched or confirmed by a 304: the last time the record was seen.';
COMMENT ON COLUMN public.site_records.first_seen_at IS 'When the record was first stored.';
COMMENT ON COLUMN public.site_records.updated_at IS 'When its fields or category last changed (first_seen_at until then).';
