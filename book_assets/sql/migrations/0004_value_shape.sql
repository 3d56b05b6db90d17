-- Value shape drift (book_assets/store/drift.py): a field that stays filled with values of another shape (every
-- rating 1, every description a few characters) drifts as a field that empties does. Each coverage row keeps its
-- values' shape beside its fill rate; a held loss now holds any value a page of the running crawl would write over
-- a stored one (a changed value or none), since the crawl's end alone can tell a changed book from a redesign.
-- The queries are drift.sql's.

ALTER TABLE public.crawl_fields
    ADD COLUMN measured integer CHECK (measured >= 0),
    ADD COLUMN top_count integer,
    ADD COLUMN top_value text,
    ADD COLUMN median_length integer,
    ADD COLUMN base_measured integer,
    ADD COLUMN base_top_count integer,
    ADD COLUMN base_median_length integer,
    ADD COLUMN drifted_on text CHECK (drifted_on = ANY (ARRAY['fill'::text, 'length'::text, 'top'::text])),
    ADD CONSTRAINT crawl_fields_top_count_check CHECK (top_count >= 0 AND top_count <= measured);

COMMENT ON TABLE public.crawl_fields IS 'The coverage of each contract field (BOOK_CONTRACT) in one crawl: of the book pages the crawl
stored or failed as missing_field / bad_value (pages), those that showed the field with a value of its type
(filled); category is empty for the whole crawl, else a category with at least drift_min_pages pages. The shape
of the values the stored pages showed (held values counted as shown, judge in book_assets/store/drift.py): how
many (measured), the most common one (top_value) and how many showed it (top_count), and, for a text field, the
median length in characters (median_length); NULL where the field has no such measure. A crawl''s rows are
written when it ends (judge_fields in book_assets/crawl/pipeline.py), with the last good crawl it was judged
against and that crawl''s figures (base_*), and whether the field drifted (drifted) and on what (drifted_on: the
fill rate fell by more than drift_threshold, the median length moved by more than drift_length_ratio, the most
common value''s share rose by more than drift_top_share). The last good crawl is the latest earlier one whose
every drifted field was accepted (drift_acceptances).';

ALTER TABLE public.drift_resolutions
    ADD COLUMN drifted_on text CHECK (drifted_on = ANY (ARRAY['fill'::text, 'length'::text, 'top'::text])),
    ADD COLUMN drifted_measured integer,
    ADD COLUMN drifted_top_count integer,
    ADD COLUMN drifted_median_length integer,
    ADD COLUMN measured integer,
    ADD COLUMN top_count integer,
    ADD COLUMN median_length integer;

COMMENT ON COLUMN public.drift_resolutions.drifted_on IS 'The figure the field drifted on (crawl_fields.drifted_on); with the shape of its values as judged at the
crawl''s end (drifted_measured, drifted_top_count, drifted_median_length) and as judged again (measured, top_count,
median_length). NULL for a resolution recorded before the shape was judged: it drifted on its fill rate.';

ALTER TABLE public.held_losses DROP CONSTRAINT held_losses_field_check;
ALTER TABLE public.held_losses ADD COLUMN value jsonb;
UPDATE public.held_losses SET value = jsonb_build_object(field, NULL);
ALTER TABLE public.held_losses
    ALTER COLUMN value SET NOT NULL,
    ADD CONSTRAINT held_losses_field_check CHECK (field = ANY (ARRAY[
        'title'::text, 'description'::text, 'upc'::text, 'product_type'::text, 'price_amount'::text,
        'price_excl_tax'::text, 'price_incl_tax'::text, 'tax'::text, 'availability'::text, 'stock'::text,
        'num_reviews'::text, 'rating_value'::text])),
    ADD CONSTRAINT held_losses_value_check CHECK (value ? field);

COMMENT ON TABLE public.held_losses IS 'A stored value of a book that a page of the running crawl would lose: the page showed another value
or none (write_book in book_assets/store/books.py). The book keeps its value and no version records the change
until the crawl is judged. No drift of the field: the held value is written (release_held_values), a version
records it and the change feed reports it. Drift: it stays held until an operator accepts the drift
(book-pipeline drift accept) or a page shows the stored value again (the row is deleted). One row per book and
field: a later crawl that again shows another value takes the row over.';
COMMENT ON COLUMN public.held_losses.field IS 'The books column (price_amount, rating_value: the typed price and rating).';
COMMENT ON COLUMN public.held_losses.value IS 'The columns the page showed, as JSON: the field and, for the typed price and rating, the text beside it
(price, rating); a null field: the page showed none.';

DROP FUNCTION public.drift_apply_losses_v1(bigint, text, text[]);
