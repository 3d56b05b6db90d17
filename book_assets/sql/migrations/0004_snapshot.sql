-- The category-balanced snapshot: a sample of books whose categories are represented by their weights
-- (book_assets/scheduling/snapshot.py). Each write replaces the whole contents in one transaction.

CREATE TABLE category_balanced_snapshot (
    url          TEXT PRIMARY KEY,
    title        TEXT,
    category     TEXT NOT NULL,
    price        NUMERIC(10, 2),
    rating       SMALLINT,
    stock        INTEGER,
    scraped_at   TIMESTAMPTZ NOT NULL,
    snapshot_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX idx_category_balanced_snapshot_category ON category_balanced_snapshot (category);
