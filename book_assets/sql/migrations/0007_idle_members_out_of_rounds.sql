-- The round-robin counts only members with work: a member last seen without work (idle) no longer takes part
-- in rounds until it has work again, when it re-enters at current 0. Before, an idle member that was never
-- the top pick kept adding its weight to every round's total, so the others drifted from the reference
-- order (scheduling/wrr.py): weights A 1, B 1, C 3 with A empty drained C B C C B C instead of C B C C C B.
-- queue_claim keeps its body but for that: idle members with work again re-enter (at current 0) when the
-- claim has locked its scopes, instead of when a pick happens to reach them; and it no longer sets
-- synchronous_commit off (claims commit synchronously, see 0005).

CREATE OR REPLACE FUNCTION queue_claim(p_worker TEXT, p_n INTEGER, p_types TEXT[], p_lease_s DOUBLE PRECISION,
                            p_horizon_s DOUBLE PRECISION, p_scheduled BOOLEAN, p_interleave JSONB)
RETURNS TABLE (id BIGINT, task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT,
               attempts INTEGER, max_attempts INTEGER, lease_token BIGINT, lease_expires_at TIMESTAMPTZ,
               slot_at TIMESTAMPTZ, next_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now      TIMESTAMPTZ := clock_timestamp();
    v_horizon  TIMESTAMPTZ := clock_timestamp() + make_interval(secs => p_horizon_s);
    v_next_at  TIMESTAMPTZ;
    -- throttled domains
    d_names    TEXT[] := '{}';
    d_interval DOUBLE PRECISION[] := '{}';
    d_next     TIMESTAMPTZ[] := '{}';
    d_allow    INTEGER[] := '{}';
    d_used     BOOLEAN[] := '{}';
    v_blocked  TEXT[] := '{}';
    -- taken tasks, in pick order
    v_ids      BIGINT[] := '{}';
    v_slots    TIMESTAMPTZ[] := '{}';
    -- round-robin members (all loaded scopes, each contiguous)
    m_scope    TEXT[] := '{}';
    m_names    TEXT[] := '{}';
    m_weight   DOUBLE PRECISION[] := '{}';
    m_cur      DOUBLE PRECISION[] := '{}';
    m_budget   BIGINT[] := '{}';
    m_idle     BOOLEAN[] := '{}';
    m_live     BOOLEAN[] := '{}';
    s_names    TEXT[] := '{}';
    s_lo       INTEGER[] := '{}';
    s_hi       INTEGER[] := '{}';
    v_scopes   TEXT[];
    r          RECORD;
    cur        REFCURSOR;
    k          INTEGER;
    j          INTEGER;
    tj         INTEGER;
    gj         INTEGER;
    v_total    DOUBLE PRECISION;
    v_slot     TIMESTAMPTZ;
    v_type     TEXT;
    v_group    TEXT;
    v_more     BOOLEAN;
    v_found    BOOLEAN;
    v_id       BIGINT;
    v_domain   TEXT;
    v_fair     BOOLEAN := p_scheduled OR p_interleave IS NOT NULL;
BEGIN
    IF p_n IS NULL OR p_n < 1 THEN
        RETURN;
    END IF;
    -- 0. Fair state first (lock order: scopes, then domains — never the other way round).
    IF v_fair THEN
        IF p_interleave IS NOT NULL THEN
            v_scopes := ARRAY['interleave'];
            INSERT INTO queue_scopes (scope) VALUES ('interleave') ON CONFLICT DO NOTHING;
            INSERT INTO queue_members AS m (scope, member, weight)
                SELECT 'interleave', e.key, e.value::DOUBLE PRECISION FROM jsonb_each_text(p_interleave) e
                ON CONFLICT (scope, member) DO UPDATE SET weight = excluded.weight
                WHERE m.weight IS DISTINCT FROM excluded.weight;
        ELSE
            v_scopes := '{}';
        END IF;
        IF p_scheduled THEN
            v_scopes := v_scopes || ARRAY(SELECT 'groups:' || t FROM unnest(p_types) t ORDER BY 1);
        END IF;
        INSERT INTO queue_scopes (scope) SELECT unnest(v_scopes) ORDER BY 1 ON CONFLICT DO NOTHING;
        PERFORM 1 FROM queue_scopes s WHERE s.scope = ANY(v_scopes) ORDER BY s.scope FOR UPDATE;
        -- Members last seen without work that have work again re-enter at current 0 (no burst, no debt); the
        -- others stay out of the rounds below until they do.
        UPDATE queue_members m SET idle = false, current = 0
        WHERE m.scope = ANY(v_scopes) AND m.idle
          AND EXISTS (SELECT 1 FROM tasks t
                      WHERE t.status = 'pending' AND t.run_at <= v_now
                        AND CASE WHEN m.scope = 'interleave' THEN t.task_type = m.member
                                 ELSE t.task_type = substr(m.scope, 8) AND t.task_group = m.member END);
        FOR r IN
            SELECT m.scope, m.member, coalesce(m.weight, s.default_weight) AS weight, m.current, m.budget,
                   m.idle
            FROM queue_members m JOIN queue_scopes s USING (scope)
            WHERE m.scope = ANY(v_scopes)
              AND (m.scope <> 'interleave' OR p_interleave ? m.member)
            ORDER BY m.scope, m.member
        LOOP
            m_scope := m_scope || r.scope;
            m_names := m_names || r.member;
            m_weight := m_weight || r.weight;
            m_cur := m_cur || r.current;
            m_budget := m_budget || r.budget;
            m_idle := m_idle || r.idle;
            -- an idle member (still without work, see above) takes no part in rounds
            m_live := m_live || (r.weight > 0 AND (r.budget IS NULL OR r.budget > 0) AND NOT r.idle);
            j := cardinality(m_names);
            k := array_position(s_names, r.scope);
            IF k IS NULL THEN
                s_names := s_names || r.scope;
                s_lo := s_lo || j;
                s_hi := s_hi || j;
            ELSE
                s_hi[k] := j;
            END IF;
        END LOOP;
    END IF;

    -- 1. Reclaim expired leases: their workers are gone (or too slow); the attempt they used counts.
    UPDATE tasks t
    SET status = CASE WHEN t.attempts >= t.max_attempts THEN 'failed' ELSE 'pending' END,
        error = CASE WHEN t.attempts >= t.max_attempts
                     THEN format('lease expired after %s attempts (worker %s lost)', t.attempts, t.worker_id)
                     ELSE t.error END,
        worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, slot_at = NULL
    FROM (SELECT x.id FROM tasks x
          WHERE x.status = 'in_progress' AND x.lease_expires_at < v_now AND x.task_type = ANY(p_types)
          ORDER BY x.lease_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED) e
    WHERE t.id = e.id;

    -- 2. Throttled domains: lock them (name order), compute each one's allowance of slots.
    FOR r IN
        SELECT d.domain, d.min_interval_s, d.max_in_flight, d.next_slot_at FROM domains d
        WHERE d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL
        ORDER BY d.domain FOR UPDATE
    LOOP
        -- An idle domain's first slot is a little ahead of now (at most 50 ms, a quarter interval): the
        -- worker is then asleep when its slot comes instead of racing the claim's return trip, so
        -- request starts stay an interval apart even under load.
        v_slot := greatest(r.next_slot_at, v_now + make_interval(secs => least(0.05, r.min_interval_s / 4)));
        IF r.min_interval_s > 0 THEN
            IF v_slot > v_horizon THEN
                k := 0;
                v_next_at := least(v_next_at, v_slot - make_interval(secs => p_horizon_s));
            ELSE
                k := floor(extract(epoch FROM v_horizon - v_slot) / r.min_interval_s)::INTEGER + 1;
            END IF;
        ELSE
            k := p_n;
        END IF;
        IF r.max_in_flight IS NOT NULL THEN
            k := least(k, r.max_in_flight - (SELECT count(*) FROM tasks t
                                              WHERE t.status = 'in_progress' AND t.domain = r.domain
                                                AND t.lease_expires_at >= v_now)::INTEGER);
        END IF;
        k := greatest(k, 0);
        d_names := d_names || r.domain;
        d_interval := d_interval || r.min_interval_s;
        d_next := d_next || v_slot;
        d_allow := d_allow || k;
        d_used := d_used || false;
        IF k = 0 THEN
            v_blocked := v_blocked || r.domain;
        END IF;
    END LOOP;

    -- Every known domain blocked: nothing can be handed out; say when to come back (no index walk).
    IF cardinality(v_blocked) > 0
       AND NOT EXISTS (SELECT 1 FROM domains d WHERE NOT (d.domain = ANY(v_blocked))) THEN
        RETURN QUERY SELECT NULL::BIGINT, NULL::TEXT, NULL::JSONB, NULL::INTEGER, NULL::TEXT, NULL::TEXT,
                            NULL::INTEGER, NULL::INTEGER, NULL::BIGINT, NULL::TIMESTAMPTZ, NULL::TIMESTAMPTZ,
                            v_next_at;
        RETURN;
    END IF;

    IF NOT v_fair THEN
        -- 3a. Plain claim: batches in priority order until n are taken or no domain has allowance left.
        LOOP
            v_more := false;
            IF cardinality(p_types) = 1 THEN
                OPEN cur FOR
                    SELECT t.id, t.domain FROM tasks t
                    WHERE t.status = 'pending' AND t.task_type = p_types[1] AND t.run_at <= v_now
                      AND NOT (t.domain = ANY(v_blocked)) AND NOT (t.id = ANY(v_ids))
                    ORDER BY t.priority DESC, t.id
                    LIMIT p_n - cardinality(v_ids) FOR UPDATE SKIP LOCKED;
            ELSE
                OPEN cur FOR
                    SELECT t.id, t.domain FROM tasks t
                    WHERE t.status = 'pending' AND t.task_type = ANY(p_types) AND t.run_at <= v_now
                      AND NOT (t.domain = ANY(v_blocked)) AND NOT (t.id = ANY(v_ids))
                    ORDER BY t.priority DESC, t.id
                    LIMIT p_n - cardinality(v_ids) FOR UPDATE SKIP LOCKED;
            END IF;
            LOOP
                FETCH cur INTO v_id, v_domain;
                EXIT WHEN NOT FOUND;
                k := array_position(d_names, v_domain);
                IF k IS NULL THEN
                    v_ids := v_ids || v_id;
                    v_slots := v_slots || NULL::TIMESTAMPTZ;
                ELSIF d_allow[k] > 0 THEN
                    v_slot := NULL;
                    IF d_interval[k] > 0 THEN
                        v_slot := d_next[k];
                        d_next[k] := v_slot + make_interval(secs => d_interval[k]);
                        d_used[k] := true;
                    END IF;
                    d_allow[k] := d_allow[k] - 1;
                    IF d_allow[k] = 0 THEN
                        v_blocked := v_blocked || v_domain;
                    END IF;
                    v_ids := v_ids || v_id;
                    v_slots := v_slots || v_slot;
                ELSE
                    v_more := true;  -- its domain ran out within this batch: fetch again without it
                END IF;
            END LOOP;
            CLOSE cur;
            EXIT WHEN cardinality(v_ids) >= p_n OR NOT v_more;
        END LOOP;
    ELSE
        -- 3b. Fair claim: one pick at a time — a task type (interleave), then a group (scheduled).
        WHILE cardinality(v_ids) < p_n LOOP
            v_found := false;
            <<pick>>
            LOOP
                -- choose the task type
                tj := NULL;
                IF p_interleave IS NOT NULL THEN
                    k := array_position(s_names, 'interleave');
                    EXIT pick WHEN k IS NULL;
                    tj := queue_swrr_pick(m_names, m_weight, m_cur, m_live, s_lo[k], s_hi[k]);
                    EXIT pick WHEN tj IS NULL;
                    v_type := m_names[tj];
                ELSE
                    v_type := p_types[1];
                END IF;
                -- choose the group (scheduled), then the task
                v_id := NULL;
                gj := NULL;
                IF p_scheduled THEN
                    k := array_position(s_names, 'groups:' || v_type);
                    LOOP
                        EXIT WHEN k IS NULL;
                        gj := queue_swrr_pick(m_names, m_weight, m_cur, m_live, s_lo[k], s_hi[k]);
                        EXIT WHEN gj IS NULL;
                        v_group := m_names[gj];
                        SELECT t.id, t.domain INTO v_id, v_domain FROM tasks t
                        WHERE t.status = 'pending' AND t.task_type = v_type AND t.task_group = v_group
                          AND t.run_at <= v_now AND NOT (t.domain = ANY(v_blocked)) AND NOT (t.id = ANY(v_ids))
                        ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
                        EXIT WHEN v_id IS NOT NULL;
                        -- skipped without losing its place (current left as is); idle only if it has no
                        -- work at all, not merely work behind a politeness slot
                        m_live[gj] := false;
                        m_idle[gj] := NOT EXISTS (
                            SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = v_type
                              AND t.task_group = v_group AND t.run_at <= v_now AND NOT (t.id = ANY(v_ids)));
                    END LOOP;
                    IF v_id IS NULL THEN
                        gj := NULL;
                    END IF;
                ELSE
                    SELECT t.id, t.domain INTO v_id, v_domain FROM tasks t
                    WHERE t.status = 'pending' AND t.task_type = v_type AND t.run_at <= v_now
                      AND NOT (t.domain = ANY(v_blocked)) AND NOT (t.id = ANY(v_ids))
                    ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
                END IF;
                IF v_id IS NULL THEN
                    EXIT pick WHEN tj IS NULL;  -- single type without work: done
                    m_live[tj] := false;
                    m_idle[tj] := NOT EXISTS (
                        SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = v_type
                          AND t.run_at <= v_now AND NOT (t.id = ANY(v_ids)));
                    CONTINUE pick;
                END IF;
                -- apply the round(s) to the fair state
                IF tj IS NOT NULL THEN
                    k := array_position(s_names, 'interleave');
                    v_total := 0;
                    FOR j IN s_lo[k]..s_hi[k] LOOP
                        IF m_live[j] THEN
                            m_cur[j] := m_cur[j] + m_weight[j];
                            v_total := v_total + m_weight[j];
                        END IF;
                    END LOOP;
                    m_cur[tj] := m_cur[tj] - v_total;
                END IF;
                IF gj IS NOT NULL THEN
                    k := array_position(s_names, 'groups:' || v_type);
                    v_total := 0;
                    FOR j IN s_lo[k]..s_hi[k] LOOP
                        IF m_live[j] THEN
                            m_cur[j] := m_cur[j] + m_weight[j];
                            v_total := v_total + m_weight[j];
                        END IF;
                    END LOOP;
                    m_cur[gj] := m_cur[gj] - v_total;
                    IF m_budget[gj] IS NOT NULL THEN
                        m_budget[gj] := m_budget[gj] - 1;
                        IF m_budget[gj] <= 0 THEN
                            m_live[gj] := false;
                        END IF;
                    END IF;
                END IF;
                v_found := true;
                EXIT pick;
            END LOOP;
            EXIT WHEN NOT v_found;
            -- politeness: the per-pick queries already excluded blocked domains, so a slot is available
            v_slot := NULL;
            k := array_position(d_names, v_domain);
            IF k IS NOT NULL THEN
                IF d_interval[k] > 0 THEN
                    v_slot := d_next[k];
                    d_next[k] := v_slot + make_interval(secs => d_interval[k]);
                    d_used[k] := true;
                END IF;
                d_allow[k] := d_allow[k] - 1;
            END IF;
            v_ids := v_ids || v_id;
            v_slots := v_slots || v_slot;
            IF k IS NOT NULL AND d_allow[k] <= 0 THEN
                v_blocked := v_blocked || v_domain;
                -- every domain out of slots: stop here rather than mark groups empty that are only waiting
                EXIT WHEN NOT EXISTS (SELECT 1 FROM domains d WHERE NOT (d.domain = ANY(v_blocked)));
            END IF;
        END LOOP;
        -- write the fair state back
        UPDATE queue_members m SET current = u.cur, budget = u.budget, idle = u.idle
        FROM unnest(m_scope, m_names, m_cur, m_budget, m_idle) AS u(scope, member, cur, budget, idle)
        WHERE m.scope = u.scope AND m.member = u.member
          AND (m.current, m.budget, m.idle) IS DISTINCT FROM (u.cur, u.budget, u.idle);
    END IF;

    -- Advance the domains whose slots were handed out.
    UPDATE domains d SET next_slot_at = u.next
    FROM unnest(d_names, d_next, d_used) AS u(name, next, used)
    WHERE u.used AND d.domain = u.name;

    IF cardinality(v_ids) = 0 THEN
        RETURN QUERY SELECT NULL::BIGINT, NULL::TEXT, NULL::JSONB, NULL::INTEGER, NULL::TEXT, NULL::TEXT,
                            NULL::INTEGER, NULL::INTEGER, NULL::BIGINT, NULL::TIMESTAMPTZ, NULL::TIMESTAMPTZ,
                            v_next_at;
        RETURN;
    END IF;

    -- 4. Lease them: one UPDATE, fencing token per lease, lease counted from the slot (the worker waits).
    RETURN QUERY
    WITH picked AS (
        SELECT u.id, u.slot, u.ord FROM unnest(v_ids, v_slots) WITH ORDINALITY AS u(id, slot, ord)
    ), leased AS (
        UPDATE tasks t
        SET status = 'in_progress', attempts = t.attempts + 1, worker_id = p_worker,
            lease_token = nextval('tasks_lease_token_seq'), started_at = v_now, slot_at = p.slot,
            lease_expires_at = greatest(v_now, coalesce(p.slot, v_now)) + make_interval(secs => p_lease_s)
        FROM picked p WHERE t.id = p.id
        RETURNING t.id, t.task_type, t.payload, t.priority, t.domain, t.task_group, t.attempts, t.max_attempts,
                  t.lease_token, t.lease_expires_at, t.slot_at, p.ord
    )
    SELECT l.id, l.task_type, l.payload, l.priority, l.domain, l.task_group, l.attempts, l.max_attempts,
           l.lease_token, l.lease_expires_at, l.slot_at, v_next_at
    FROM leased l ORDER BY l.ord;
END $$;
