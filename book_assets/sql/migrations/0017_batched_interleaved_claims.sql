-- Interleaved fair claims in batches.
--
-- A scheduled claim with type weights (the crawl worker's: listing and detail pages interleaved) picks a
-- task type by smooth weighted round-robin over the interleave members, then one of that type's groups by
-- the same algorithm, then the group's next task (queue_claim_pick_fair, migration 0008). It used to make
-- those picks one at a time, one query each. queue_claim_fair_v3 plans them in memory instead, as
-- queue_claim_fair_v2 (migration 0013) does for one type: the type rounds as if every live type had work,
-- and for each planned type its group rounds for its number of picks, as if every live group had work
-- (queue_fair_plan_interleaved_v1); it fetches each planned (type, group)'s tasks in one statement and walks
-- the plan. Where a (type, group) has fewer tasks to give than the plan asks, a type has no group to plan
-- (none live, or its group plan ended with a spent budget), it makes the reference pick there
-- (queue_claim_pick_fair, one query), which also takes a type or group out of the rounds and marks it idle
-- as the reference does, and plans the rest again. The two levels' scopes are disjoint and each level's
-- live set is fixed along a plan, so the walk's picks are the reference's, in its order.
--
-- queue_claim_v4 is queue_claim_v3 with the interleaved scheduled claim in batches.


-- The next picks of an interleaved scheduled claim: the type rounds over the interleave members (scope k of
-- s_names; no budgets at this level), up to p_n type indexes (t_plan), and for each planned type its group
-- rounds (queue_fair_plan_v1 over its 'groups:' scope, for as many picks as the type got) as the parallel
-- g_plan. Both end before the first pick whose type has no group planned for it; t_plan then holds that
-- pick's type as one extra element: the reference pick is due there. Pure.
CREATE FUNCTION queue_fair_plan_interleaved_v1(
    p_names TEXT[], p_weight DOUBLE PRECISION[], p_cur DOUBLE PRECISION[], p_live BOOLEAN[], p_budget BIGINT[],
    s_names TEXT[], s_lo INTEGER[], s_hi INTEGER[], p_k INTEGER, p_n INTEGER,
    OUT t_plan INTEGER[], OUT g_plan INTEGER[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_nobudget BIGINT[] := array_fill(NULL::BIGINT, ARRAY[cardinality(p_names)]);
    tj         INTEGER;
    g          INTEGER;
    c          INTEGER;
    occ        INTEGER;
    v_sub      INTEGER[];
    v_cut      INTEGER;
BEGIN
    t_plan := queue_fair_plan_v1(p_weight, p_cur, p_live, v_nobudget, s_lo[p_k], s_hi[p_k], p_n);
    g_plan := array_fill(NULL::INTEGER, ARRAY[cardinality(t_plan)]);
    FOR tj IN SELECT DISTINCT x.j FROM unnest(t_plan) x(j) LOOP
        g := array_position(s_names, 'groups:' || p_names[tj]);
        CONTINUE WHEN g IS NULL;  -- the type has no groups
        c := (SELECT count(*) FROM unnest(t_plan) x(j) WHERE x.j = tj);
        v_sub := queue_fair_plan_v1(p_weight, p_cur, p_live, p_budget, s_lo[g], s_hi[g], c);
        occ := 0;
        FOR i IN 1..cardinality(t_plan) LOOP
            IF t_plan[i] = tj THEN
                occ := occ + 1;
                EXIT WHEN occ > cardinality(v_sub);
                g_plan[i] := v_sub[occ];
            END IF;
        END LOOP;
    END LOOP;
    v_cut := array_position(g_plan, NULL);
    IF v_cut IS NOT NULL THEN
        t_plan := t_plan[1:v_cut];
        g_plan := g_plan[1:v_cut - 1];
    END IF;
END $$;


-- Apply the rounds of the first picks of an interleaved plan (queue_fair_plan_interleaved_v1): the type
-- rounds over the interleave members (scope k), then each type's group rounds (queue_fair_rounds_v1, which
-- also spends the group budgets).
CREATE FUNCTION queue_fair_rounds_interleaved_v1(
    p_weight DOUBLE PRECISION[], s_lo INTEGER[], s_hi INTEGER[], p_k INTEGER, p_types INTEGER[],
    p_groups INTEGER[], INOUT m_cur DOUBLE PRECISION[], INOUT m_budget BIGINT[], INOUT m_live BOOLEAN[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_nobudget BIGINT[] := array_fill(NULL::BIGINT, ARRAY[cardinality(m_cur)]);
    v_winners  INTEGER[];
BEGIN
    SELECT r.m_cur, r.m_live INTO m_cur, m_live
    FROM queue_fair_rounds_v1(p_weight, s_lo[p_k], s_hi[p_k], p_types, m_cur, v_nobudget, m_live) r;
    FOR g IN 1..cardinality(s_lo) LOOP
        CONTINUE WHEN g = p_k;
        v_winners := ARRAY(SELECT x.j FROM unnest(p_groups) WITH ORDINALITY x(j, ord)
                           WHERE x.j BETWEEN s_lo[g] AND s_hi[g] ORDER BY x.ord);
        IF cardinality(v_winners) > 0 THEN
            SELECT * INTO m_cur, m_budget, m_live
            FROM queue_fair_rounds_v1(p_weight, s_lo[g], s_hi[g], v_winners, m_cur, m_budget, m_live);
        END IF;
    END LOOP;
END $$;


-- Scheduled claim interleaving task types, planned in batches (see the head of this migration): plan the
-- picks left, fetch each planned (type, group)'s tasks in one statement, walk the plan taking them in
-- order; where a (type, group) has none left to give or the plan ends before n, apply the rounds so far
-- and make the reference pick (queue_claim_pick_fair) instead, then plan again. Stops when n are taken,
-- nothing more can be picked or every domain is out of slots; each pick's domain hands out a slot. The
-- round-robin state of the scopes (both levels) is then saved once.
CREATE FUNCTION queue_claim_fair_v3(
    p_n INTEGER, p_types TEXT[], p_scopes TEXT[], p_interleave JSONB, p_now TIMESTAMPTZ, p_domains TEXT[],
    p_interval DOUBLE PRECISION[], INOUT d_next TIMESTAMPTZ[], INOUT d_allow INTEGER[], INOUT d_used BOOLEAN[],
    INOUT blocked TEXT[], OUT ids BIGINT[], OUT slots TIMESTAMPTZ[])
LANGUAGE plpgsql AS $$
DECLARE
    m        RECORD;
    m_cur    DOUBLE PRECISION[];
    m_budget BIGINT[];
    m_idle   BOOLEAN[];
    m_live   BOOLEAN[];
    k        INTEGER;
    t_plan   INTEGER[];
    g_plan   INTEGER[];
    f_member INTEGER[];  -- the fetched tasks, grouped by group member in each member's order
    f_id     BIGINT[];
    f_domain TEXT[];
    f_next   INTEGER[];  -- per group member: its next fetched task, and its last
    f_last   INTEGER[];
    s        INTEGER;
    j        INTEGER;
    p        INTEGER;
    dk       INTEGER;
    v_short  BOOLEAN;
    v_done   BOOLEAN := false;
    v_id     BIGINT;
    v_domain TEXT;
    v_slot   TIMESTAMPTZ;
BEGIN
    ids := '{}'; slots := '{}';
    SELECT * INTO m FROM queue_claim_members(p_scopes, p_interleave);
    k := array_position(m.s_names, 'interleave');
    IF k IS NULL THEN
        RETURN;  -- no interleave member
    END IF;
    m_cur := m.m_cur; m_budget := m.m_budget; m_idle := m.m_idle; m_live := m.m_live;
    WHILE NOT v_done AND cardinality(ids) < p_n LOOP
        SELECT * INTO t_plan, g_plan
        FROM queue_fair_plan_interleaved_v1(m.m_names, m.m_weight, m_cur, m_live, m_budget, m.s_names, m.s_lo,
                                            m.s_hi, k, p_n - cardinality(ids));
        EXIT WHEN cardinality(t_plan) = 0;  -- no live type
        SELECT coalesce(array_agg(x.j ORDER BY x.j, x.priority DESC, x.id), '{}'),
               coalesce(array_agg(x.id ORDER BY x.j, x.priority DESC, x.id), '{}'),
               coalesce(array_agg(x.domain ORDER BY x.j, x.priority DESC, x.id), '{}')
        INTO f_member, f_id, f_domain
        FROM (SELECT u.j, t.id, t.domain, t.priority
              FROM (SELECT w.j, count(*)::INTEGER AS picks FROM unnest(g_plan) w(j) GROUP BY w.j) u
              CROSS JOIN LATERAL (
                  SELECT t.id, t.domain, t.priority FROM tasks t
                  WHERE t.status = 'pending' AND t.task_type = substr(m.m_scope[u.j], 8)
                    AND t.task_group = m.m_names[u.j] AND t.run_at <= p_now
                    AND NOT (t.domain = ANY(blocked)) AND NOT (t.id = ANY(ids))
                  ORDER BY t.priority DESC, t.id LIMIT u.picks FOR UPDATE SKIP LOCKED) t) x;
        f_next := array_fill(NULL::INTEGER, ARRAY[cardinality(m.m_names)]);
        f_last := f_next;
        FOR q IN 1..cardinality(f_member) LOOP
            f_next[f_member[q]] := coalesce(f_next[f_member[q]], q);
            f_last[f_member[q]] := q;
        END LOOP;
        s := 0;
        v_short := false;
        LOOP
            EXIT WHEN v_done OR s = cardinality(t_plan);
            j := g_plan[s + 1];  -- NULL past the groups planned: the reference pick is due
            p := f_next[j];
            -- a fetched task whose domain ran out of slots during this walk is passed over, as the
            -- reference pick's query would
            WHILE p <= f_last[j] AND f_domain[p] = ANY(blocked) LOOP
                p := p + 1;
            END LOOP;
            IF p IS NOT NULL AND p <= f_last[j] THEN
                f_next[j] := p + 1;
                s := s + 1;
                v_id := f_id[p];
                v_domain := f_domain[p];
            ELSE
                v_short := true;
                SELECT * INTO m_cur, m_budget, m_live
                FROM queue_fair_rounds_interleaved_v1(m.m_weight, m.s_lo, m.s_hi, k, t_plan[1:s], g_plan[1:s],
                                                      m_cur, m_budget, m_live);
                SELECT * INTO m_cur, m_budget, m_idle, m_live, v_id, v_domain
                FROM queue_claim_pick_fair(p_types, true, true, p_now, blocked, ids, m.m_names, m.m_weight,
                                           m.s_names, m.s_lo, m.s_hi, m_cur, m_budget, m_idle, m_live);
                IF v_id IS NULL THEN
                    v_done := true;  -- nothing more can be picked
                    EXIT;
                END IF;
            END IF;
            -- the pick left blocked domains out, so its domain has a slot to give
            dk := array_position(p_domains, v_domain);
            v_slot := NULL;
            IF dk IS NOT NULL THEN
                SELECT * INTO d_next, d_allow, d_used, v_slot
                FROM queue_claim_take_slot(d_next, d_allow, d_used, p_interval, dk);
            END IF;
            ids := ids || v_id;
            slots := slots || v_slot;
            IF dk IS NOT NULL AND d_allow[dk] <= 0 THEN
                blocked := blocked || v_domain;
                v_done := queue_claim_all_blocked(blocked);
            END IF;
            EXIT WHEN v_short;
        END LOOP;
        IF NOT v_short THEN
            SELECT * INTO m_cur, m_budget, m_live
            FROM queue_fair_rounds_interleaved_v1(m.m_weight, m.s_lo, m.s_hi, k, t_plan[1:s], g_plan[1:s],
                                                  m_cur, m_budget, m_live);
        END IF;
    END LOOP;
    UPDATE queue_members qm SET current = u.cur, budget = u.budget, idle = u.idle
    FROM unnest(m.m_scope, m.m_names, m_cur, m_budget, m_idle) AS u(scope, member, cur, budget, idle)
    WHERE qm.scope = u.scope AND qm.member = u.member
      AND (qm.current, qm.budget, qm.idle) IS DISTINCT FROM (u.cur, u.budget, u.idle);
END $$;


-- Claim up to p_n tasks in one round trip (see TaskQueue.claim in book_assets/queue/queue.py):
--  1. a request already answered (its answer was lost with the connection) gets the same leases back: a
--     retried claim never leases a second batch, so it spends no extra attempts, slots or budget;
--  2. expired leases are reclaimed with their failure kind;
--  3. a fair claim (p_scheduled: round-robin over the type's groups; p_interleave: over task types) locks
--     its scopes (lock order everywhere: scopes by name, then domains), refreshes what each group budget
--     may still hand out and lets idle members with work back into the rounds;
--  4. the throttled domains are locked, each with its allowance of politeness slots;
--  5. unless every domain is blocked, tasks are picked: plainly, scheduled in batches (queue_claim_fair_v2
--     for one type, queue_claim_fair_v3 interleaving types) or interleaved over types alone one at a time
--     (queue_claim_fair), and the domains' next slots saved;
--  6. the picked tasks are leased, marked with the request and charged to their budgets (or one row with a
--     NULL id says when to come back).
--
-- It runs as one autocommit statement, so the scope and domain locks last one statement, never a client
-- round trip; and it commits synchronously: a claim acknowledged to a worker survives a server crash, so no
-- lease token and no politeness slot is ever handed out twice.
CREATE FUNCTION queue_claim_v4(p_request UUID, p_worker TEXT, p_n INTEGER, p_types TEXT[],
                               p_lease_s DOUBLE PRECISION, p_horizon_s DOUBLE PRECISION, p_scheduled BOOLEAN,
                               p_interleave JSONB)
RETURNS TABLE (id BIGINT, task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT,
               attempts INTEGER, max_attempts INTEGER, lease_token BIGINT, lease_expires_at TIMESTAMPTZ,
               slot_at TIMESTAMPTZ, next_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_fair    BOOLEAN := p_scheduled OR p_interleave IS NOT NULL;
    v_now     TIMESTAMPTZ;
    v_scopes  TEXT[];
    d         RECORD;
    d_next    TIMESTAMPTZ[];
    d_allow   INTEGER[];
    d_used    BOOLEAN[];
    v_blocked TEXT[];
    v_ids     BIGINT[] := '{}';
    v_slots   TIMESTAMPTZ[] := '{}';
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
    PERFORM queue_reclaim_expired(p_types, clock_timestamp());
    IF p_n IS NULL OR p_n < 1 THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    -- 3. scopes, budgets, idle members
    IF v_fair THEN
        v_scopes := queue_claim_lock_scopes(p_types, p_scheduled, p_interleave);
        IF p_scheduled THEN
            UPDATE queue_members m SET budget = b.budget_left
            FROM queue_budget_left(v_scopes) b
            WHERE m.scope = b.scope AND m.member = b.member AND m.budget IS DISTINCT FROM b.budget_left;
        END IF;
        PERFORM queue_claim_wake_members(v_scopes, v_now);
    END IF;
    -- 4. domains
    SELECT * INTO d FROM queue_claim_domains_v2(p_n, v_now, v_now + make_interval(secs => p_horizon_s), p_horizon_s);
    d_next := d.d_next;
    d_allow := d.d_allow;
    d_used := array_fill(false, ARRAY[cardinality(d.d_names)]);
    v_blocked := d.blocked;
    -- 5. picks
    IF NOT queue_claim_all_blocked(v_blocked) THEN
        IF p_scheduled AND p_interleave IS NULL THEN
            SELECT * INTO d_next, d_allow, d_used, v_blocked, v_ids, v_slots
            FROM queue_claim_fair_v2(p_n, p_types[1], v_scopes, v_now, d.d_names, d.d_interval, d_next, d_allow,
                                     d_used, v_blocked);
        ELSIF p_scheduled THEN
            SELECT * INTO d_next, d_allow, d_used, v_blocked, v_ids, v_slots
            FROM queue_claim_fair_v3(p_n, p_types, v_scopes, p_interleave, v_now, d.d_names, d.d_interval, d_next,
                                     d_allow, d_used, v_blocked);
        ELSIF v_fair THEN
            SELECT * INTO d_next, d_allow, d_used, v_blocked, v_ids, v_slots
            FROM queue_claim_fair(p_n, p_types, v_scopes, p_scheduled, p_interleave, v_now, d.d_names,
                                  d.d_interval, d_next, d_allow, d_used, v_blocked);
        ELSE
            SELECT * INTO d_next, d_allow, d_used, v_blocked, v_ids, v_slots
            FROM queue_claim_plain(p_n, p_types, v_now, d.d_names, d.d_interval, d_next, d_allow, d_used,
                                   v_blocked);
        END IF;
        UPDATE domains dm SET next_slot_at = u.next
        FROM unnest(d.d_names, d_next, d_used) AS u(name, next, used)
        WHERE u.used AND dm.domain = u.name;
    END IF;
    -- 6. leases
    RETURN QUERY SELECT * FROM queue_claim_lease_v2(p_request, p_scheduled, p_worker, p_lease_s, v_now, v_ids,
                                                    v_slots, d.next_at);
END $$;
