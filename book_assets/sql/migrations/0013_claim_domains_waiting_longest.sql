-- A claim locked and planned every throttled domain whose window was open and that had work, however few tasks it
-- could hand out. At a thousand politely limited hosts, where a claim gives at most a worker's free page slots, a
-- crawl's start leaves hundreds of domains open at once: each claim then locked them all, read its picks past
-- them (too many to read domain by domain) and took 200 ms for ten tasks, so slots passed unclaimed and more
-- domains opened. A claim now locks at most four times the tasks it may give (at least 32) of those domains, the
-- ones whose slot came first: the cost of a claim follows what it can give, and the domains waiting longest are
-- served first. The others are blocked for this claim, which says to come back at once.

CREATE FUNCTION queue_claim_open_domains_v1(p_limit integer, p_types text[], p_now timestamp with time zone,
                                            p_horizon_s double precision) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(array_agg(o.domain), '{}')
    FROM (SELECT d.domain FROM domains d
          -- one probe of idx_tasks_pending_domain per domain: LIMIT 1 rules out a hash join over every due task,
          -- and the order by run_at a scan of the table that stops at its first match (or never, for a domain
          -- without work), which the planner would otherwise pick for a domain holding most of the tasks
          CROSS JOIN LATERAL (SELECT 1 FROM tasks t
                              WHERE t.status = 'pending' AND t.domain = d.domain AND t.run_at <= p_now
                                AND t.task_type = ANY(p_types)
                              ORDER BY t.run_at LIMIT 1) due
          WHERE (d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL)
            AND NOT queue_claim_window_closed_v1(d.next_slot_at, d.min_interval_s, p_now, p_horizon_s)
          ORDER BY d.next_slot_at, d.domain
          LIMIT p_limit) o
$$;

COMMENT ON FUNCTION queue_claim_open_domains_v1(p_limit integer, p_types text[], p_now timestamp with time zone, p_horizon_s double precision) IS 'The throttled domains a claim locks: those whose first slot is within its window (queue_claim_window_closed_v1)
and that have work it could hand out (a pending task of p_types due at p_now), at most p_limit, those whose next
slot came first. A claim''s cost then follows what it can give, not every open domain, and the domains waiting
longest are served first.';

CREATE OR REPLACE FUNCTION queue_claim_domains_v3(p_n integer, p_types text[], p_now timestamp with time zone, p_horizon timestamp with time zone, p_horizon_s double precision) RETURNS queue_claim_state
    LANGUAGE plpgsql
    AS $$
DECLARE
    r       RECORD;
    v_slot  TIMESTAMPTZ;
    v_limit INTEGER := greatest(4 * p_n, 32);  -- the open domains it locks at most
    v_open  TEXT[] := queue_claim_open_domains_v1(v_limit, p_types, p_now, p_horizon_s);
    k       INTEGER;
    claimed queue_claim_state := ROW('{}', '{}', '{}', '{}', '{}', '{}', NULL, '{}', '{}', NULL);
BEGIN
    -- the domains whose next slot is not within its window yet are neither probed nor locked (at many hosts most
    -- are, and a claim's cost would follow them): when to come back for the first of them, work or none (one
    -- without work costs at most an early claim); at once when open domains with work were left out
    claimed.next_at := CASE WHEN cardinality(v_open) = v_limit THEN p_now ELSE
                       (SELECT min(queue_claim_return_at_v1(d.next_slot_at, d.min_interval_s, p_horizon_s))
                        FROM domains d WHERE d.min_interval_s > 0
                          AND queue_claim_window_closed_v1(d.next_slot_at, d.min_interval_s, p_now, p_horizon_s)) END;
    FOR r IN
        SELECT d.domain, d.min_interval_s, d.max_in_flight, d.next_slot_at FROM domains d
        WHERE d.domain = ANY(v_open)
          AND NOT queue_claim_window_closed_v1(d.next_slot_at, d.min_interval_s, p_now, p_horizon_s)
        ORDER BY d.domain FOR UPDATE OF d
    LOOP
        v_slot := queue_first_slot_v1(r.next_slot_at, r.min_interval_s, p_now);
        IF r.min_interval_s > 0 THEN
            -- within its window (the query's rule): every slot up to the horizon
            k := floor(extract(epoch FROM p_horizon - v_slot) / r.min_interval_s)::INTEGER + 1;
        ELSE
            k := p_n;
        END IF;
        IF r.max_in_flight IS NOT NULL THEN
            k := least(k, r.max_in_flight - (SELECT count(*) FROM tasks t
                                              WHERE t.status = 'in_progress' AND t.domain = r.domain
                                                AND t.lease_expires_at >= p_now)::INTEGER);
        END IF;
        k := greatest(k, 0);
        claimed.domains := claimed.domains || r.domain;
        claimed.interval_s := claimed.interval_s || r.min_interval_s;
        claimed.next_slot := claimed.next_slot || v_slot;
        claimed.allowance := claimed.allowance || k;
        claimed.moved := claimed.moved || false;
        IF k = 0 THEN
            claimed.blocked := claimed.blocked || r.domain;
        END IF;
    END LOOP;
    -- the other throttled domains: a task that turns up in one during the claim waits for the next claim, since
    -- its domain's slots were not read under the lock
    claimed.blocked := claimed.blocked || ARRAY(
        SELECT d.domain FROM domains d
        WHERE (d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL) AND NOT (d.domain = ANY(claimed.domains))
        ORDER BY d.domain);
    claimed.pickable := queue_claim_pickable_v1(claimed);
    RETURN claimed;
END $$;

COMMENT ON FUNCTION queue_claim_domains_v3(p_n integer, p_types text[], p_now timestamp with time zone, p_horizon timestamp with time zone, p_horizon_s double precision) IS 'Lock the throttled domains (a politeness interval or an in-flight cap) a claim of p_n tasks may give slots
(queue_claim_open_domains_v1: within their window, with work it could hand out, at most four times p_n, those
waiting longest), in name order, and give each its allowance for this claim: the politeness slots that start
within the horizon (the first by queue_first_slot_v1; p_n for a domain with only an in-flight cap), capped by its
in-flight room; a domain with no allowance left is blocked. The throttled domains whose window is closed are
neither probed nor locked, and next_at says when to come back for the first of them (queue_claim_return_at_v1),
or at once when open domains with work were left out, so at many hosts a claim''s cost follows what it can give,
not every host with work. The throttled domains it did not lock are blocked for this claim, since a task that
appears in one after the lock (a concurrent enqueue, a retry falling due) has no slot read under the lock; the
next claim locks its domain. When the domains it may give tasks are few beside the blocked ones, they are its
pickable ones (queue_claim_pickable_v1). Returns the claim''s state (queue_claim_state), with no task picked
yet.';
