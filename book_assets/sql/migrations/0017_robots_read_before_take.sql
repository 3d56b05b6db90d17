-- A worker that waits for the robots.txt fetch another worker holds, or reads a stored file again (its copy is
-- trusted for a minute), tried to take the fetch first: an upsert whose condition fails still locks the row,
-- so each look cost a transaction id and a WAL record. At 1,000 hosts that was 5,235 locking upserts for 1,000
-- fetches. When a fetch may be taken is now one function: the read reports it and the take checks it, so a
-- worker takes the fetch only when its read says it may.

CREATE FUNCTION robots_fetch_open_v1(p_state text, p_held_until timestamp with time zone,
                                     p_retry_at timestamp with time zone, p_fetched_at timestamp with time zone,
                                     p_max_age_s double precision) RETURNS boolean
    LANGUAGE sql
    AS $$
    SELECT (p_state = 'fetching' AND p_held_until <= clock_timestamp())
        OR (p_state = 'unreachable' AND p_retry_at <= clock_timestamp())
        OR (p_state IN ('fetched', 'unavailable')
            AND p_fetched_at < clock_timestamp() - make_interval(secs => p_max_age_s))
$$;

COMMENT ON FUNCTION robots_fetch_open_v1(p_state text, p_held_until timestamp with time zone, p_retry_at timestamp with time zone, p_fetched_at timestamp with time zone, p_max_age_s double precision) IS 'Whether a worker may take the fetch of an origin''s robots.txt whose row stands so: a fetch whose hold ended
(released, or its holder died and the hold ran out), an unreachable file whose retry time has come, or a stored
file older than p_max_age_s. Volatile: it reads the clock.';
