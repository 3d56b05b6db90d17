-- The seed's two tables, with their columns and meaning kept, so the seed's own check
--   SELECT count(*) AS total, count(DISTINCT url) AS unique_urls, count(raw_html) AS with_html FROM books
-- keeps working. Later migrations add columns and tables.

CREATE TABLE tasks (
    id           BIGSERIAL PRIMARY KEY,
    task_type    TEXT NOT NULL,
    payload      JSONB NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'in_progress', 'completed', 'failed')),
    domain       TEXT NOT NULL DEFAULT 'books.toscrape.com',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at   TIMESTAMPTZ,
    completed_at TIMESTAMPTZ,
    error        TEXT
);

-- One live task per URL: enqueueing a URL that is pending or in progress is a no-op.
CREATE UNIQUE INDEX idx_tasks_payload_url ON tasks ((payload->>'url'))
    WHERE status IN ('pending', 'in_progress');

CREATE INDEX idx_tasks_queue ON tasks (status, priority DESC, created_at ASC);

CREATE TABLE books (
    id           BIGSERIAL PRIMARY KEY,
    url          TEXT UNIQUE NOT NULL,
    title        TEXT,
    price        TEXT,
    rating       TEXT,
    category     TEXT,
    availability TEXT,
    upc          TEXT,
    description  TEXT,
    raw_html     TEXT,
    scraped_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
