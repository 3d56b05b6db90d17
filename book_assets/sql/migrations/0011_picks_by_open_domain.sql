-- A claim's picks read the tasks of the domains it may give a slot to, when those are few beside the domains it
-- may not: at a thousand politely limited hosts, most of a group's pending tasks belong to domains whose window is
-- closed, and a pick read past them (all of them, for a group with no task in an open domain), comparing each with
-- every blocked domain. The claim's state carries those domains (pickable), each pick of a group reads them one
-- by one through idx_tasks_pending_domain_group, and a domain leaves them when its allowance runs out. Every
-- task's domain has a row in domains (enqueue and record_failed write one), so the unthrottled domains are known.

ALTER TYPE queue_claim_state ADD ATTRIBUTE pickable text[];

COMMENT ON TYPE queue_claim_state IS 'The state a claim carries from step to step (queue_claim_v3): the throttled
domains with work it locked, in name order (a domain''s index in domains, interval_s, next_slot, allowance and
moved), their next slots, what each may still give and whether its next slot moved (saved at the end of the
claim); the domains it may no longer give tasks (blocked: those out of allowance, and the throttled domains it
did not lock); when the first closed domain opens (next_at); the tasks picked so far and their slots (ids,
slots); and, when they are few beside the blocked ones, the domains it may still give tasks (pickable, NULL
otherwise: queue_claim_pickable_v1). One value instead of parallel INOUT arrays: each step takes it and
returns it.';

CREATE INDEX idx_tasks_pending_domain_group ON tasks (task_type, task_group, domain, priority DESC, id)
    WHERE status = 'pending';

-- a domain without a row would be unthrottled, yet unknown to a claim that picks by domain
INSERT INTO domains (domain, min_interval_s)
SELECT DISTINCT t.domain, 0 FROM tasks t
WHERE NOT EXISTS (SELECT 1 FROM domains d WHERE d.domain = t.domain)
ON CONFLICT (domain) DO NOTHING;

CREATE FUNCTION queue_claim_pickable_v1(p_claimed queue_claim_state) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    WITH open AS (
        SELECT u.name FROM unnest(p_claimed.domains, p_claimed.allowance) AS u(name, allowance)
        WHERE u.allowance > 0
        UNION ALL
        (SELECT d.domain FROM domains d
         WHERE d.min_interval_s = 0 AND d.max_in_flight IS NULL
         LIMIT cardinality(p_claimed.blocked) / 8 + 1)
    )
    SELECT CASE WHEN count(*) * 8 <= cardinality(p_claimed.blocked) THEN array_agg(o.name ORDER BY o.name) END
    FROM open o
$$;

COMMENT ON FUNCTION queue_claim_pickable_v1(p_claimed queue_claim_state) IS 'The domains a claim may give tasks, when they are at most an eighth of those it may not (else NULL): the
throttled domains it locked with allowance, and the unthrottled ones (every task''s domain has a row). A pick then
reads each of them through idx_tasks_pending_domain_group, an index probe each, rather than a group''s pending
tasks in order past every blocked domain''s, comparing each with the blocked list: at a thousand hosts behind a
politeness interval the blocked are most of them, and a group with no task in an open domain was read to its
end.';

CREATE OR REPLACE FUNCTION queue_claim_domains_v3(p_n integer, p_types text[], p_now timestamp with time zone, p_horizon timestamp with time zone, p_horizon_s double precision) RETURNS queue_claim_state
    LANGUAGE plpgsql
    AS $$
DECLARE
    r       RECORD;
    v_slot  TIMESTAMPTZ;
    k       INTEGER;
    claimed queue_claim_state := ROW('{}', '{}', '{}', '{}', '{}', '{}', NULL, '{}', '{}', NULL);
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
    claimed.pickable := queue_claim_pickable_v1(claimed);
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
next claim locks its domain. When the domains it may give tasks are few beside the blocked ones, they are its
pickable ones (queue_claim_pickable_v1). Returns the claim''s state (queue_claim_state), with no task picked
yet.';

CREATE OR REPLACE FUNCTION queue_claim_take_v1(INOUT claimed queue_claim_state, p_id bigint, p_domain text) RETURNS queue_claim_state
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    k      INTEGER := array_position(claimed.domains, p_domain);
    v_slot TIMESTAMPTZ;
BEGIN
    IF k IS NOT NULL THEN
        IF claimed.interval_s[k] > 0 THEN
            v_slot := claimed.next_slot[k];
            claimed.next_slot[k] := v_slot + make_interval(secs => claimed.interval_s[k]);
            claimed.moved[k] := true;
        END IF;
        claimed.allowance[k] := claimed.allowance[k] - 1;
        IF claimed.allowance[k] <= 0 THEN
            claimed.blocked := claimed.blocked || p_domain;
            claimed.pickable := array_remove(claimed.pickable, p_domain);
        END IF;
    END IF;
    claimed.ids := claimed.ids || p_id;
    claimed.slots := claimed.slots || v_slot;
END $$;

COMMENT ON FUNCTION queue_claim_take_v1(INOUT claimed queue_claim_state, p_id bigint, p_domain text) IS 'Add task p_id of domain p_domain to the claim: a throttled domain hands out its next
politeness slot (NULL when it only caps in-flight requests), spends one unit of its allowance, and is blocked
(and no longer pickable) when none is left; its next slot is marked moved, to be saved at the end of the claim.';

CREATE FUNCTION queue_claim_group_tasks_v1(p_type text, p_group text, p_now timestamp with time zone, p_claimed queue_claim_state, p_limit integer) RETURNS TABLE(id bigint, domain text, priority integer)
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_claimed.pickable IS NULL THEN  -- the group's tasks in order, past the blocked domains'
        RETURN QUERY
        SELECT t.id, t.domain, t.priority FROM tasks t
        WHERE t.status = 'pending' AND t.task_type = p_type AND t.task_group = p_group AND t.run_at <= p_now
          AND NOT (t.domain = ANY(p_claimed.blocked)) AND NOT (t.id = ANY(p_claimed.ids))
        ORDER BY t.priority DESC, t.id LIMIT p_limit FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    -- each pickable domain's first tasks of the group (idx_tasks_pending_domain_group), then the first of them
    RETURN QUERY
    SELECT t.id, t.domain, t.priority FROM tasks t
    WHERE t.id = ANY(ARRAY(
              SELECT c.id FROM unnest(p_claimed.pickable) AS u(name)
              CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                  WHERE t.status = 'pending' AND t.domain = u.name AND t.task_type = p_type
                                    AND t.task_group = p_group AND t.run_at <= p_now
                                    AND NOT (t.id = ANY(p_claimed.ids))
                                  ORDER BY t.priority DESC, t.id LIMIT p_limit) c))
      AND t.status = 'pending'
    ORDER BY t.priority DESC, t.id LIMIT p_limit FOR UPDATE SKIP LOCKED;
END $$;

COMMENT ON FUNCTION queue_claim_group_tasks_v1(p_type text, p_group text, p_now timestamp with time zone, p_claimed queue_claim_state, p_limit integer) IS 'The first p_limit pending tasks of a group due at p_now by priority then age, outside the claim''s blocked domains
and the tasks it took, locked (SKIP LOCKED). With pickable domains (queue_claim_pickable_v1), the first of each
one''s first tasks (idx_tasks_pending_domain_group), locked as they are chosen: a throttled one''s tasks are
the claim''s alone (it holds its domain''s lock), and a task of an unthrottled one that another claim holds is
left out, not replaced. Else the group''s tasks in order, past the blocked domains'' and those another claim
holds.';

CREATE OR REPLACE FUNCTION queue_claim_fetch_plan_v2(p_rounds queue_claim_rounds, p_groups integer[], p_now timestamp with time zone, p_claimed queue_claim_state, OUT task_ids bigint[], OUT task_domains text[], OUT member_next integer[], OUT member_last integer[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_member INTEGER[];
BEGIN
    SELECT coalesce(array_agg(x.j ORDER BY x.j, x.priority DESC, x.id), '{}'),
           coalesce(array_agg(x.id ORDER BY x.j, x.priority DESC, x.id), '{}'),
           coalesce(array_agg(x.domain ORDER BY x.j, x.priority DESC, x.id), '{}')
    INTO v_member, task_ids, task_domains
    FROM (SELECT u.j, t.id, t.domain, t.priority
          FROM (SELECT w.j, count(*)::INTEGER AS picks FROM unnest(p_groups) w(j) GROUP BY w.j) u
          CROSS JOIN LATERAL queue_claim_group_tasks_v1(substr(p_rounds.scope[u.j], 8), p_rounds.member[u.j],
                                                        p_now, p_claimed, u.picks) t) x;
    member_next := array_fill(NULL::INTEGER, ARRAY[cardinality(p_rounds.member)]);
    member_last := member_next;
    FOR q IN 1..cardinality(v_member) LOOP
        member_next[v_member[q]] := coalesce(member_next[v_member[q]], q);
        member_last[v_member[q]] := q;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_fetch_plan_v2(p_rounds queue_claim_rounds, p_groups integer[], p_now timestamp with time zone, p_claimed queue_claim_state, OUT task_ids bigint[], OUT task_domains text[], OUT member_next integer[], OUT member_last integer[]) IS 'The tasks of a planned walk, in one statement: for each group member of p_groups, as many of its next tasks
as the plan gives it picks (queue_claim_group_tasks_v1: priority, then age; outside the blocked domains and the
tasks taken; locked). They come grouped by member in each member''s order (task_ids, task_domains), with each
member''s first and last position (member_next, member_last; NULL: none fetched). A group''s fetched tasks are
those the reference pick would take from it one by one, since blocked domains only grow during a claim.';

CREATE FUNCTION queue_claim_next_task_v2(p_type text, p_group text, p_now timestamp with time zone, p_claimed queue_claim_state, OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_group IS NOT NULL THEN
        SELECT c.id, c.domain INTO task_id, task_domain
        FROM queue_claim_group_tasks_v1(p_type, p_group, p_now, p_claimed, 1) c;
        RETURN;
    END IF;
    SELECT t.id, t.domain INTO task_id, task_domain FROM tasks t
    WHERE t.status = 'pending' AND t.task_type = p_type AND t.run_at <= p_now
      AND NOT (t.domain = ANY(p_claimed.blocked)) AND NOT (t.id = ANY(p_claimed.ids))
    ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
END $$;

COMMENT ON FUNCTION queue_claim_next_task_v2(p_type text, p_group text, p_now timestamp with time zone, p_claimed queue_claim_state, OUT task_id bigint, OUT task_domain text) IS 'The next task of a type (p_group NULL: any group) by priority then age, outside the claim''s blocked domains and
the tasks it took, locked (SKIP LOCKED); NULLs when there is none. A group''s is queue_claim_group_tasks_v1''s
first.';

CREATE OR REPLACE FUNCTION queue_claim_pick_fair_v2(p_types text[], p_scheduled boolean, p_interleave boolean, p_now timestamp with time zone, p_claimed queue_claim_state, INOUT rounds queue_claim_rounds, OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    k      INTEGER := array_position(rounds.scopes, 'interleave');
    g      INTEGER;
    tj     INTEGER;
    gj     INTEGER;
    r      RECORD;
    v_type TEXT;
BEGIN
    LOOP
        tj := NULL;
        v_type := p_types[1];
        IF p_interleave THEN
            IF k IS NULL THEN
                RETURN;  -- no interleave member
            END IF;
            tj := queue_swrr_pick_v1(rounds.member, rounds.weight, rounds.cur, rounds.live, rounds.lo[k], rounds.hi[k]);
            IF tj IS NULL THEN
                RETURN;
            END IF;
            v_type := rounds.member[tj];
        END IF;
        gj := NULL;
        task_id := NULL;
        g := array_position(rounds.scopes, 'groups:' || v_type);
        IF p_scheduled AND g IS NOT NULL THEN
            SELECT * INTO r FROM queue_claim_pick_group_v2(v_type, g, p_now, p_claimed, rounds);
            rounds := r.rounds;
            gj := r.gj;
            task_id := r.task_id;
            task_domain := r.task_domain;
        ELSIF NOT p_scheduled THEN
            SELECT * INTO task_id, task_domain
            FROM queue_claim_next_task_v2(v_type, NULL, p_now, p_claimed);
        END IF;
        IF task_id IS NULL THEN
            IF tj IS NULL THEN
                RETURN;  -- the claim's one type has nothing to give
            END IF;
            rounds.live[tj] := false;
            rounds.idle[tj] := NOT queue_claim_has_work_v1(v_type, NULL, p_now, p_claimed.ids);
            CONTINUE;
        END IF;
        IF tj IS NOT NULL THEN
            rounds.cur := queue_swrr_apply_v1(rounds.weight, rounds.cur, rounds.live, rounds.lo[k], rounds.hi[k], tj);
        END IF;
        IF gj IS NOT NULL THEN
            rounds.cur := queue_swrr_apply_v1(rounds.weight, rounds.cur, rounds.live, rounds.lo[g], rounds.hi[g], gj);
            IF rounds.budget[gj] IS NOT NULL THEN
                rounds.budget[gj] := rounds.budget[gj] - 1;
                IF rounds.budget[gj] <= 0 THEN
                    rounds.live[gj] := false;
                END IF;
            END IF;
        END IF;
        RETURN;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_pick_fair_v2(p_types text[], p_scheduled boolean, p_interleave boolean, p_now timestamp with time zone, p_claimed queue_claim_state, INOUT rounds queue_claim_rounds, OUT task_id bigint, OUT task_domain text) IS 'One fair pick, the reference the batched strategy reproduces: a task type by round-robin over the interleave
members (or the claim''s one type), then, when scheduled, one of the type''s groups (queue_claim_pick_group_v2),
then its task, outside p_claimed''s blocked domains and tasks. A type without a task to give is skipped like a
group. The rounds of the winners are applied and a group''s budget spent. Returns the round-robin state and
the task, or a NULL task when nothing more can be picked.';

CREATE OR REPLACE FUNCTION queue_claim_pick_group_v2(p_type text, p_g integer, p_now timestamp with time zone, p_claimed queue_claim_state, INOUT rounds queue_claim_rounds, OUT gj integer, OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    LOOP
        gj := queue_swrr_pick_v1(rounds.member, rounds.weight, rounds.cur, rounds.live, rounds.lo[p_g], rounds.hi[p_g]);
        IF gj IS NULL THEN
            RETURN;
        END IF;
        SELECT * INTO task_id, task_domain
        FROM queue_claim_next_task_v2(p_type, rounds.member[gj], p_now, p_claimed);
        IF task_id IS NOT NULL THEN
            RETURN;
        END IF;
        rounds.live[gj] := false;
        rounds.idle[gj] := NOT queue_claim_has_work_v1(p_type, rounds.member[gj], p_now, p_claimed.ids);
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_pick_group_v2(p_type text, p_g integer, p_now timestamp with time zone, p_claimed queue_claim_state, INOUT rounds queue_claim_rounds, OUT gj integer, OUT task_id bigint, OUT task_domain text) IS 'Pick a group of a task type (the members of scope p_g) by round-robin and its next task. A group without one
is skipped without losing its place (its current is left as is) and marked idle if it has no work at all.
Returns the state, the group''s index and the task, or NULLs when no group has a task to give.';

DROP FUNCTION queue_claim_next_task_v1(text, text, timestamp with time zone, text[], bigint[]);
