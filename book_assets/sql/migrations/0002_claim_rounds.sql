-- The fair claim's round-robin state in one composite value (queue_claim_rounds) instead of parallel INOUT
-- arrays, and its strategies named for what they do: queue_claim_scheduled_v2 (round-robin over one type's
-- groups, or over types and then each type's groups; planned in batches) and queue_claim_interleaved_v2
-- (round-robin over task types alone, pick by pick). The single-type scheduled claim is the interleaved one
-- with one type and no type rounds, so the two batched strategies of 0001 are one. No function takes more
-- than 8 parameters or runs over 60 lines (book_assets_tests/foundation/test_schema_function_size.py).
--
-- The claim's picks, their order and the state it saves are those of 0001's functions; the versions they
-- replace are dropped at the end.

-- What a fair claim carries of the round-robin state (queue_claim_rounds_v2 loads it, queue_claim_save_rounds_v2
-- saves it): the members of its scopes ordered by scope then member, so each scope's members are contiguous.
CREATE TYPE public.queue_claim_rounds AS (
    scope text[],
    member text[],
    weight double precision[],
    cur double precision[],
    budget bigint[],
    idle boolean[],
    live boolean[],
    scopes text[],
    lo integer[],
    hi integer[]
);

COMMENT ON TYPE public.queue_claim_rounds IS 'The round-robin state a fair claim carries from pick to pick (queue_claim_v2): one
element per member of its scopes, ordered by scope then member (a member''s index in scope, member, weight,
cur, budget, idle and live): its scope, name (a group; in scope ''interleave'', a task type), weight, current,
budget left (NULL: none set), whether it was last seen without work (idle) and whether it takes part in
rounds (live: weight above 0, budget left, not idle). scopes lists the scopes, and the members of scopes[k]
are lo[k]..hi[k]. One value instead of parallel INOUT arrays: each step takes it and returns it.';

CREATE FUNCTION public.queue_claim_v2(p_request uuid, p_worker text, p_n integer, p_types text[], p_lease_s double precision, p_horizon_s double precision, p_scheduled boolean, p_interleave jsonb) RETURNS TABLE(id bigint, task_type text, payload jsonb, priority integer, domain text, task_group text, attempts integer, max_attempts integer, lease_token bigint, lease_expires_at timestamp with time zone, slot_at timestamp with time zone, next_at timestamp with time zone)
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
    claimed := queue_claim_domains_v1(p_n, v_now, v_now + make_interval(secs => p_horizon_s), p_horizon_s);
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
        UPDATE domains dm SET next_slot_at = u.next
        FROM unnest(claimed.domains, claimed.next_slot, claimed.moved) AS u(name, next, moved)
        WHERE u.moved AND dm.domain = u.name;
    END IF;
    -- 6. leases
    RETURN QUERY SELECT * FROM queue_claim_lease_v1(p_request, p_scheduled, p_worker, p_lease_s, v_now, claimed.ids,
                                                    claimed.slots, claimed.next_at);
END $$;

COMMENT ON FUNCTION queue_claim_v2 IS 'Claim up to p_n tasks in one round trip (docs/queue.md, "The claim"):
1. a request already answered (its answer was lost with the connection) gets the same leases back: a retried
   claim never leases a second batch, so it spends no extra attempts, slots or budget;
2. expired leases are reclaimed (queue_reclaim_expired_v1);
3. a fair claim (p_scheduled: round-robin over the type''s groups; p_interleave: over task types) locks its
   scopes (queue_claim_lock_scopes_v1; lock order everywhere: scopes by name, then domains), refreshes what
   each group budget may still hand out (queue_budget_left_v1) and lets idle members with work back into the
   rounds (queue_claim_wake_members_v1);
4. the throttled domains are locked, each with its allowance of politeness slots (queue_claim_domains_v1);
5. unless every domain is blocked, tasks are picked by one strategy: queue_claim_scheduled_v2 (p_scheduled:
   round-robin over groups, after round-robin over types when interleaved; planned in batches),
   queue_claim_interleaved_v2 (p_interleave alone: round-robin over types, pick by pick) or
   queue_claim_plain_v1 (priority, then age). A fair strategy starts from the scopes'' round-robin state
   (queue_claim_rounds_v2), which is saved once after (queue_claim_save_rounds_v2); so are the domains'' next
   slots;
6. the picked tasks are leased, marked with the request and charged to their budgets (queue_claim_lease_v1),
   or one row with a NULL id says when to come back.
It runs as one autocommit statement, so the scope and domain locks last one statement, never a client round
trip; and it commits synchronously: a claim acknowledged to a worker survives a server crash, so no lease
token and no politeness slot is ever handed out twice.';

CREATE FUNCTION public.queue_claim_rounds_v2(p_scopes text[], p_interleave jsonb) RETURNS public.queue_claim_rounds
    LANGUAGE sql STABLE
    AS $$
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

COMMENT ON FUNCTION queue_claim_rounds_v2 IS 'The round-robin state of the scopes, as the claim starts (queue_claim_rounds): their members ordered by scope
then member, each scope''s a contiguous range. A member is live while its weight is above 0, it has budget
left and it is not idle. Interleave members are the claim''s task types.';

CREATE FUNCTION public.queue_claim_save_rounds_v2(p_rounds public.queue_claim_rounds) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN  -- plpgsql, so that the statement's plan is cached for the session as the claim's own are
    UPDATE queue_members qm SET current = u.cur, budget = u.budget, idle = u.idle
    FROM unnest(p_rounds.scope, p_rounds.member, p_rounds.cur, p_rounds.budget, p_rounds.idle)
         AS u(scope, member, cur, budget, idle)
    WHERE qm.scope = u.scope AND qm.member = u.member
      AND (qm.current, qm.budget, qm.idle) IS DISTINCT FROM (u.cur, u.budget, u.idle);
END $$;

COMMENT ON FUNCTION queue_claim_save_rounds_v2 IS 'Save a fair claim''s round-robin state (queue_claim_rounds): each member''s current, budget and idleness,
writing only the rows that changed. The claim holds its scopes'' locks, so the state is shared by every worker.';

CREATE FUNCTION public.queue_claim_scheduled_v2(p_n integer, p_types text[], p_interleaved boolean, p_now timestamp with time zone, INOUT claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    k      INTEGER;  -- the scope of the type rounds; NULL when not interleaved
    g      INTEGER;  -- the scope of the one type's groups, when not interleaved
    t_plan INTEGER[];
    g_plan INTEGER[];
    r      RECORD;
    v_done BOOLEAN := false;
BEGIN
    IF p_interleaved THEN
        k := array_position(rounds.scopes, 'interleave');
        IF k IS NULL THEN
            RETURN;  -- no interleave member
        END IF;
    ELSE
        g := array_position(rounds.scopes, 'groups:' || p_types[1]);
        IF g IS NULL THEN
            RETURN;  -- the type has no groups
        END IF;
    END IF;
    WHILE NOT v_done AND cardinality(claimed.ids) < p_n LOOP
        IF p_interleaved THEN
            SELECT * INTO t_plan, g_plan FROM queue_fair_plan_interleaved_v2(rounds, k, p_n - cardinality(claimed.ids));
        ELSE  -- one type: each pick's type is the type, its group one of the type's rounds
            g_plan := queue_fair_plan_v2(rounds, rounds.lo[g], rounds.hi[g], p_n - cardinality(claimed.ids));
            t_plan := g_plan;
        END IF;
        EXIT WHEN cardinality(t_plan) = 0;  -- no live member
        SELECT * INTO r FROM queue_claim_walk_v2(p_types, k, p_now, t_plan, g_plan, claimed, rounds);
        claimed := r.claimed;
        rounds := r.rounds;
        v_done := r.done;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_scheduled_v2 IS 'Scheduled claim: smooth weighted round-robin over a task type''s groups (interleaved: over the task types first,
then over the chosen type''s groups), in batches. Plans the picks left as if every live member had work
(queue_fair_plan_v2 over the one type''s groups; interleaved, queue_fair_plan_interleaved_v2), takes them
(queue_claim_walk_v2), and plans again until n are taken, nothing more can be picked or every domain is out
of slots. The picks are those of the reference pick (queue_claim_pick_fair_v2) made one by one, in its order
(docs/queue.md, "Fairness"). With one type, a pick''s type is that type: the claim is the interleaved one
without type rounds.';

CREATE FUNCTION public.queue_claim_walk_v2(p_types text[], p_k integer, p_now timestamp with time zone, p_types_plan integer[], p_groups_plan integer[], INOUT claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds, OUT done boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    f_id     BIGINT[];   -- the fetched tasks, grouped by member in each member's order
    f_domain TEXT[];
    f_next   INTEGER[];  -- per member: its next fetched task, and its last
    f_last   INTEGER[];
    r        RECORD;
    s        INTEGER := 0;  -- the planned picks taken
    j        INTEGER;
    p        INTEGER;
    v_short  BOOLEAN := false;
    v_id     BIGINT;
    v_domain TEXT;
BEGIN
    done := false;
    SELECT * INTO f_id, f_domain, f_next, f_last FROM queue_claim_fetch_plan_v2(rounds, p_groups_plan, p_now, claimed);
    LOOP
        EXIT WHEN done OR s = cardinality(p_types_plan);
        j := p_groups_plan[s + 1];  -- NULL past the groups planned: the reference pick is due
        p := f_next[j];
        -- a fetched task whose domain ran out of slots during this walk is passed over, as the
        -- reference pick's query would
        WHILE p <= f_last[j] AND f_domain[p] = ANY(claimed.blocked) LOOP
            p := p + 1;
        END LOOP;
        IF p IS NOT NULL AND p <= f_last[j] THEN
            f_next[j] := p + 1;
            s := s + 1;
            v_id := f_id[p];
            v_domain := f_domain[p];
        ELSE
            v_short := true;
            rounds := queue_fair_rounds_plan_v2(rounds, p_k, p_types_plan[1:s], p_groups_plan[1:s]);
            SELECT * INTO r FROM queue_claim_pick_fair_v2(p_types, true, p_k IS NOT NULL, p_now, claimed, rounds);
            rounds := r.rounds;
            v_id := r.task_id;
            v_domain := r.task_domain;
            IF v_id IS NULL THEN
                done := true;  -- nothing more can be picked
                EXIT;
            END IF;
        END IF;
        -- the pick left blocked domains out, so its domain has a slot to give
        claimed := queue_claim_take_v1(claimed, v_id, v_domain);
        IF v_domain = ANY(claimed.blocked) THEN
            done := queue_claim_all_blocked_v1(claimed.blocked);
        END IF;
        EXIT WHEN v_short;
    END LOOP;
    IF NOT v_short THEN
        rounds := queue_fair_rounds_plan_v2(rounds, p_k, p_types_plan[1:s], p_groups_plan[1:s]);
    END IF;
END $$;

COMMENT ON FUNCTION queue_claim_walk_v2 IS 'Take a scheduled claim''s planned picks (types p_types_plan, groups p_groups_plan; p_k the type scope, NULL
for one type): fetch each planned group''s tasks in one statement (queue_claim_fetch_plan_v2) and walk the
plan, taking each group''s next task, passing over a task whose domain ran out of slots during the walk.
Where a group has none left to give, or the plan ends before n, the rounds so far are applied and the
reference pick (queue_claim_pick_fair_v2) made instead, and the walk ends: the caller plans again. Each
pick''s domain hands out a slot (queue_claim_take_v1). done: nothing more can be picked, or every domain is
out of slots.';

CREATE FUNCTION public.queue_claim_fetch_plan_v2(p_rounds public.queue_claim_rounds, p_groups integer[], p_now timestamp with time zone, p_claimed public.queue_claim_state, OUT task_ids bigint[], OUT task_domains text[], OUT member_next integer[], OUT member_last integer[]) RETURNS record
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
          CROSS JOIN LATERAL (
              SELECT t.id, t.domain, t.priority FROM tasks t
              WHERE t.status = 'pending' AND t.task_type = substr(p_rounds.scope[u.j], 8)
                AND t.task_group = p_rounds.member[u.j] AND t.run_at <= p_now
                AND NOT (t.domain = ANY(p_claimed.blocked)) AND NOT (t.id = ANY(p_claimed.ids))
              ORDER BY t.priority DESC, t.id LIMIT u.picks FOR UPDATE SKIP LOCKED) t) x;
    member_next := array_fill(NULL::INTEGER, ARRAY[cardinality(p_rounds.member)]);
    member_last := member_next;
    FOR q IN 1..cardinality(v_member) LOOP
        member_next[v_member[q]] := coalesce(member_next[v_member[q]], q);
        member_last[v_member[q]] := q;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_fetch_plan_v2 IS 'The tasks of a planned walk, in one statement: for each group member of p_groups, as many of its next tasks
as the plan gives it picks (priority, then age; outside the blocked domains and the tasks taken; FOR UPDATE
SKIP LOCKED). They come grouped by member in each member''s order (task_ids, task_domains), with each
member''s first and last position (member_next, member_last; NULL: none fetched). A group''s fetched tasks
are those the reference pick would take from it one by one, since blocked domains only grow during a claim.';

CREATE FUNCTION public.queue_claim_interleaved_v2(p_n integer, p_types text[], p_now timestamp with time zone, INOUT claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    r RECORD;
BEGIN
    WHILE cardinality(claimed.ids) < p_n LOOP
        SELECT * INTO r FROM queue_claim_pick_fair_v2(p_types, false, true, p_now, claimed, rounds);
        rounds := r.rounds;
        EXIT WHEN r.task_id IS NULL;
        -- the pick left blocked domains out, so its domain has a slot to give
        claimed := queue_claim_take_v1(claimed, r.task_id, r.task_domain);
        IF r.task_domain = ANY(claimed.blocked) THEN
            EXIT WHEN queue_claim_all_blocked_v1(claimed.blocked);
        END IF;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_interleaved_v2 IS 'Interleaved claim without group scheduling: round-robin over task types, pick by pick
(queue_claim_pick_fair_v2) until n are taken, nothing more can be picked or every domain is out of slots (then
it stops rather than mark members idle that only wait for a slot); each pick''s domain hands out a slot.';

CREATE FUNCTION public.queue_claim_pick_fair_v2(p_types text[], p_scheduled boolean, p_interleave boolean, p_now timestamp with time zone, p_claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds, OUT task_id bigint, OUT task_domain text) RETURNS record
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
            FROM queue_claim_next_task_v1(v_type, NULL, p_now, p_claimed.blocked, p_claimed.ids);
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

COMMENT ON FUNCTION queue_claim_pick_fair_v2 IS 'One fair pick, the reference the batched strategy reproduces: a task type by round-robin over the interleave
members (or the claim''s one type), then, when scheduled, one of the type''s groups (queue_claim_pick_group_v2),
then its task, outside p_claimed''s blocked domains and tasks. A type without a task to give is skipped like a
group. The rounds of the winners are applied and a group''s budget spent. Returns the round-robin state and
the task, or a NULL task when nothing more can be picked.';

CREATE FUNCTION public.queue_claim_pick_group_v2(p_type text, p_g integer, p_now timestamp with time zone, p_claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds, OUT gj integer, OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    LOOP
        gj := queue_swrr_pick_v1(rounds.member, rounds.weight, rounds.cur, rounds.live, rounds.lo[p_g], rounds.hi[p_g]);
        IF gj IS NULL THEN
            RETURN;
        END IF;
        SELECT * INTO task_id, task_domain
        FROM queue_claim_next_task_v1(p_type, rounds.member[gj], p_now, p_claimed.blocked, p_claimed.ids);
        IF task_id IS NOT NULL THEN
            RETURN;
        END IF;
        rounds.live[gj] := false;
        rounds.idle[gj] := NOT queue_claim_has_work_v1(p_type, rounds.member[gj], p_now, p_claimed.ids);
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_pick_group_v2 IS 'Pick a group of a task type (the members of scope p_g) by round-robin and its next task. A group without one
is skipped without losing its place (its current is left as is) and marked idle if it has no work at all.
Returns the state, the group''s index and the task, or NULLs when no group has a task to give.';

CREATE FUNCTION public.queue_fair_plan_v2(p_rounds public.queue_claim_rounds, p_lo integer, p_hi integer, p_n integer) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    weight DOUBLE PRECISION[] := p_rounds.weight;
    live   BOOLEAN[] := p_rounds.live;
    cur    DOUBLE PRECISION[] := p_rounds.cur;
    left_  BIGINT[] := p_rounds.budget;
    total  DOUBLE PRECISION := 0;
    k      INTEGER := 0;
    w      DOUBLE PRECISION;
    v_one  BOOLEAN := true;
    v_low  DOUBLE PRECISION;
    best   INTEGER;
    bv     DOUBLE PRECISION;
    v      DOUBLE PRECISION;
    picks  INTEGER[] := '{}';
BEGIN
    FOR j IN p_lo..p_hi LOOP
        IF live[j] THEN
            total := total + weight[j];
            k := k + 1;
            v_one := v_one AND (w IS NULL OR weight[j] = w);
            w := weight[j];
            v_low := least(v_low, cur[j]);
        END IF;
    END LOOP;
    IF k = 0 OR p_n < 1 THEN
        RETURN picks;
    END IF;
    IF v_one AND queue_fair_integral_v1(weight, cur, live, p_lo, p_hi) THEN
        RETURN queue_fair_plan_closed_v2(p_rounds, p_lo, p_hi, p_n, total,
                                         v_low - (ceil(p_n::DOUBLE PRECISION / k) - 1) * total);
    END IF;
    FOR i IN 1..p_n LOOP
        best := NULL;
        FOR j IN p_lo..p_hi LOOP
            IF live[j] THEN
                v := cur[j] + weight[j];
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

COMMENT ON FUNCTION queue_fair_plan_v2 IS 'The next picks of a scheduled claim among members lo..hi (indexes into the state''s arrays, which are in name
order), by smooth weighted round-robin as if every live member had work: up to p_n member indexes, in pick
order, ending early with the pick that spends a member''s last unit of budget (the live members, and so the
rounds'' total, change there). Empty when no member is live. Pure. Members of one weight with whole-number
state are planned in closed form (queue_fair_plan_closed_v2); otherwise the rounds are run one by one, the
arithmetic of queue_swrr_pick_v1 and queue_swrr_apply_v1.';

CREATE FUNCTION public.queue_fair_plan_closed_v2(p_rounds public.queue_claim_rounds, p_lo integer, p_hi integer, p_n integer, p_total double precision, p_low double precision) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    -- Array variables, not fields of p_rounds: the query reads each once as a parameter, where a field
    -- would be selected from the composite again for every row. plpgsql also keeps the query's plan for the
    -- session, which a LANGUAGE sql function would plan again at every call.
    cur    DOUBLE PRECISION[] := p_rounds.cur;
    budget BIGINT[] := p_rounds.budget;
    live   BOOLEAN[] := p_rounds.live;
BEGIN
    RETURN ARRAY(
        WITH pairs AS (
            SELECT g.member, c.nth, cur[g.member] - c.nth * p_total AS value,
                   budget[g.member] IS NOT NULL AND c.nth = budget[g.member] - 1 AS spends_budget
            FROM generate_series(p_lo, p_hi) g(member)
            CROSS JOIN LATERAL generate_series(
                0, least(p_n::BIGINT, coalesce(budget[g.member], p_n),
                         floor((cur[g.member] - p_low) / p_total)::BIGINT + 1) - 1) c(nth)
            WHERE live[g.member]
        ), ranked AS (
            SELECT x.member, x.spends_budget, row_number() OVER (ORDER BY x.value DESC, x.member) AS ord
            FROM pairs x
        )
        SELECT r.member FROM ranked r
        WHERE r.ord <= least(p_n, coalesce((SELECT min(x.ord) FROM ranked x WHERE x.spends_budget), p_n))
        ORDER BY r.ord);
END $$;

COMMENT ON FUNCTION queue_fair_plan_closed_v2 IS 'queue_fair_plan_v2 in closed form, for live members lo..hi of one weight with whole-number state (p_total:
their total weight; p_low: a current no member falls below within p_n picks). With the live set fixed, a
member''s (c+1)-th pick comes while its current less c totals is the highest, so the picks are the pairs
(member, c) by current - c*total descending, ties to the smallest name, up to p_n and ending with the pick
that spends a member''s last unit of budget. Pure.';

CREATE FUNCTION public.queue_fair_plan_interleaved_v2(p_rounds public.queue_claim_rounds, p_k integer, p_n integer, OUT t_plan integer[], OUT g_plan integer[]) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_types queue_claim_rounds := p_rounds;  -- the type rounds, which have no budgets
    tj      INTEGER;
    g       INTEGER;
    c       INTEGER;
    occ     INTEGER;
    v_sub   INTEGER[];
    v_cut   INTEGER;
BEGIN
    v_types.budget := array_fill(NULL::BIGINT, ARRAY[cardinality(p_rounds.member)]);
    t_plan := queue_fair_plan_v2(v_types, p_rounds.lo[p_k], p_rounds.hi[p_k], p_n);
    g_plan := array_fill(NULL::INTEGER, ARRAY[cardinality(t_plan)]);
    FOR tj IN SELECT DISTINCT x.j FROM unnest(t_plan) x(j) LOOP
        g := array_position(p_rounds.scopes, 'groups:' || p_rounds.member[tj]);
        CONTINUE WHEN g IS NULL;  -- the type has no groups
        c := (SELECT count(*) FROM unnest(t_plan) x(j) WHERE x.j = tj);
        v_sub := queue_fair_plan_v2(p_rounds, p_rounds.lo[g], p_rounds.hi[g], c);
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

COMMENT ON FUNCTION queue_fair_plan_interleaved_v2 IS 'The next picks of an interleaved scheduled claim: the type rounds over the interleave members (scope p_k; no
budgets at this level), up to p_n type indexes (t_plan), and for each planned type its group rounds
(queue_fair_plan_v2 over its ''groups:'' scope, for as many picks as the type got) as the parallel g_plan.
Both end before the first pick whose type has no group planned for it; t_plan then holds that pick''s type as
one extra element: the reference pick is due there. Pure.';

CREATE FUNCTION public.queue_fair_rounds_v2(INOUT rounds public.queue_claim_rounds, p_lo integer, p_hi integer, p_winners integer[]) RETURNS public.queue_claim_rounds
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    s      INTEGER := cardinality(p_winners);
    weight DOUBLE PRECISION[] := rounds.weight;  -- array variables, updated in place
    cur    DOUBLE PRECISION[] := rounds.cur;
    budget BIGINT[] := rounds.budget;
    live   BOOLEAN[] := rounds.live;
    total  DOUBLE PRECISION := 0;
    cnt    INTEGER[];
    j      INTEGER;
BEGIN
    IF s = 0 THEN
        RETURN;
    END IF;
    IF queue_fair_integral_v1(weight, cur, live, p_lo, p_hi) THEN
        cnt := array_fill(0, ARRAY[p_hi]);
        FOREACH j IN ARRAY p_winners LOOP
            cnt[j] := cnt[j] + 1;
        END LOOP;
        FOR i IN p_lo..p_hi LOOP
            IF live[i] THEN
                total := total + weight[i];
            END IF;
        END LOOP;
        FOR i IN p_lo..p_hi LOOP
            IF live[i] THEN
                cur[i] := cur[i] + s * weight[i] - cnt[i] * total;
            END IF;
        END LOOP;
    ELSE
        FOREACH j IN ARRAY p_winners LOOP
            cur := queue_swrr_apply_v1(weight, cur, live, p_lo, p_hi, j);
        END LOOP;
    END IF;
    FOREACH j IN ARRAY p_winners LOOP
        IF budget[j] IS NOT NULL THEN
            budget[j] := budget[j] - 1;
            IF budget[j] <= 0 THEN
                live[j] := false;
            END IF;
        END IF;
    END LOOP;
    rounds.cur := cur;
    rounds.budget := budget;
    rounds.live := live;
END $$;

COMMENT ON FUNCTION queue_fair_rounds_v2 IS 'Apply the rounds of planned picks (queue_fair_plan_v2, all made with the same live members) to members lo..hi:
currents as queue_swrr_apply_v1 leaves them (in closed form when that is exact), each winner''s budget spent,
and a member whose budget reached 0 out of the rounds.';

CREATE FUNCTION public.queue_fair_rounds_plan_v2(INOUT rounds public.queue_claim_rounds, p_k integer, p_types integer[], p_groups integer[]) RETURNS public.queue_claim_rounds
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_budget  BIGINT[] := rounds.budget;
    v_winners INTEGER[];
BEGIN
    IF p_k IS NOT NULL THEN  -- the type rounds, which have no budgets
        rounds.budget := array_fill(NULL::BIGINT, ARRAY[cardinality(rounds.cur)]);
        rounds := queue_fair_rounds_v2(rounds, rounds.lo[p_k], rounds.hi[p_k], p_types);
        rounds.budget := v_budget;
    END IF;
    FOR g IN 1..cardinality(rounds.lo) LOOP
        CONTINUE WHEN g = p_k;
        v_winners := ARRAY(SELECT x.j FROM unnest(p_groups) WITH ORDINALITY x(j, ord)
                           WHERE x.j BETWEEN rounds.lo[g] AND rounds.hi[g] ORDER BY x.ord);
        IF cardinality(v_winners) > 0 THEN
            rounds := queue_fair_rounds_v2(rounds, rounds.lo[g], rounds.hi[g], v_winners);
        END IF;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_fair_rounds_plan_v2 IS 'Apply the rounds of the first picks of a scheduled claim''s plan: the type rounds over the interleave members
(scope p_k; none when p_k is NULL, a claim of one type), then each type''s group rounds
(queue_fair_rounds_v2, which also spends the group budgets).';

COMMENT ON TYPE public.queue_claim_state IS 'The state a claim carries from step to step (queue_claim_v2): the throttled
domains it locked, in name order (a domain''s index in domains, interval_s, next_slot, allowance and moved),
their next slots, what each may still give and whether its next slot moved (saved at the end of the claim);
the domains it may no longer give tasks (blocked); when the first closed domain opens (next_at); the tasks
picked so far and their slots (ids, slots). One value instead of parallel INOUT arrays: each step takes it and
returns it.';

-- The versions these replace.
DROP FUNCTION queue_claim_v1(uuid, text, integer, text[], double precision, double precision, boolean, jsonb);
DROP FUNCTION queue_claim_groups_v1(integer, text, text[], timestamp with time zone, queue_claim_state);
DROP FUNCTION queue_claim_types_groups_v1(integer, text[], text[], jsonb, timestamp with time zone, queue_claim_state);
DROP FUNCTION queue_claim_types_v1(integer, text[], text[], boolean, jsonb, timestamp with time zone, queue_claim_state);
DROP FUNCTION queue_claim_members_v1(text[], jsonb);
DROP FUNCTION queue_claim_pick_fair_v1(text[], boolean, boolean, timestamp with time zone, text[], bigint[], text[],
                                       double precision[], text[], integer[], integer[], double precision[], bigint[],
                                       boolean[], boolean[]);
DROP FUNCTION queue_claim_pick_group_v1(text, timestamp with time zone, text[], bigint[], text[], double precision[],
                                        double precision[], integer, integer, boolean[], boolean[]);
DROP FUNCTION queue_fair_plan_v1(double precision[], double precision[], boolean[], bigint[], integer, integer, integer);
DROP FUNCTION queue_fair_plan_interleaved_v1(text[], double precision[], double precision[], boolean[], bigint[], text[],
                                             integer[], integer[], integer, integer);
DROP FUNCTION queue_fair_rounds_v1(double precision[], integer, integer, integer[], double precision[], bigint[],
                                   boolean[]);
DROP FUNCTION queue_fair_rounds_interleaved_v1(double precision[], integer[], integer[], integer, integer[], integer[],
                                               double precision[], bigint[], boolean[]);
