-- A throttled domain's first slot of a claim is handed out within three quarters of an interval of now (and within
-- the claim's horizon), so the slot before it stays the domain's last one for a quarter interval after it comes:
-- a worker that wakes later than its tolerance but within that quarter takes a fresh slot from its own
-- (reslot in book_assets/sql/queue.sql) and loses the claim's lead, not the interval a slot already handed to
-- another task would cost. A claim says when to come back for its blocked domains and for those whose slots it
-- used up: a third into the first one's window (queue_claim_return_at_v1), so one claim takes every domain whose
-- window opened meanwhile. A claim neither probes nor locks a domain whose window is closed, so at many hosts its
-- cost follows the domains whose slots came within reach. queue_claim_v3 keeps its interface.

CREATE FUNCTION queue_claim_return_at_v1(p_slot timestamp with time zone, p_interval_s double precision, p_horizon_s double precision) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT p_slot - make_interval(secs => least(p_horizon_s, 0.75 * p_interval_s) * 2 / 3)
$$;

COMMENT ON FUNCTION queue_claim_return_at_v1(p_slot timestamp with time zone, p_interval_s double precision, p_horizon_s double precision) IS 'When a claim should come back for a throttled domain whose next slot is p_slot: a third into the slot''s
window (the horizon, and three quarters of the interval: queue_claim_domains_v3 hands the slot out only within
it). A claim then takes every domain whose window opened meanwhile, one claim for many slots, and the slot is
still two thirds of a window away, time for the worker to be asleep on it.';

CREATE FUNCTION queue_claim_window_closed_v1(p_next_slot_at timestamp with time zone, p_interval_s double precision, p_now timestamp with time zone, p_horizon_s double precision) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT p_interval_s > 0
       AND queue_first_slot_v1(p_next_slot_at, p_interval_s, p_now)
           - make_interval(secs => least(p_horizon_s, 0.75 * p_interval_s)) > p_now
$$;

COMMENT ON FUNCTION queue_claim_window_closed_v1(p_next_slot_at timestamp with time zone, p_interval_s double precision, p_now timestamp with time zone, p_horizon_s double precision) IS 'Whether a throttled domain''s first slot from now (queue_first_slot_v1) is still outside its window: the horizon, and
three quarters of the interval. A claim hands a slot out only within it, so the holder of the slot before has a
quarter interval to start on its own, and a late wake within it costs the claim''s lead (reslot), not an
interval.';

CREATE FUNCTION queue_claim_domains_v3(p_n integer, p_types text[], p_now timestamp with time zone, p_horizon timestamp with time zone, p_horizon_s double precision) RETURNS queue_claim_state
    LANGUAGE plpgsql
    AS $$
DECLARE
    r       RECORD;
    v_slot  TIMESTAMPTZ;
    k       INTEGER;
    claimed queue_claim_state := ROW('{}', '{}', '{}', '{}', '{}', '{}', NULL, '{}', '{}');
BEGIN
    -- the domains whose next slot is not within its window yet are neither probed nor locked (at many hosts most
    -- are, and a claim's cost would follow them): when to come back for the first of them, work or none (one
    -- without work costs at most an early claim)
    claimed.next_at := (SELECT min(queue_claim_return_at_v1(d.next_slot_at, d.min_interval_s, p_horizon_s))
                        FROM domains d WHERE d.min_interval_s > 0
                          AND queue_claim_window_closed_v1(d.next_slot_at, d.min_interval_s, p_now, p_horizon_s));
    FOR r IN
        SELECT d.domain, d.min_interval_s, d.max_in_flight, d.next_slot_at FROM domains d
        -- one probe of idx_tasks_pending_domain per domain: LIMIT 1 rules out a hash join over every due task,
        -- and the order by run_at a scan of the table that stops at its first match (or never, for a domain
        -- without work), which the planner would otherwise pick for a domain holding most of the tasks
        CROSS JOIN LATERAL (SELECT 1 FROM tasks t
                            WHERE t.status = 'pending' AND t.domain = d.domain AND t.run_at <= p_now
                              AND t.task_type = ANY(p_types)
                            ORDER BY t.run_at LIMIT 1) due
        WHERE (d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL)
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
    RETURN claimed;
END $$;

COMMENT ON FUNCTION queue_claim_domains_v3(p_n integer, p_types text[], p_now timestamp with time zone, p_horizon timestamp with time zone, p_horizon_s double precision) IS 'Lock the throttled domains (a politeness interval or an in-flight cap) whose first slot is within its window
(queue_claim_window_closed_v1: the horizon, and three quarters of an interval) and that have work this claim
could hand out (a pending task of p_types due at p_now: idx_tasks_pending_domain), in name order, and give each
its allowance for this claim: the politeness slots that start within the horizon (the first by
queue_first_slot_v1; p_n for a domain with only an in-flight cap), capped by its in-flight room; a domain with
no allowance left is blocked. The throttled domains whose window is closed are neither probed nor locked, and
next_at says when to come back for the first of them (queue_claim_return_at_v1), so at many hosts a claim''s
cost follows the domains whose slots came within reach, not every host with work. The throttled domains
without such work are neither locked nor planned either: they are blocked for this claim, since a task that
appears in one after the lock (a concurrent enqueue, a retry falling due) has no slot read under the lock; the
next claim locks its domain. Returns the claim''s state (queue_claim_state), with no task picked yet.';

CREATE FUNCTION queue_claim_save_slots_v1(p_claimed queue_claim_state, p_horizon_s double precision) RETURNS timestamp with time zone
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE domains dm SET next_slot_at = u.next
    FROM unnest(p_claimed.domains, p_claimed.next_slot, p_claimed.moved) AS u(name, next, moved)
    WHERE u.moved AND dm.domain = u.name;
    RETURN (SELECT min(queue_claim_return_at_v1(u.next, u.interval_s, p_horizon_s))
            FROM unnest(p_claimed.next_slot, p_claimed.interval_s, p_claimed.allowance) AS u(next, interval_s, allowance)
            WHERE u.interval_s > 0 AND u.allowance <= 0);
END $$;

COMMENT ON FUNCTION queue_claim_save_slots_v1(p_claimed queue_claim_state, p_horizon_s double precision) IS 'Save the next slots of the domains a claim''s picks moved, and return when to come back for the throttled domains
whose slots the picks used up (queue_claim_return_at_v1), as the claim says for the domains it found blocked.';

CREATE OR REPLACE FUNCTION queue_claim_v3(p_request uuid, p_worker text, p_n integer, p_types text[], p_lease_s double precision, p_horizon_s double precision, p_scheduled boolean, p_interleave jsonb) RETURNS TABLE(id bigint, task_type text, payload jsonb, priority integer, domain text, task_group text, attempts integer, max_attempts integer, lease_token bigint, lease_expires_at timestamp with time zone, slot_at timestamp with time zone, next_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_fair    BOOLEAN := p_scheduled OR p_interleave IS NOT NULL;
    v_now     TIMESTAMPTZ;
    v_scopes  TEXT[];
    claimed   queue_claim_state;
    r         RECORD;
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    -- 1. replay
    IF EXISTS (SELECT 1 FROM tasks t WHERE t.claim_request = p_request AND t.status = 'in_progress') THEN
        RETURN QUERY
        SELECT t.id, t.task_type, t.payload, t.priority, t.domain, t.task_group, t.attempts, t.max_attempts,
               t.lease_token, t.lease_expires_at, t.slot_at, NULL::TIMESTAMPTZ
        FROM tasks t WHERE t.claim_request = p_request AND t.status = 'in_progress' ORDER BY t.slot_at, t.id;
        RETURN;
    END IF;
    -- 2. expired leases
    PERFORM queue_reclaim_expired_v1(p_types, clock_timestamp());
    IF p_n IS NULL OR p_n < 1 THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    -- 3. scopes, budgets, idle members
    IF v_fair THEN
        v_scopes := queue_claim_lock_scopes_v1(p_types, p_scheduled, p_interleave);
        IF p_scheduled THEN
            UPDATE queue_members m SET budget = b.budget_left
            FROM queue_budget_left_v1(v_scopes) b
            WHERE m.scope = b.scope AND m.member = b.member AND m.budget IS DISTINCT FROM b.budget_left;
        END IF;
        PERFORM queue_claim_wake_members_v1(v_scopes, v_now);
    END IF;
    -- 4. domains
    claimed := queue_claim_domains_v3(p_n, p_types, v_now, v_now + make_interval(secs => p_horizon_s), p_horizon_s);
    -- 5. picks, by one strategy; the round-robin state and the domains' next slots are saved once
    IF NOT queue_claim_all_blocked_v1(claimed.blocked) THEN
        IF p_scheduled THEN
            SELECT * INTO r FROM queue_claim_scheduled_v2(p_n, p_types, p_interleave IS NOT NULL, v_now, claimed,
                                                          queue_claim_rounds_v2(v_scopes, p_interleave));
        ELSIF v_fair THEN
            SELECT * INTO r FROM queue_claim_interleaved_v2(p_n, p_types, v_now, claimed,
                                                            queue_claim_rounds_v2(v_scopes, p_interleave));
        ELSE
            claimed := queue_claim_plain_v1(p_n, p_types, v_now, claimed);
        END IF;
        IF v_fair THEN
            claimed := r.claimed;
            PERFORM queue_claim_save_rounds_v2(r.rounds);
        END IF;
        claimed.next_at := least(claimed.next_at, queue_claim_save_slots_v1(claimed, p_horizon_s));
    END IF;
    -- 6. leases
    RETURN QUERY SELECT * FROM queue_claim_lease_v1(p_request, p_scheduled, p_worker, p_lease_s, v_now, claimed.ids,
                                                    claimed.slots, claimed.next_at);
END $$;

COMMENT ON FUNCTION queue_claim_v3(p_request uuid, p_worker text, p_n integer, p_types text[], p_lease_s double precision, p_horizon_s double precision, p_scheduled boolean, p_interleave jsonb) IS 'Claim up to p_n tasks in one round trip (docs/queue.md, "The claim"):
1. a request already answered (its answer was lost with the connection) gets the same leases back: a retried
   claim never leases a second batch, so it spends no extra attempts, slots or budget;
2. expired leases are reclaimed (queue_reclaim_expired_v1);
3. a fair claim (p_scheduled: round-robin over the type''s groups; p_interleave: over task types) locks its
   scopes (queue_claim_lock_scopes_v1; lock order everywhere: scopes by name, then domains), refreshes what
   each group budget may still hand out (queue_budget_left_v1) and lets idle members with work back into the
   rounds (queue_claim_wake_members_v1);
4. the throttled domains with work this claim could hand out are locked, each with its allowance of politeness
   slots; the other throttled domains are closed to it, unlocked (queue_claim_domains_v3);
5. unless every domain is blocked, tasks are picked by one strategy: queue_claim_scheduled_v2 (p_scheduled:
   round-robin over groups, after round-robin over types when interleaved; planned in batches),
   queue_claim_interleaved_v2 (p_interleave alone: round-robin over types, pick by pick) or
   queue_claim_plain_v1 (priority, then age). A fair strategy starts from the scopes'' round-robin state
   (queue_claim_rounds_v2), which is saved once after (queue_claim_save_rounds_v2); so are the domains'' next
   slots, with when to come back for the domains whose slots the picks used up (queue_claim_save_slots_v1);
6. the picked tasks are leased, marked with the request and charged to their budgets (queue_claim_lease_v1),
   each row saying when to come back for the work that waits for a politeness slot, or one row with a NULL id
   says only that.
It runs as one autocommit statement, so the scope and domain locks last one statement, never a client round
trip; and it commits synchronously: a claim acknowledged to a worker survives a server crash, so no lease
token and no politeness slot is ever handed out twice.';

DROP FUNCTION queue_claim_domains_v2(integer, text[], timestamp with time zone, timestamp with time zone, double precision);
