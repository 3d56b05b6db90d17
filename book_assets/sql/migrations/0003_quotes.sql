-- quotes.toscrape.com's records (book_assets/sites/quotes/models.py): the quotes its listing pages show and
-- the authors its author pages describe, written by book_assets/sites/quotes/store.py with the named queries
-- of quotes.sql.

CREATE TABLE public.quotes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    text text NOT NULL,
    author text NOT NULL,
    author_url text,
    tags text[] NOT NULL DEFAULT '{}',
    page_url text NOT NULL,
    content_hash text,
    fetched_at timestamp with time zone,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT quotes_text_author_key UNIQUE (text, author)
);

COMMENT ON TABLE public.quotes IS 'Every quote of quotes.toscrape.com, one row per text and author (its natural key: the site gives a
quote no id), in its latest state (upsert_quote in quotes.sql). A quote is a record of a listing page, so the
row points at the last page that showed it (page_url, content_hash) instead of holding that page''s HTML.';
COMMENT ON COLUMN public.quotes.id IS 'Surrogate key.';
COMMENT ON COLUMN public.quotes.text IS 'The quote as the page shows it, whitespace collapsed, with the curly quotes the site prints
around it (so it equals the text of the application''s data).';
COMMENT ON COLUMN public.quotes.author IS 'The author''s name as the quote shows it.';
COMMENT ON COLUMN public.quotes.author_url IS 'URL of the author''s page (authors.url), from the quote''s "(about)" link; NULL until a page with
the link shows the quote (the pages a script writes have none), and never cleared by one without it.';
COMMENT ON COLUMN public.quotes.tags IS 'The quote''s tags in page order (the first is its fairness group); empty when it has none.';
COMMENT ON COLUMN public.quotes.page_url IS 'The listing page that last showed the quote.';
COMMENT ON COLUMN public.quotes.content_hash IS 'sha256 of the bytes of that page''s fetch: the page''s record in the archive.';
COMMENT ON COLUMN public.quotes.fetched_at IS 'When that page was fetched: the last time the quote was seen.';
COMMENT ON COLUMN public.quotes.first_seen_at IS 'When the quote was first stored.';
COMMENT ON COLUMN public.quotes.updated_at IS 'When its author_url or tags last changed (first_seen_at until then).';

CREATE TABLE public.authors (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url text NOT NULL UNIQUE,
    name text NOT NULL,
    birth_date date NOT NULL,
    birth_place text NOT NULL,
    description text,
    raw_html text NOT NULL,
    raw_body bytea,
    content_hash text,
    http_status smallint,
    fetched_at timestamp with time zone,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

COMMENT ON TABLE public.authors IS 'Every author page of quotes.toscrape.com, keyed by its URL, in its latest state with the page it was
read from (upsert_author in quotes.sql).';
COMMENT ON COLUMN public.authors.id IS 'Surrogate key.';
COMMENT ON COLUMN public.authors.url IS 'The URL the page was served from (/author/<slug>/): what quotes.author_url points at.';
COMMENT ON COLUMN public.authors.name IS 'The author''s name (h3.author-title).';
COMMENT ON COLUMN public.authors.birth_date IS 'The birth date the page shows ("March 14, 1879").';
COMMENT ON COLUMN public.authors.birth_place IS 'The birth place the page shows, without its leading "in " ("Ulm, Germany").';
COMMENT ON COLUMN public.authors.description IS 'The page''s description, whitespace collapsed; NULL when it shows none.';
COMMENT ON COLUMN public.authors.raw_html IS 'The served HTML the row was read from, as decoded.';
COMMENT ON COLUMN public.authors.raw_body IS 'The served bytes when raw_html does not reproduce them (invalid UTF-8, a legacy charset), else NULL.';
COMMENT ON COLUMN public.authors.content_hash IS 'sha256 of the served bytes of that fetch.';
COMMENT ON COLUMN public.authors.http_status IS 'HTTP status of that fetch.';
COMMENT ON COLUMN public.authors.fetched_at IS 'When that page was fetched: the last time the author was seen.';
COMMENT ON COLUMN public.authors.first_seen_at IS 'When the author was first stored.';
COMMENT ON COLUMN public.authors.updated_at IS 'When a field read from the page (name, birth date or place, description) last changed.';
