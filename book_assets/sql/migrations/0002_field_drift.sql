-- Field drift held at the door (book_assets/store/drift.py): each crawl's fill rate per field and category,
-- judged against the last good crawl's; the losses of optional fields held back until a crawl is judged; the
-- drift an operator accepted. The queries are drift.sql's.

CREATE TABLE public.crawl_fields (
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    category text NOT NULL,
    field text NOT NULL,
    pages integer NOT NULL CHECK (pages >= 0),
    filled integer NOT NULL CHECK (filled >= 0 AND filled <= pages),
    base_crawl_id bigint,
    base_pages integer,
    base_filled integer,
    drifted boolean DEFAULT false NOT NULL,
    PRIMARY KEY (crawl_id, category, field)
);

COMMENT ON TABLE public.crawl_fields IS 'The coverage of each contract field (BOOK_CONTRACT) in one crawl: of the book pages the crawl
stored or failed as missing_field / bad_value (pages), those that showed the field with a value of its type
(filled); category is empty for the whole crawl, else a category with at least drift_min_pages pages. A crawl''s
rows are written when it ends (judge_fields in book_assets/crawl/pipeline.py), with the last good crawl it was
judged against (base_crawl_id, base_pages, base_filled) and whether the fill rate fell by more than
drift_threshold (drifted). The last good crawl is the latest earlier one whose every drifted field was
accepted (drift_acceptances).';

CREATE TABLE public.held_losses (
    book_id bigint NOT NULL REFERENCES public.books(id) ON DELETE CASCADE,
    field text NOT NULL CHECK (field = ANY (ARRAY['description'::text, 'stock'::text])),
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    held_at timestamp with time zone DEFAULT now() NOT NULL,
    PRIMARY KEY (book_id, field)
);

CREATE INDEX idx_held_losses_crawl ON public.held_losses USING btree (crawl_id, field);

COMMENT ON TABLE public.held_losses IS 'A stored value of an optional field (description, stock) that a page of the running crawl no longer
showed: the book keeps the value and no version records its loss (write_book in book_assets/store/books.py)
until the crawl is judged. No drift of the field: the loss is applied (drift_apply_losses_v1), a version records
it and the change feed reports it. Drift: it stays held until an operator accepts the drift (book-pipeline
drift accept) or a page shows the field again (the row is deleted). One row per book and field: a later crawl
that again misses it takes the row over.';

CREATE TABLE public.drift_acceptances (
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    field text NOT NULL,
    accepted_by text NOT NULL,
    accepted_at timestamp with time zone DEFAULT now() NOT NULL,
    applied integer DEFAULT 0 NOT NULL,
    PRIMARY KEY (crawl_id, field)
);

COMMENT ON TABLE public.drift_acceptances IS 'An operator confirmed that the drift of a field in a crawl is the site''s real change (book-pipeline
drift accept): who (accepted_by), when (accepted_at) and how many held losses that applied. The crawl then
counts as good for that field, the Dagster check no_field_drift passes and later crawls are judged against it.';

CREATE FUNCTION public.drift_apply_losses_v1(p_crawl bigint, p_field text, p_hold text[]) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
DECLARE
    v_ids bigint[];
BEGIN
    WITH released AS (
        DELETE FROM held_losses h USING books b
        WHERE h.book_id = b.id AND h.field = p_field AND h.crawl_id <= p_crawl
          AND NOT (coalesce(b.category, '') = ANY (p_hold))
        RETURNING h.book_id
    )
    SELECT coalesce(array_agg(book_id), '{}') INTO v_ids FROM released;
    EXECUTE format(
        'WITH lost AS (UPDATE books SET %1$I = NULL, version = version + 1, updated_at = now()
                       WHERE id = ANY ($1) AND %1$I IS NOT NULL RETURNING id)
         SELECT coalesce(array_agg(id), ''{}'') FROM lost', p_field)
    INTO v_ids USING v_ids;
    INSERT INTO book_versions (book_id, version, url, fields, changed, content_hash, fetched_at)
    SELECT b.id, b.version, b.url, last.fields || jsonb_build_object(p_field, NULL), ARRAY[p_field],
           b.content_hash, b.fetched_at
    FROM books b
    CROSS JOIN LATERAL (
        SELECT v.fields FROM book_versions v WHERE v.book_id = b.id ORDER BY v.version DESC LIMIT 1
    ) last
    WHERE b.id = ANY (v_ids);
    RETURN coalesce(array_length(v_ids, 1), 0);
END
$_$;

COMMENT ON FUNCTION drift_apply_losses_v1 IS 'Apply the held losses of field p_field staged by crawl p_crawl or before (held_losses), except in the
categories p_hold (where the field drifted): each book loses the value (NULL), its version moves on and a
book_versions row records it (the latest version''s fields with p_field NULL, changed = {p_field}), so the
change feed reports a book that really lost its description. Returns the books changed.';
