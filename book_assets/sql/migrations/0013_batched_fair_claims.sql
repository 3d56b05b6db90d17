-- Fair claims in batches, one lease UPDATE per claim, one politeness-slot formula.
--
-- A scheduled claim of one task type (queue_claim_fair_v2) used to pick one task at a time, one query per
-- pick, all under the lock of the type's round-robin scope. It now plans the picks in memory first
-- (queue_fair_plan_v1: the smooth weighted round-robin as if every live group had work), fetches the tasks
-- the plan needs in one statement (each group's first tasks, LIMIT its number of picks, FOR UPDATE SKIP
-- LOCKED), and walks the plan. Only where a group has fewer tasks to give than the plan asks (it ran dry,
-- or its tasks are in domains that ran out of slots during the walk) does it fall back to the reference
-- pick (queue_claim_pick_fair, one query), then plans the rest again. The picks are those of the reference,
-- in its order: the plan is the reference's rounds, and a group's fetched tasks are the ones the reference
-- would take from it one by one (the blocked domains only grow during a claim, and the walk skips a fetched
-- task whose domain became blocked). Interleaved claims (type weights) keep the per-pick path.
--
-- queue_claim_v3 is queue_claim_v2 and queue_claim in one function, and leases with queue_claim_lease_v2,
-- which marks the claim's request and charges the group budgets in the lease UPDATE itself.
-- queue_first_slot_v1 is the one statement of a domain's first slot, for the claim, reslot and
-- take_domain_slot (book_assets/sql/queue.sql).


-- A throttled domain's first slot from now: its next slot, and at least a little ahead of now (at most
-- 50 ms, a quarter interval), so that the worker is asleep when its slot comes instead of racing the
-- claim's return trip, and request starts stay an interval apart even under load.
CREATE FUNCTION queue_first_slot_v1(p_next_slot_at TIMESTAMPTZ, p_interval_s DOUBLE PRECISION,
                                    p_now TIMESTAMPTZ)
RETURNS TIMESTAMPTZ LANGUAGE sql STABLE AS $$
    SELECT greatest(p_next_slot_at, p_now + make_interval(secs => least(0.05, p_interval_s / 4)))
$$;


-- queue_claim_domains (migration 0008) with the first slot of queue_first_slot_v1.
CREATE FUNCTION queue_claim_domains_v2(
    p_n INTEGER, p_now TIMESTAMPTZ, p_horizon TIMESTAMPTZ, p_horizon_s DOUBLE PRECISION,
    OUT d_names TEXT[], OUT d_interval DOUBLE PRECISION[], OUT d_next TIMESTAMPTZ[], OUT d_allow INTEGER[],
    OUT blocked TEXT[], OUT next_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
DECLARE
    r      RECORD;
    v_slot TIMESTAMPTZ;
    k      INTEGER;
BEGIN
    d_names := '{}'; d_interval := '{}'; d_next := '{}'; d_allow := '{}'; blocked := '{}';
    FOR r IN
        SELECT d.domain, d.min_interval_s, d.max_in_flight, d.next_slot_at FROM domains d
        WHERE d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL
        ORDER BY d.domain FOR UPDATE
    LOOP
        v_slot := queue_first_slot_v1(r.next_slot_at, r.min_interval_s, p_now);
        IF r.min_interval_s > 0 THEN
            IF v_slot > p_horizon THEN
                k := 0;
                next_at := least(next_at, v_slot - make_interval(secs => p_horizon_s));
            ELSE
                k := floor(extract(epoch FROM p_horizon - v_slot) / r.min_interval_s)::INTEGER + 1;
            END IF;
        ELSE
            k := p_n;
        END IF;
        IF r.max_in_flight IS NOT NULL THEN
            k := least(k, r.max_in_flight - (SELECT count(*) FROM tasks t
                                              WHERE t.status = 'in_progress' AND t.domain = r.domain
                                                AND t.lease_expires_at >= p_now)::INTEGER);
        END IF;
        k := greatest(k, 0);
        d_names := d_names || r.domain;
        d_interval := d_interval || r.min_interval_s;
        d_next := d_next || v_slot;
        d_allow := d_allow || k;
        IF k = 0 THEN
            blocked := blocked || r.domain;
        END IF;
    END LOOP;
END $$;


-- Whether the round-robin arithmetic of members lo..hi is exact in closed form: every live member's weight
-- and current is a whole number well inside a double's exact range, so that current + s·weight − c·total
-- equals s rounds applied one by one.
CREATE FUNCTION queue_fair_integral_v1(p_weight DOUBLE PRECISION[], p_cur DOUBLE PRECISION[], p_live BOOLEAN[],
                                       p_lo INTEGER, p_hi INTEGER)
RETURNS BOOLEAN LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(bool_and(p_weight[j] = trunc(p_weight[j]) AND p_cur[j] = trunc(p_cur[j])
                             AND abs(p_weight[j]) < 1e9 AND abs(p_cur[j]) < 1e12), true)
    FROM generate_series(p_lo, p_hi) j WHERE p_live[j]
$$;


-- The next picks of a scheduled claim among members lo..hi (indexes into the arrays, which are in name
-- order), by smooth weighted round-robin as if every live member had work: up to p_n member indexes, in
-- pick order, ending early with the pick that spends a member's last unit of budget (the live members, and
-- so the rounds' total, change there). Empty when no member is live. Pure.
--
-- Members of one weight with whole-number state are planned in closed form: with the live set fixed, a
-- member's (c+1)-th pick comes while its current less c totals is the highest, so the picks are the pairs
-- (member, c) by current − c·total descending, ties to the smallest name; only pairs whose value can be
-- among the top p_n are formed (each member has at least ceil(p_n / k) of them above bound). Otherwise the
-- rounds are run one by one, the arithmetic of queue_swrr_pick and queue_swrr_apply.
CREATE FUNCTION queue_fair_plan_v1(p_weight DOUBLE PRECISION[], p_cur DOUBLE PRECISION[], p_live BOOLEAN[],
                                   p_budget BIGINT[], p_lo INTEGER, p_hi INTEGER, p_n INTEGER)
RETURNS INTEGER[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    total  DOUBLE PRECISION := 0;
    k      INTEGER := 0;
    w      DOUBLE PRECISION;
    v_one  BOOLEAN := true;
    v_low  DOUBLE PRECISION;
    cur    DOUBLE PRECISION[] := p_cur;
    left_  BIGINT[] := p_budget;
    best   INTEGER;
    bv     DOUBLE PRECISION;
    v      DOUBLE PRECISION;
    picks  INTEGER[] := '{}';
BEGIN
    FOR j IN p_lo..p_hi LOOP
        IF p_live[j] THEN
            total := total + p_weight[j];
            k := k + 1;
            v_one := v_one AND (w IS NULL OR p_weight[j] = w);
            w := p_weight[j];
            v_low := least(v_low, p_cur[j]);
        END IF;
    END LOOP;
    IF k = 0 OR p_n < 1 THEN
        RETURN picks;
    END IF;
    IF v_one AND queue_fair_integral_v1(p_weight, p_cur, p_live, p_lo, p_hi) THEN
        v_low := v_low - (ceil(p_n::DOUBLE PRECISION / k) - 1) * total;
        RETURN ARRAY(
            WITH pairs AS (
                SELECT g.member, c.nth, p_cur[g.member] - c.nth * total AS value,
                       p_budget[g.member] IS NOT NULL AND c.nth = p_budget[g.member] - 1 AS spends_budget
                FROM generate_series(p_lo, p_hi) g(member)
                CROSS JOIN LATERAL generate_series(
                    0, least(p_n::BIGINT, coalesce(p_budget[g.member], p_n),
                             floor((p_cur[g.member] - v_low) / total)::BIGINT + 1) - 1) c(nth)
                WHERE p_live[g.member]
            ), ranked AS (
                SELECT x.member, x.spends_budget, row_number() OVER (ORDER BY x.value DESC, x.member) AS ord
                FROM pairs x
            )
            SELECT r.member FROM ranked r
            WHERE r.ord <= least(p_n, coalesce((SELECT min(x.ord) FROM ranked x WHERE x.spends_budget), p_n))
            ORDER BY r.ord);
    END IF;
    FOR i IN 1..p_n LOOP
        best := NULL;
        FOR j IN p_lo..p_hi LOOP
            IF p_live[j] THEN
                v := cur[j] + p_weight[j];
                cur[j] := v;
                IF best IS NULL OR v > bv THEN  -- in name order, so the first maximum is the smallest name
                    best := j;
                    bv := v;
                END IF;
            END IF;
        END LOOP;
        cur[best] := cur[best] - total;
        picks := picks || best;
        IF left_[best] IS NOT NULL THEN
            left_[best] := left_[best] - 1;
            EXIT WHEN left_[best] <= 0;
        END IF;
    END LOOP;
    RETURN picks;
END $$;


-- Apply the rounds of planned picks (queue_fair_plan_v1, all made with the same live members) to members
-- lo..hi: currents as queue_swrr_apply leaves them (in closed form when that is exact), each winner's
-- budget spent, and a member whose budget reached 0 out of the rounds.
CREATE FUNCTION queue_fair_rounds_v1(
    p_weight DOUBLE PRECISION[], p_lo INTEGER, p_hi INTEGER, p_winners INTEGER[],
    INOUT m_cur DOUBLE PRECISION[], INOUT m_budget BIGINT[], INOUT m_live BOOLEAN[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    s     INTEGER := cardinality(p_winners);
    total DOUBLE PRECISION := 0;
    cnt   INTEGER[];
    j     INTEGER;
BEGIN
    IF s = 0 THEN
        RETURN;
    END IF;
    IF queue_fair_integral_v1(p_weight, m_cur, m_live, p_lo, p_hi) THEN
        cnt := array_fill(0, ARRAY[p_hi]);
        FOREACH j IN ARRAY p_winners LOOP
            cnt[j] := cnt[j] + 1;
        END LOOP;
        FOR i IN p_lo..p_hi LOOP
            IF m_live[i] THEN
                total := total + p_weight[i];
            END IF;
        END LOOP;
        FOR i IN p_lo..p_hi LOOP
            IF m_live[i] THEN
                m_cur[i] := m_cur[i] + s * p_weight[i] - cnt[i] * total;
            END IF;
        END LOOP;
    ELSE
        FOREACH j IN ARRAY p_winners LOOP
            m_cur := queue_swrr_apply(p_weight, m_cur, m_live, p_lo, p_hi, j);
        END LOOP;
    END IF;
    FOREACH j IN ARRAY p_winners LOOP
        IF m_budget[j] IS NOT NULL THEN
            m_budget[j] := m_budget[j] - 1;
            IF m_budget[j] <= 0 THEN
                m_live[j] := false;
            END IF;
        END IF;
    END LOOP;
END $$;


-- Scheduled claim of one task type, planned in batches (see the head of this migration): plan the picks
-- left, fetch each planned group's tasks in one statement, walk the plan taking them in order; where a
-- group has none left to give, apply the rounds so far and make the reference pick (queue_claim_pick_fair)
-- instead, then plan again. Stops when n are taken, nothing more can be picked or every domain is out of
-- slots; each pick's domain hands out a slot. The round-robin state of the scope is then saved once.
CREATE FUNCTION queue_claim_fair_v2(
    p_n INTEGER, p_type TEXT, p_scopes TEXT[], p_now TIMESTAMPTZ, p_domains TEXT[], p_interval DOUBLE PRECISION[],
    INOUT d_next TIMESTAMPTZ[], INOUT d_allow INTEGER[], INOUT d_used BOOLEAN[], INOUT blocked TEXT[],
    OUT ids BIGINT[], OUT slots TIMESTAMPTZ[])
LANGUAGE plpgsql AS $$
DECLARE
    m        RECORD;
    m_cur    DOUBLE PRECISION[];
    m_budget BIGINT[];
    m_idle   BOOLEAN[];
    m_live   BOOLEAN[];
    g        INTEGER;
    lo       INTEGER;
    hi       INTEGER;
    v_plan   INTEGER[];
    f_member INTEGER[];  -- the fetched tasks, grouped by member in each member's order
    f_id     BIGINT[];
    f_domain TEXT[];
    f_next   INTEGER[];  -- per member: its next fetched task, and its last
    f_last   INTEGER[];
    s        INTEGER;
    j        INTEGER;
    p        INTEGER;
    k        INTEGER;
    v_short  BOOLEAN;
    v_done   BOOLEAN := false;
    v_id     BIGINT;
    v_domain TEXT;
    v_slot   TIMESTAMPTZ;
BEGIN
    ids := '{}'; slots := '{}';
    SELECT * INTO m FROM queue_claim_members(p_scopes, NULL);
    g := array_position(m.s_names, 'groups:' || p_type);
    IF g IS NULL THEN
        RETURN;  -- the type has no groups
    END IF;
    lo := m.s_lo[g]; hi := m.s_hi[g];
    m_cur := m.m_cur; m_budget := m.m_budget; m_idle := m.m_idle; m_live := m.m_live;
    WHILE NOT v_done AND cardinality(ids) < p_n LOOP
        v_plan := queue_fair_plan_v1(m.m_weight, m_cur, m_live, m_budget, lo, hi, p_n - cardinality(ids));
        EXIT WHEN cardinality(v_plan) = 0;
        SELECT coalesce(array_agg(x.j ORDER BY x.j, x.priority DESC, x.id), '{}'),
               coalesce(array_agg(x.id ORDER BY x.j, x.priority DESC, x.id), '{}'),
               coalesce(array_agg(x.domain ORDER BY x.j, x.priority DESC, x.id), '{}')
        INTO f_member, f_id, f_domain
        FROM (SELECT u.j, t.id, t.domain, t.priority
              FROM (SELECT w.j, count(*)::INTEGER AS picks FROM unnest(v_plan) w(j) GROUP BY w.j) u
              CROSS JOIN LATERAL (
                  SELECT t.id, t.domain, t.priority FROM tasks t
                  WHERE t.status = 'pending' AND t.task_type = p_type AND t.task_group = m.m_names[u.j]
                    AND t.run_at <= p_now AND NOT (t.domain = ANY(blocked)) AND NOT (t.id = ANY(ids))
                  ORDER BY t.priority DESC, t.id LIMIT u.picks FOR UPDATE SKIP LOCKED) t) x;
        f_next := array_fill(NULL::INTEGER, ARRAY[hi]);
        f_last := f_next;
        FOR q IN 1..cardinality(f_member) LOOP
            f_next[f_member[q]] := coalesce(f_next[f_member[q]], q);
            f_last[f_member[q]] := q;
        END LOOP;
        s := 0;
        v_short := false;
        LOOP
            EXIT WHEN v_done OR s = cardinality(v_plan);
            j := v_plan[s + 1];
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
                FROM queue_fair_rounds_v1(m.m_weight, lo, hi, v_plan[1:s], m_cur, m_budget, m_live);
                SELECT * INTO m_cur, m_budget, m_idle, m_live, v_id, v_domain
                FROM queue_claim_pick_fair(ARRAY[p_type], true, false, p_now, blocked, ids, m.m_names, m.m_weight,
                                           m.s_names, m.s_lo, m.s_hi, m_cur, m_budget, m_idle, m_live);
                IF v_id IS NULL THEN
                    v_done := true;  -- nothing more can be picked
                    EXIT;
                END IF;
            END IF;
            -- the pick left blocked domains out, so its domain has a slot to give
            k := array_position(p_domains, v_domain);
            v_slot := NULL;
            IF k IS NOT NULL THEN
                SELECT * INTO d_next, d_allow, d_used, v_slot
                FROM queue_claim_take_slot(d_next, d_allow, d_used, p_interval, k);
            END IF;
            ids := ids || v_id;
            slots := slots || v_slot;
            IF k IS NOT NULL AND d_allow[k] <= 0 THEN
                blocked := blocked || v_domain;
                v_done := queue_claim_all_blocked(blocked);
            END IF;
            EXIT WHEN v_short;
        END LOOP;
        IF NOT v_short THEN
            SELECT * INTO m_cur, m_budget, m_live
            FROM queue_fair_rounds_v1(m.m_weight, lo, hi, v_plan[1:s], m_cur, m_budget, m_live);
        END IF;
    END LOOP;
    UPDATE queue_members qm SET current = u.cur, budget = u.budget, idle = u.idle
    FROM unnest(m.m_scope, m.m_names, m_cur, m_budget, m_idle) AS u(scope, member, cur, budget, idle)
    WHERE qm.scope = u.scope AND qm.member = u.member
      AND (qm.current, qm.budget, qm.idle) IS DISTINCT FROM (u.cur, u.budget, u.idle);
END $$;


-- queue_claim_lease (migration 0008) that also marks each leased row with the claim's request (a replay
-- finds it) and, for a scheduled claim, charges it to its group's budget grant: one UPDATE.
CREATE FUNCTION queue_claim_lease_v2(p_request UUID, p_scheduled BOOLEAN, p_worker TEXT, p_lease_s DOUBLE PRECISION,
                                     p_now TIMESTAMPTZ, p_ids BIGINT[], p_slots TIMESTAMPTZ[], p_next_at TIMESTAMPTZ)
RETURNS TABLE (id BIGINT, task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT,
               attempts INTEGER, max_attempts INTEGER, lease_token BIGINT, lease_expires_at TIMESTAMPTZ,
               slot_at TIMESTAMPTZ, next_at TIMESTAMPTZ)
LANGUAGE sql AS $$
    WITH picked AS (
        SELECT u.id, u.slot, u.ord FROM unnest(p_ids, p_slots) WITH ORDINALITY AS u(id, slot, ord)
    ), leased AS (
        UPDATE tasks t
        SET status = 'in_progress', attempts = t.attempts + 1, worker_id = p_worker,
            lease_token = nextval('tasks_lease_token_seq'), started_at = p_now, slot_at = p.slot,
            lease_expires_at = greatest(p_now, coalesce(p.slot, p_now)) + make_interval(secs => p_lease_s),
            claim_request = p_request,
            budget_key = CASE WHEN p_scheduled
                              THEN coalesce((SELECT m.budget_key FROM queue_members m
                                             WHERE m.scope = 'groups:' || t.task_type AND m.member = t.task_group
                                               AND m.budget_total IS NOT NULL), t.budget_key)
                              ELSE t.budget_key END
        FROM picked p WHERE t.id = p.id
        RETURNING t.id, t.task_type, t.payload, t.priority, t.domain, t.task_group, t.attempts, t.max_attempts,
                  t.lease_token, t.lease_expires_at, t.slot_at, p.ord
    ), answer AS (
        SELECT l.id, l.task_type, l.payload, l.priority, l.domain, l.task_group, l.attempts, l.max_attempts,
               l.lease_token, l.lease_expires_at, l.slot_at, l.ord FROM leased l
        UNION ALL
        SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0
        WHERE cardinality(p_ids) = 0
    )
    SELECT a.id, a.task_type, a.payload, a.priority, a.domain, a.task_group, a.attempts, a.max_attempts,
           a.lease_token, a.lease_expires_at, a.slot_at, p_next_at
    FROM answer a ORDER BY a.ord
$$;


-- Claim up to p_n tasks in one round trip (see TaskQueue.claim in book_assets/queue/queue.py):
--  1. a request already answered (its answer was lost with the connection) gets the same leases back: a
--     retried claim never leases a second batch, so it spends no extra attempts, slots or budget;
--  2. expired leases are reclaimed with their failure kind;
--  3. a fair claim (p_scheduled: round-robin over the type's groups; p_interleave: over task types) locks
--     its scopes (lock order everywhere: scopes by name, then domains), refreshes what each group budget
--     may still hand out and lets idle members with work back into the rounds;
--  4. the throttled domains are locked, each with its allowance of politeness slots;
--  5. unless every domain is blocked, tasks are picked: plainly, scheduled in batches (queue_claim_fair_v2)
--     or interleaved one at a time (queue_claim_fair), and the domains' next slots saved;
--  6. the picked tasks are leased, marked with the request and charged to their budgets (or one row with a
--     NULL id says when to come back).
--
-- It runs as one autocommit statement, so the scope and domain locks last one statement, never a client
-- round trip; and it commits synchronously: a claim acknowledged to a worker survives a server crash, so no
-- lease token and no politeness slot is ever handed out twice.
CREATE FUNCTION queue_claim_v3(p_request UUID, p_worker TEXT, p_n INTEGER, p_types TEXT[],
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
