-- A crawl is of one site: opening one abandons only the open crawls of its own site, so a crawl of one catalogue
-- begun while another's runs leaves that crawl to settle its own removals (open_crawl in
-- book_assets/store/lifecycle.py). The crawls before this migration were all of the one site there was.

ALTER TABLE public.crawls ADD COLUMN site text DEFAULT 'books'::text NOT NULL;
ALTER TABLE public.crawls ALTER COLUMN site DROP DEFAULT;

COMMENT ON COLUMN public.crawls.site IS 'The site the crawl is of (the site setting): a crawl opening abandons the open crawls of its site only.';
