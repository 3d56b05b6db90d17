-- robots.txt files shared by every worker on every host (book_assets/crawl/robots.py; table: robots_txt).

-- take_robots_fetch --
-- Take the fetch of an origin's robots.txt: no row yet, or one whose fetch is open (robots_fetch_open_v1). The
-- hold lasts hold_s (the holder extends it step by step, extend_robots_fetch). No row returned: another worker
-- took it first. Run it only when read_robots found no row or an open one: an upsert whose condition fails
-- still locks the row.
INSERT INTO robots_txt AS r (origin, host, state, holder, held_until)
VALUES (%(origin)s, %(host)s, 'fetching', %(holder)s, clock_timestamp() + make_interval(secs => %(hold_s)s))
ON CONFLICT (origin) DO UPDATE
SET state = 'fetching', holder = excluded.holder, held_until = excluded.held_until
WHERE robots_fetch_open_v1(r.state, r.held_until, r.retry_at, r.fetched_at, %(max_age_s)s)
RETURNING origin;

-- extend_robots_fetch --
-- The holder's fetch goes on for hold_s from now (its next step: a slot wait, a pause and one request). No
-- row returned: the hold ran out and another worker took the fetch over.
UPDATE robots_txt SET held_until = clock_timestamp() + make_interval(secs => %(hold_s)s)
WHERE origin = %(origin)s AND holder = %(holder)s AND state = 'fetching'
RETURNING origin;

-- release_robots_fetch --
-- A fetch that ended without an outcome (cancelled, failed): its hold ends now, the next worker takes it.
UPDATE robots_txt SET holder = NULL, held_until = clock_timestamp()
WHERE origin = %(origin)s AND holder = %(holder)s AND state = 'fetching'
RETURNING origin;

-- read_robots --
-- An origin's robots.txt row, with the seconds until an unreachable file is fetched again, and whether a worker
-- may take its fetch (open: take_robots_fetch).
SELECT origin, state, http_status, body, crawl_delay_s, error, fetched_at,
       greatest(0, extract(epoch FROM retry_at - clock_timestamp()))::DOUBLE PRECISION AS retry_in_s,
       robots_fetch_open_v1(state, held_until, retry_at, fetched_at, %(max_age_s)s) AS open
FROM robots_txt WHERE origin = %(origin)s;

-- store_robots --
-- The holder of an origin's fetch stores its outcome (a holder that lost the fetch to another stores nothing).
UPDATE robots_txt
SET state = %(state)s, http_status = %(http_status)s, body = %(body)s, crawl_delay_s = %(crawl_delay_s)s,
    error = %(error)s, fetched_at = clock_timestamp(),
    retry_at = CASE WHEN %(state)s = 'unreachable'
                    THEN clock_timestamp() + make_interval(secs => %(retry_s)s::DOUBLE PRECISION) END,
    holder = NULL, held_until = NULL
WHERE origin = %(origin)s AND holder = %(holder)s AND state = 'fetching'
RETURNING origin;

-- forget_robots --
-- A new crawl reads its hosts' robots.txt afresh.
DELETE FROM robots_txt WHERE host = ANY(%(hosts)s::TEXT[]);

-- list_robots --
-- Every stored robots.txt outcome of these hosts, for the crawl summary.
SELECT origin, state, http_status, crawl_delay_s, error, fetched_at
FROM robots_txt WHERE host = ANY(%(hosts)s::TEXT[]) ORDER BY origin;
