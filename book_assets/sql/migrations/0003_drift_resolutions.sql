-- A drift resolved by judging its crawl again (book_assets/store/drift.py rejudge): the parser fixed, reextract
-- rebuilt the crawl's pages from what was kept, and the fill rates came back. The queries are drift.sql's.

CREATE TABLE public.drift_resolutions (
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    field text NOT NULL,
    category text NOT NULL,
    resolved_by text NOT NULL,
    resolved_at timestamp with time zone DEFAULT now() NOT NULL,
    judged_crawl_id bigint NOT NULL,
    drifted_pages integer NOT NULL,
    drifted_filled integer NOT NULL,
    pages integer NOT NULL,
    filled integer NOT NULL,
    PRIMARY KEY (crawl_id, field)
);

COMMENT ON TABLE public.drift_resolutions IS 'A field of a crawl that drifted and no longer does when the crawl is judged again from what is
stored (book-pipeline reextract: the fixed parser rebuilt the pages the crawl held): by what (resolved_by), when,
and its figures in the headline row of the drift (category empty: the whole crawl) as judged at the crawl''s end
(drifted_pages, drifted_filled) and as judged again (pages, filled) in judged_crawl_id: the crawl itself, or a
later one that fetched its pages again and whose drift of the field was resolved with it. The crawl''s
crawl_fields rows are the new judgement (none when a later crawl judged it); this row keeps what was resolved. No acceptance is recorded: the drift was the parser''s, not the site''s.';
