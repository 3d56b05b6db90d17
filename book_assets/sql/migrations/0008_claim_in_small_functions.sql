-- The claim as small functions, each with one job. queue_claim_v2 (replay, expired leases, budgets) calls
-- queue_claim, which composes them:
--
--   queue_claim_lock_scopes    lock the round-robin scopes (creating them), interleave weights stored
--   queue_claim_wake_members   idle members that have work again re-enter the rounds at current 0
--   queue_claim_members        the members of those scopes as arrays, the claim's round-robin state
--   queue_claim_domains        lock the throttled domains, each one's allowance of politeness slots
--   queue_claim_plain          plain picks: priority order, batch by batch
--   queue_claim_fair           fair picks, one at a time (queue_claim_pick_fair), then the state saved
--   queue_claim_lease          lease the picked tasks, or the one empty row that says when to come back
--
-- State that a claim changes as it picks (slots, allowances, round-robin currents) lives in arrays held by
-- the caller and passed in and out (INOUT): plpgsql has no by-reference arguments, and one small array copy
-- per pick costs far less than the row lock each pick takes. Domains and members are referred to by their
-- index in those arrays.


-- Lock the round-robin scopes a fair claim uses, in name order (lock order everywhere: scopes, then domains),
-- creating them as needed; an interleaved claim first stores its task types' weights. Returns the scopes.
CREATE FUNCTION queue_claim_lock_scopes(p_types TEXT[], p_scheduled BOOLEAN, p_interleave JSONB)
RETURNS TEXT[] LANGUAGE plpgsql AS $$
DECLARE
    v_scopes TEXT[] := '{}';
BEGIN
    IF p_interleave IS NOT NULL THEN
        v_scopes := ARRAY['interleave'];
        INSERT INTO queue_scopes (scope) VALUES ('interleave') ON CONFLICT DO NOTHING;
        INSERT INTO queue_members AS m (scope, member, weight)
            SELECT 'interleave', e.key, e.value::DOUBLE PRECISION FROM jsonb_each_text(p_interleave) e
            ON CONFLICT (scope, member) DO UPDATE SET weight = excluded.weight
            WHERE m.weight IS DISTINCT FROM excluded.weight;
    END IF;
    IF p_scheduled THEN
        v_scopes := v_scopes || ARRAY(SELECT 'groups:' || t FROM unnest(p_types) t ORDER BY 1);
    END IF;
    INSERT INTO queue_scopes (scope) SELECT unnest(v_scopes) ORDER BY 1 ON CONFLICT DO NOTHING;
    PERFORM 1 FROM queue_scopes s WHERE s.scope = ANY(v_scopes) ORDER BY s.scope FOR UPDATE;
    RETURN v_scopes;
END $$;


-- Members last seen without work (idle) that have claimable work again re-enter the rounds at current 0:
-- no burst of saved credit, no old debt. The others stay out of the rounds until they do.
CREATE FUNCTION queue_claim_wake_members(p_scopes TEXT[], p_now TIMESTAMPTZ)
RETURNS VOID LANGUAGE sql AS $$
    UPDATE queue_members m SET idle = false, current = 0
    WHERE m.scope = ANY(p_scopes) AND m.idle
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.status = 'pending' AND t.run_at <= p_now
                    AND CASE WHEN m.scope = 'interleave' THEN t.task_type = m.member
                             ELSE t.task_type = substr(m.scope, 8) AND t.task_group = m.member END)
$$;


-- The members of the scopes as parallel arrays ordered by scope then member, so each scope's members are
-- contiguous: s_names[k]'s members are s_lo[k]..s_hi[k]. A member is live (takes part in rounds) while its
-- weight is above 0, it has budget left and it is not idle. Interleave members are the claim's task types.
CREATE FUNCTION queue_claim_members(
    p_scopes TEXT[], p_interleave JSONB,
    OUT m_scope TEXT[], OUT m_names TEXT[], OUT m_weight DOUBLE PRECISION[], OUT m_cur DOUBLE PRECISION[],
    OUT m_budget BIGINT[], OUT m_idle BOOLEAN[], OUT m_live BOOLEAN[],
    OUT s_names TEXT[], OUT s_lo INTEGER[], OUT s_hi INTEGER[])
LANGUAGE sql STABLE AS $$
    WITH m AS (
        SELECT m.scope, m.member, coalesce(m.weight, s.default_weight) AS weight, m.current, m.budget, m.idle,
               row_number() OVER (ORDER BY m.scope, m.member)::INTEGER AS j
        FROM queue_members m JOIN queue_scopes s USING (scope)
        WHERE m.scope = ANY(p_scopes)
          AND (m.scope <> 'interleave' OR p_interleave ? m.member)
    ), ranges AS (
        SELECT m.scope, min(m.j) AS lo, max(m.j) AS hi FROM m GROUP BY m.scope
    )
    SELECT coalesce(array_agg(m.scope ORDER BY m.j), '{}'), coalesce(array_agg(m.member ORDER BY m.j), '{}'),
           coalesce(array_agg(m.weight ORDER BY m.j), '{}'), coalesce(array_agg(m.current ORDER BY m.j), '{}'),
           coalesce(array_agg(m.budget ORDER BY m.j), '{}'), coalesce(array_agg(m.idle ORDER BY m.j), '{}'),
           coalesce(array_agg(m.weight > 0 AND (m.budget IS NULL OR m.budget > 0) AND NOT m.idle ORDER BY m.j),
                    '{}'),
           (SELECT coalesce(array_agg(r.scope ORDER BY r.lo), '{}') FROM ranges r),
           (SELECT coalesce(array_agg(r.lo ORDER BY r.lo), '{}') FROM ranges r),
           (SELECT coalesce(array_agg(r.hi ORDER BY r.lo), '{}') FROM ranges r)
    FROM m
$$;


-- Lock the throttled domains (min_interval_s > 0 or max_in_flight set) in name order and give each its
-- allowance: the request-start slots from its next slot up to the horizon, capped by its free in-flight
-- places. A domain with no allowance is blocked; next_at says when the earliest domain beyond the horizon
-- can hand out a slot again (NULL when none is).
CREATE FUNCTION queue_claim_domains(
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
        -- An idle domain's first slot is a little ahead of now (at most 50 ms, a quarter interval): the
        -- worker is then asleep when its slot comes instead of racing the claim's return trip, so
        -- request starts stay an interval apart even under load.
        v_slot := greatest(r.next_slot_at, p_now + make_interval(secs => least(0.05, r.min_interval_s / 4)));
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


-- Whether every known domain is blocked, so that nothing more can be handed out.
CREATE FUNCTION queue_claim_all_blocked(p_blocked TEXT[])
RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT cardinality(p_blocked) > 0
       AND NOT EXISTS (SELECT 1 FROM domains d WHERE NOT (d.domain = ANY(p_blocked)))
$$;


-- Hand out domain k's next politeness slot (NULL when the domain only caps in-flight requests) and spend one
-- unit of its allowance; d_used marks the domains whose next slot moved.
CREATE FUNCTION queue_claim_take_slot(
    INOUT d_next TIMESTAMPTZ[], INOUT d_allow INTEGER[], INOUT d_used BOOLEAN[], p_interval DOUBLE PRECISION[],
    p_k INTEGER, OUT slot TIMESTAMPTZ)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_interval[p_k] > 0 THEN
        slot := d_next[p_k];
        d_next[p_k] := slot + make_interval(secs => p_interval[p_k]);
        d_used[p_k] := true;
    END IF;
    d_allow[p_k] := d_allow[p_k] - 1;
END $$;


-- Plain claim: pending tasks of the types by priority then age, skipping blocked domains, in batches until
-- n are taken or no domain with work has allowance left (a domain that runs out within a batch is left out
-- of the next one). One type gets its own statement so that it reads the per-type index.
CREATE FUNCTION queue_claim_plain(
    p_n INTEGER, p_types TEXT[], p_now TIMESTAMPTZ, p_names TEXT[], p_interval DOUBLE PRECISION[],
    INOUT d_next TIMESTAMPTZ[], INOUT d_allow INTEGER[], INOUT d_used BOOLEAN[], INOUT blocked TEXT[],
    OUT ids BIGINT[], OUT slots TIMESTAMPTZ[])
LANGUAGE plpgsql AS $$
DECLARE
    cur      REFCURSOR;
    k        INTEGER;
    v_id     BIGINT;
    v_domain TEXT;
    v_slot   TIMESTAMPTZ;
    v_more   BOOLEAN;
BEGIN
    ids := '{}'; slots := '{}';
    LOOP
        v_more := false;
        IF cardinality(p_types) = 1 THEN
            OPEN cur FOR
                SELECT t.id, t.domain FROM tasks t
                WHERE t.status = 'pending' AND t.task_type = p_types[1] AND t.run_at <= p_now
                  AND NOT (t.domain = ANY(blocked)) AND NOT (t.id = ANY(ids))
                ORDER BY t.priority DESC, t.id LIMIT p_n - cardinality(ids) FOR UPDATE SKIP LOCKED;
        ELSE
            OPEN cur FOR
                SELECT t.id, t.domain FROM tasks t
                WHERE t.status = 'pending' AND t.task_type = ANY(p_types) AND t.run_at <= p_now
                  AND NOT (t.domain = ANY(blocked)) AND NOT (t.id = ANY(ids))
                ORDER BY t.priority DESC, t.id LIMIT p_n - cardinality(ids) FOR UPDATE SKIP LOCKED;
        END IF;
        LOOP
            FETCH cur INTO v_id, v_domain;
            EXIT WHEN NOT FOUND;
            k := array_position(p_names, v_domain);
            v_slot := NULL;
            IF k IS NOT NULL AND d_allow[k] <= 0 THEN
                v_more := true;  -- its domain ran out within this batch: fetch again without it
                CONTINUE;
            ELSIF k IS NOT NULL THEN
                SELECT * INTO d_next, d_allow, d_used, v_slot
                FROM queue_claim_take_slot(d_next, d_allow, d_used, p_interval, k);
                IF d_allow[k] = 0 THEN
                    blocked := blocked || v_domain;
                END IF;
            END IF;
            ids := ids || v_id;
            slots := slots || v_slot;
        END LOOP;
        CLOSE cur;
        EXIT WHEN cardinality(ids) >= p_n OR NOT v_more;
    END LOOP;
END $$;


-- One smooth-weighted-round-robin round applied to members lo..hi (nginx's algorithm): every live member
-- adds its weight to its current, the winner loses the total. Returns the currents.
CREATE FUNCTION queue_swrr_apply(weights DOUBLE PRECISION[], currents DOUBLE PRECISION[], live BOOLEAN[],
                                 lo INTEGER, hi INTEGER, winner INTEGER)
RETURNS DOUBLE PRECISION[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    total DOUBLE PRECISION := 0;
BEGIN
    FOR j IN lo..hi LOOP
        IF live[j] THEN
            currents[j] := currents[j] + weights[j];
            total := total + weights[j];
        END IF;
    END LOOP;
    currents[winner] := currents[winner] - total;
    RETURN currents;
END $$;


-- Whether a task type (p_group NULL) or one of its groups has claimable work besides the tasks taken: a
-- member without any is idle, one whose work only waits behind a politeness slot is not.
CREATE FUNCTION queue_claim_has_work(p_type TEXT, p_group TEXT, p_now TIMESTAMPTZ, p_taken BIGINT[])
RETURNS BOOLEAN LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_group IS NULL THEN  -- two statements, so that each reads its own index
        RETURN EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = p_type
                         AND t.run_at <= p_now AND NOT (t.id = ANY(p_taken)));
    END IF;
    RETURN EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = p_type
                     AND t.task_group = p_group AND t.run_at <= p_now AND NOT (t.id = ANY(p_taken)));
END $$;


-- The next task of a type (p_group NULL: any group) by priority then age, outside blocked domains and the
-- tasks already taken, locked; NULLs when there is none.
CREATE FUNCTION queue_claim_next_task(p_type TEXT, p_group TEXT, p_now TIMESTAMPTZ, p_blocked TEXT[],
                                      p_taken BIGINT[], OUT task_id BIGINT, OUT task_domain TEXT)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_group IS NULL THEN  -- two statements, so that each reads its own index
        SELECT t.id, t.domain INTO task_id, task_domain FROM tasks t
        WHERE t.status = 'pending' AND t.task_type = p_type AND t.run_at <= p_now
          AND NOT (t.domain = ANY(p_blocked)) AND NOT (t.id = ANY(p_taken))
        ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    SELECT t.id, t.domain INTO task_id, task_domain FROM tasks t
    WHERE t.status = 'pending' AND t.task_type = p_type AND t.task_group = p_group AND t.run_at <= p_now
      AND NOT (t.domain = ANY(p_blocked)) AND NOT (t.id = ANY(p_taken))
    ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
END $$;


-- Pick a group of a task type among members lo..hi by round-robin and its next task. A group without one
-- is skipped without losing its place (its current is left as is) and marked idle if it has no work at all.
-- Returns the group's index and the task, or NULLs when no group has a task to give.
CREATE FUNCTION queue_claim_pick_group(
    p_type TEXT, p_now TIMESTAMPTZ, p_blocked TEXT[], p_taken BIGINT[], p_names TEXT[],
    p_weight DOUBLE PRECISION[], p_cur DOUBLE PRECISION[], p_lo INTEGER, p_hi INTEGER,
    INOUT m_live BOOLEAN[], INOUT m_idle BOOLEAN[], OUT gj INTEGER, OUT task_id BIGINT, OUT task_domain TEXT)
LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        gj := queue_swrr_pick(p_names, p_weight, p_cur, m_live, p_lo, p_hi);
        IF gj IS NULL THEN
            RETURN;
        END IF;
        SELECT * INTO task_id, task_domain
        FROM queue_claim_next_task(p_type, p_names[gj], p_now, p_blocked, p_taken);
        IF task_id IS NOT NULL THEN
            RETURN;
        END IF;
        m_live[gj] := false;
        m_idle[gj] := NOT queue_claim_has_work(p_type, p_names[gj], p_now, p_taken);
    END LOOP;
END $$;


-- One fair pick: a task type by round-robin over the interleave members (or the claim's one type), then,
-- when scheduled, one of the type's groups (queue_claim_pick_group), then its task. A type without a task
-- to give is skipped like a group. The rounds of the winners are applied and a group's budget spent.
-- Returns the state and the task, or a NULL task when nothing more can be picked.
CREATE FUNCTION queue_claim_pick_fair(
    p_types TEXT[], p_scheduled BOOLEAN, p_interleave BOOLEAN, p_now TIMESTAMPTZ, p_blocked TEXT[],
    p_taken BIGINT[], p_names TEXT[], p_weight DOUBLE PRECISION[], s_names TEXT[], s_lo INTEGER[],
    s_hi INTEGER[], INOUT m_cur DOUBLE PRECISION[], INOUT m_budget BIGINT[], INOUT m_idle BOOLEAN[],
    INOUT m_live BOOLEAN[], OUT task_id BIGINT, OUT task_domain TEXT)
LANGUAGE plpgsql AS $$
DECLARE
    k      INTEGER := array_position(s_names, 'interleave');
    g      INTEGER;
    tj     INTEGER;
    gj     INTEGER;
    v_type TEXT;
BEGIN
    LOOP
        tj := NULL;
        v_type := p_types[1];
        IF p_interleave THEN
            IF k IS NULL THEN
                RETURN;  -- no interleave member
            END IF;
            tj := queue_swrr_pick(p_names, p_weight, m_cur, m_live, s_lo[k], s_hi[k]);
            IF tj IS NULL THEN
                RETURN;
            END IF;
            v_type := p_names[tj];
        END IF;
        gj := NULL;
        task_id := NULL;
        g := array_position(s_names, 'groups:' || v_type);
        IF p_scheduled AND g IS NOT NULL THEN
            SELECT * INTO m_live, m_idle, gj, task_id, task_domain
            FROM queue_claim_pick_group(v_type, p_now, p_blocked, p_taken, p_names, p_weight, m_cur, s_lo[g],
                                        s_hi[g], m_live, m_idle);
        ELSIF NOT p_scheduled THEN
            SELECT * INTO task_id, task_domain
            FROM queue_claim_next_task(v_type, NULL, p_now, p_blocked, p_taken);
        END IF;
        IF task_id IS NULL THEN
            IF tj IS NULL THEN
                RETURN;  -- the claim's one type has nothing to give
            END IF;
            m_live[tj] := false;
            m_idle[tj] := NOT queue_claim_has_work(v_type, NULL, p_now, p_taken);
            CONTINUE;
        END IF;
        IF tj IS NOT NULL THEN
            m_cur := queue_swrr_apply(p_weight, m_cur, m_live, s_lo[k], s_hi[k], tj);
        END IF;
        IF gj IS NOT NULL THEN
            m_cur := queue_swrr_apply(p_weight, m_cur, m_live, s_lo[g], s_hi[g], gj);
            IF m_budget[gj] IS NOT NULL THEN
                m_budget[gj] := m_budget[gj] - 1;
                IF m_budget[gj] <= 0 THEN
                    m_live[gj] := false;
                END IF;
            END IF;
        END IF;
        RETURN;
    END LOOP;
END $$;


-- Fair claim: picks one at a time (queue_claim_pick_fair) until n are taken, nothing more can be picked or
-- every domain is out of slots (then it stops rather than mark members idle that only wait for a slot);
-- each pick's domain hands out a slot. The round-robin state of the scopes is then saved.
CREATE FUNCTION queue_claim_fair(
    p_n INTEGER, p_types TEXT[], p_scopes TEXT[], p_scheduled BOOLEAN, p_interleave JSONB, p_now TIMESTAMPTZ,
    p_domains TEXT[], p_interval DOUBLE PRECISION[], INOUT d_next TIMESTAMPTZ[], INOUT d_allow INTEGER[],
    INOUT d_used BOOLEAN[], INOUT blocked TEXT[], OUT ids BIGINT[], OUT slots TIMESTAMPTZ[])
LANGUAGE plpgsql AS $$
DECLARE
    m        RECORD;
    m_cur    DOUBLE PRECISION[];
    m_budget BIGINT[];
    m_idle   BOOLEAN[];
    m_live   BOOLEAN[];
    k        INTEGER;
    v_id     BIGINT;
    v_domain TEXT;
    v_slot   TIMESTAMPTZ;
BEGIN
    ids := '{}'; slots := '{}';
    SELECT * INTO m FROM queue_claim_members(p_scopes, p_interleave);
    m_cur := m.m_cur; m_budget := m.m_budget; m_idle := m.m_idle; m_live := m.m_live;
    WHILE cardinality(ids) < p_n LOOP
        SELECT * INTO m_cur, m_budget, m_idle, m_live, v_id, v_domain
        FROM queue_claim_pick_fair(p_types, p_scheduled, p_interleave IS NOT NULL, p_now, blocked, ids,
                                   m.m_names, m.m_weight, m.s_names, m.s_lo, m.s_hi,
                                   m_cur, m_budget, m_idle, m_live);
        EXIT WHEN v_id IS NULL;
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
            EXIT WHEN queue_claim_all_blocked(blocked);
        END IF;
    END LOOP;
    UPDATE queue_members qm SET current = u.cur, budget = u.budget, idle = u.idle
    FROM unnest(m.m_scope, m.m_names, m_cur, m_budget, m_idle) AS u(scope, member, cur, budget, idle)
    WHERE qm.scope = u.scope AND qm.member = u.member
      AND (qm.current, qm.budget, qm.idle) IS DISTINCT FROM (u.cur, u.budget, u.idle);
END $$;


-- Lease the picked tasks in one UPDATE: a new fencing token each, attempts + 1, the lease counted from the
-- task's politeness slot (its worker waits for it). Rows come back in pick order. When nothing was picked,
-- one row with a NULL id carries next_at: when to claim again.
CREATE FUNCTION queue_claim_lease(p_worker TEXT, p_lease_s DOUBLE PRECISION, p_now TIMESTAMPTZ, p_ids BIGINT[],
                                  p_slots TIMESTAMPTZ[], p_next_at TIMESTAMPTZ)
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
            lease_expires_at = greatest(p_now, coalesce(p.slot, p_now)) + make_interval(secs => p_lease_s)
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


-- Claim up to p_n tasks in one round trip (queue_claim_v2 replays a request and reclaims expired leases
-- first; see TaskQueue.claim in book_assets/queue/queue.py for the design):
--  1. a fair claim (p_scheduled: round-robin over the type's groups; p_interleave: over task types) locks
--     its scopes and lets idle members with work back into the rounds;
--  2. the throttled domains are locked, each with its allowance of politeness slots;
--  3. unless every domain is blocked, tasks are picked, plainly or fairly, and the domains' next slots saved;
--  4. the picked tasks are leased (or one row with a NULL id says when to come back).
CREATE OR REPLACE FUNCTION queue_claim(p_worker TEXT, p_n INTEGER, p_types TEXT[], p_lease_s DOUBLE PRECISION,
                            p_horizon_s DOUBLE PRECISION, p_scheduled BOOLEAN, p_interleave JSONB)
RETURNS TABLE (id BIGINT, task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT,
               attempts INTEGER, max_attempts INTEGER, lease_token BIGINT, lease_expires_at TIMESTAMPTZ,
               slot_at TIMESTAMPTZ, next_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now     TIMESTAMPTZ := clock_timestamp();
    v_horizon TIMESTAMPTZ := clock_timestamp() + make_interval(secs => p_horizon_s);
    v_fair    BOOLEAN := p_scheduled OR p_interleave IS NOT NULL;
    v_scopes  TEXT[];
    d         RECORD;
    d_next    TIMESTAMPTZ[];
    d_allow   INTEGER[];
    d_used    BOOLEAN[];
    v_blocked TEXT[];
    v_ids     BIGINT[] := '{}';
    v_slots   TIMESTAMPTZ[] := '{}';
BEGIN
    IF p_n IS NULL OR p_n < 1 THEN
        RETURN;
    END IF;
    IF v_fair THEN
        v_scopes := queue_claim_lock_scopes(p_types, p_scheduled, p_interleave);
        PERFORM queue_claim_wake_members(v_scopes, v_now);
    END IF;
    SELECT * INTO d FROM queue_claim_domains(p_n, v_now, v_horizon, p_horizon_s);
    d_next := d.d_next;
    d_allow := d.d_allow;
    d_used := array_fill(false, ARRAY[cardinality(d.d_names)]);
    v_blocked := d.blocked;
    IF NOT queue_claim_all_blocked(v_blocked) THEN
        IF v_fair THEN
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
    RETURN QUERY SELECT * FROM queue_claim_lease(p_worker, p_lease_s, v_now, v_ids, v_slots, d.next_at);
END $$;
