-- Two politeness features.
--
-- 1. robots.txt, shared by every worker on every host (the crawl's table; book_assets/crawl/robots.py):
--    one row per origin. The first worker that needs it takes the fetch (state 'fetching', held until
--    held_until, after which another worker may take it over); the others wait for the row to be filled.
--    RFC 9309 words the outcomes: 'fetched' (2xx, the body's rules apply), 'unavailable' (4xx: no rules,
--    everything allowed) and 'unreachable' (5xx or network: everything disallowed until retry_at).
--
-- 2. AutoThrottle in the queue's domains (book_assets/queue/throttle.py has the rule in Python): when
--    max_interval_s is set, a domain's min_interval_s follows the observed latency toward
--    latency / target_concurrency, rises on throttled responses, and stays within
--    [floor_interval_s, max(floor_interval_s, max_interval_s)]. Claims read min_interval_s as before, so
--    every worker on every host follows the same interval.

CREATE TABLE robots_txt (
    origin        TEXT PRIMARY KEY,            -- scheme://host[:port] whose /robots.txt this is
    host          TEXT NOT NULL,               -- its host, lower-cased (a crawl forgets its hosts' files)
    state         TEXT NOT NULL CHECK (state IN ('fetching', 'fetched', 'unavailable', 'unreachable')),
    holder        TEXT,                        -- the worker fetching it (state 'fetching')
    held_until    TIMESTAMPTZ,                 -- after this another worker may take the fetch over
    http_status   INTEGER,                     -- the last response's status (NULL: no response)
    body          TEXT,                        -- the file as served (its first 500 KiB, RFC 9309 2.5)
    crawl_delay_s DOUBLE PRECISION,            -- Crawl-delay for the crawl's user agent (NULL: none)
    error         TEXT,                        -- why the file is unreachable
    fetched_at    TIMESTAMPTZ,                 -- when the outcome was stored
    retry_at      TIMESTAMPTZ                  -- unreachable: when the next worker fetches it again
);
CREATE INDEX idx_robots_txt_host ON robots_txt (host);

ALTER TABLE domains
    ADD COLUMN floor_interval_s   DOUBLE PRECISION CHECK (floor_interval_s >= 0),
    ADD COLUMN max_interval_s     DOUBLE PRECISION CHECK (max_interval_s >= 0),
    ADD COLUMN target_concurrency DOUBLE PRECISION CHECK (target_concurrency > 0),
    ADD COLUMN latency_s          DOUBLE PRECISION;

-- The next interval of an autothrottled domain after one observation (pure; the Python reference is
-- book_assets/queue/throttle.py next_interval, which a test compares with this function):
--   throttled: at least double (at least p_min_step_s: 0 cannot double), never below latency / target;
--   otherwise: Scrapy's AutoThrottle, target = latency / target_concurrency, new = max(target, (old + target) / 2),
--   and an observation that is not ok may raise the interval but never lower it;
-- then clamped to [floor, max(floor, cap)].
CREATE FUNCTION queue_throttle_interval_v1(
    p_interval DOUBLE PRECISION, p_latency_s DOUBLE PRECISION, p_throttled BOOLEAN, p_ok BOOLEAN,
    p_floor DOUBLE PRECISION, p_cap DOUBLE PRECISION, p_target_concurrency DOUBLE PRECISION,
    p_min_step_s DOUBLE PRECISION)
RETURNS DOUBLE PRECISION
LANGUAGE sql IMMUTABLE AS $$
    SELECT least(greatest(p_cap, p_floor), greatest(p_floor,
        CASE WHEN p_throttled
             THEN greatest(2 * p_interval, p_latency_s / p_target_concurrency, p_min_step_s)
             WHEN p_ok
             THEN greatest(p_latency_s / p_target_concurrency, (p_interval + p_latency_s / p_target_concurrency) / 2)
             ELSE greatest(p_interval, p_latency_s / p_target_concurrency)
        END))
$$;
