-- An author's birth place is stored as its page shows it, with the "in " the site prints before it
-- (book_assets/sites/quotes/parsers.py).

COMMENT ON COLUMN public.authors.birth_place IS 'The birth place as the page shows it, with the "in " the site prints before it ("in Ulm, Germany").';
