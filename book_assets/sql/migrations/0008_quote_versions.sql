-- Quotes and authors keep their versions: each distinct state a crawl (or reextract) stored is a row, so a day's
-- change feed and a day's snapshot read the records as they stood then (changes_of_day and snapshot_select in
-- quotes.sql; record_quote_version and record_author_version write them). The rows stored before this migration
-- get their present state as version 1, recorded when they were first seen: their earlier states are not known.

CREATE TABLE public.quote_versions (
    quote_id bigint NOT NULL REFERENCES public.quotes(id) ON DELETE CASCADE,
    version integer NOT NULL,
    author_url text,
    tags text[] NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    PRIMARY KEY (quote_id, version)
);

COMMENT ON TABLE public.quote_versions IS 'Each distinct state of a quote''s fields that change (its author link and tags; its text and author are its key), in
order (record_quote_version in quotes.sql).';
COMMENT ON COLUMN public.quote_versions.quote_id IS 'The quote (quotes.id).';
COMMENT ON COLUMN public.quote_versions.version IS '1 for the state first stored, then one more for each state that differs from the one before.';
COMMENT ON COLUMN public.quote_versions.author_url IS 'quotes.author_url in this state.';
COMMENT ON COLUMN public.quote_versions.tags IS 'quotes.tags in this state (the first is the quote''s category).';
COMMENT ON COLUMN public.quote_versions.recorded_at IS 'When the state was stored.';

CREATE TABLE public.author_versions (
    author_id bigint NOT NULL REFERENCES public.authors(id) ON DELETE CASCADE,
    version integer NOT NULL,
    name text NOT NULL,
    birth_date date NOT NULL,
    birth_place text NOT NULL,
    description text,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    PRIMARY KEY (author_id, version)
);

COMMENT ON TABLE public.author_versions IS 'Each distinct state of an author''s fields read from its page, in order (record_author_version in quotes.sql).';
COMMENT ON COLUMN public.author_versions.author_id IS 'The author (authors.id).';
COMMENT ON COLUMN public.author_versions.version IS '1 for the state first stored, then one more for each state that differs from the one before.';
COMMENT ON COLUMN public.author_versions.name IS 'authors.name in this state.';
COMMENT ON COLUMN public.author_versions.birth_date IS 'authors.birth_date in this state.';
COMMENT ON COLUMN public.author_versions.birth_place IS 'authors.birth_place in this state.';
COMMENT ON COLUMN public.author_versions.description IS 'authors.description in this state.';
COMMENT ON COLUMN public.author_versions.recorded_at IS 'When the state was stored.';

INSERT INTO public.quote_versions (quote_id, version, author_url, tags, recorded_at)
SELECT id, 1, author_url, tags, first_seen_at FROM public.quotes;

INSERT INTO public.author_versions (author_id, version, name, birth_date, birth_place, description, recorded_at)
SELECT id, 1, name, birth_date, birth_place, description, first_seen_at FROM public.authors;
