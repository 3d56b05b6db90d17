-- lock_book --
-- The stored state of one book, locked for the rest of the transaction (NULL row: not stored yet), with the
-- fields whose loss is held (drift.sql).
SELECT id, version, title, price, price_amount, price_excl_tax, price_incl_tax, tax, rating, rating_value,
       category, availability, stock, num_reviews, upc, product_type, description,
       ARRAY(SELECT h.field FROM held_losses h WHERE h.book_id = books.id) AS held
FROM books WHERE url = %(url)s FOR UPDATE OF books;

-- insert_book --
-- First sight of a book; a concurrent insert of the same URL wins and this one returns nothing.
INSERT INTO books (url, title, price, rating, category, availability, upc, description, raw_html,
                   price_amount, price_excl_tax, price_incl_tax, tax, rating_value, stock, num_reviews,
                   product_type, content_hash, http_status, fetched_at, rendered_html, raw_body, requested_url,
                   scraped_at)
VALUES (%(url)s, %(title)s, %(price)s, %(rating)s, %(category)s, %(availability)s, %(upc)s, %(description)s,
        %(raw_html)s, %(price_amount)s, %(price_excl_tax)s, %(price_incl_tax)s, %(tax)s, %(rating_value)s,
        %(stock)s, %(num_reviews)s, %(product_type)s, %(content_hash)s, %(http_status)s, %(fetched_at)s,
        %(rendered_html)s, %(raw_body)s, %(requested_url)s, now())
ON CONFLICT (url) DO NOTHING
RETURNING id;

-- update_book --
-- A changed book: new field values, new raw HTML, next version.
UPDATE books SET title = %(title)s, price = %(price)s, rating = %(rating)s, category = %(category)s,
       availability = %(availability)s, upc = %(upc)s, description = %(description)s, raw_html = %(raw_html)s,
       price_amount = %(price_amount)s, price_excl_tax = %(price_excl_tax)s, price_incl_tax = %(price_incl_tax)s,
       tax = %(tax)s, rating_value = %(rating_value)s, stock = %(stock)s, num_reviews = %(num_reviews)s,
       product_type = %(product_type)s, content_hash = %(content_hash)s, http_status = %(http_status)s,
       fetched_at = %(fetched_at)s, rendered_html = %(rendered_html)s, raw_body = %(raw_body)s,
       requested_url = %(requested_url)s, scraped_at = now(), updated_at = now(), version = version + 1
WHERE id = %(id)s
RETURNING version;

-- touch_book --
-- An unchanged book was seen again: its fields stay, the fetch time moves, and the stored page becomes the
-- one just served when its bytes differ (so raw_html, raw_body and content_hash always describe one fetch).
UPDATE books
SET fetched_at = %(fetched_at)s, http_status = %(http_status)s, requested_url = %(requested_url)s,
    raw_html = CASE WHEN content_hash IS DISTINCT FROM %(content_hash)s THEN %(raw_html)s ELSE raw_html END,
    raw_body = CASE WHEN content_hash IS DISTINCT FROM %(content_hash)s THEN %(raw_body)s ELSE raw_body END,
    rendered_html = CASE WHEN content_hash IS DISTINCT FROM %(content_hash)s THEN %(rendered_html)s
                         ELSE rendered_html END,
    content_hash = %(content_hash)s
WHERE id = %(id)s;

-- insert_version --
-- One row of a book's history.
INSERT INTO book_versions (book_id, version, url, fields, changed, content_hash, fetched_at)
VALUES (%(book_id)s, %(version)s, %(url)s, %(fields)s, %(changed)s, %(content_hash)s, %(fetched_at)s)
ON CONFLICT (book_id, version) DO NOTHING;

-- books_for_reextract --
-- Stored pages to parse again, in id order, a batch after a given id (keyset pagination).
SELECT id, url, raw_html, rendered_html FROM books WHERE id > %(after)s AND raw_html IS NOT NULL
ORDER BY id LIMIT %(limit)s;

-- reextract_book --
-- New structured fields from re-parsed stored HTML (the stored fetch stays); the version moves on when a
-- tracked field changed (the caller records it). Returns the version and the fetch it describes.
UPDATE books SET title = %(title)s, price = %(price)s, rating = %(rating)s, category = %(category)s,
       availability = %(availability)s, upc = %(upc)s, description = %(description)s,
       price_amount = %(price_amount)s, price_excl_tax = %(price_excl_tax)s, price_incl_tax = %(price_incl_tax)s,
       tax = %(tax)s, rating_value = %(rating_value)s, stock = %(stock)s, num_reviews = %(num_reviews)s,
       product_type = %(product_type)s, updated_at = now(),
       version = version + CASE WHEN %(versioned)s THEN 1 ELSE 0 END
WHERE id = %(id)s
RETURNING version, content_hash, fetched_at;

-- book_counts --
-- The three counts (books, unique URLs, with raw HTML), plus versions.
SELECT count(*) AS total, count(DISTINCT url) AS unique_urls, count(raw_html) AS with_html,
       (SELECT count(*) FROM book_versions) AS versions
FROM books;

-- books_by_category --
-- Stored books per category.
SELECT category, count(*) AS books, round(avg(price_amount), 2) AS mean_price,
       round(avg(rating_value), 2) AS mean_rating
FROM books GROUP BY category ORDER BY category;

-- export_books --
-- Every stored book's structured fields (raw HTML only when asked), in id order.
SELECT id, url, title, category, price_amount AS price, price_excl_tax, price_incl_tax, tax,
       rating_value AS rating, availability, stock, num_reviews, upc, product_type, description,
       content_hash, http_status, fetched_at, scraped_at, version,
       CASE WHEN %(with_html)s THEN raw_html END AS raw_html
FROM books ORDER BY id;

-- versions_since --
-- Books stored as new (version 1) and as changed (a later version) since a moment.
SELECT count(*) FILTER (WHERE version = 1) AS new, count(*) FILTER (WHERE version > 1) AS changed
FROM book_versions WHERE recorded_at >= %(since)s;

-- revalidate_book --
-- A 304 confirmed the stored page of a book (the one with this hash): the fetch time moves, nothing else.
UPDATE books SET fetched_at = greatest(fetched_at, %(fetched_at)s)
WHERE url = %(url)s AND content_hash = %(content_hash)s
RETURNING id, version, category;

-- books_for_compare --
-- Every stored book's fields and the fetch they came from, to compare with a re-extraction from the archive.
SELECT url, title, price, rating, category, availability, upc, description, price_amount, price_excl_tax,
       price_incl_tax, tax, rating_value, stock, num_reviews, product_type, content_hash, http_status, raw_html,
       fetched_at
FROM books ORDER BY url;

-- book_fetched_at --
-- When the stored page of one book was fetched (no row: not stored).
SELECT fetched_at FROM books WHERE url = %(url)s;
