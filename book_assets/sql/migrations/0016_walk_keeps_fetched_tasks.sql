-- A scheduled claim walks its plan of picks and, where a planned group has no task to give, falls back to the
-- reference pick and plans again; each walk fetched every planned group's tasks anew, and the reference pick
-- asked each group without a task in turn. At many politely limited hosts a claim walked 3.4 times against 1.2
-- at one host (0.86 ms of PostgreSQL's time a page at 100 hosts): most groups have no task in the few domains a
-- claim may serve, and a group's fetch took several tasks of one domain that has one slot to give, so the walk
-- passed over the rest and fell short.
-- - A group's fetch takes no more of a throttled domain's tasks than the domain's allowance left.
-- - A claim keeps each group's fetched tasks across its plans and fetches only the groups short of their
--   planned picks.
-- - A group whose fetch found fewer tasks than it asked for has none past them that the claim could take: where
--   the round-robin reaches it with none left, it leaves the rounds as the reference pick's query would have it
--   leave, without the query.

CREATE TYPE queue_claim_fetched AS (
    ids     BIGINT[],   -- the fetched tasks, each group's in a run of its own, in the group's order
    domains TEXT[],
    next    INTEGER[],  -- per round-robin member: its next fetched task and its last (NULL: none)
    last    INTEGER[],
    whole   BOOLEAN[]   -- per member: its fetch found fewer tasks than it asked for, so none is past them
);

COMMENT ON TYPE queue_claim_fetched IS 'The tasks a scheduled claim fetched for its planned groups, kept across its plans (queue_claim_fetch_short_v1).';

CREATE FUNCTION queue_claim_fetch_short_v1(p_rounds queue_claim_rounds, p_groups integer[], p_now timestamp with time zone,
                                           p_claimed queue_claim_state, INOUT fetched queue_claim_fetched)
    RETURNS queue_claim_fetched
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_off   INTEGER := cardinality(fetched.ids);
    -- among pickable domains, a group is asked for as many more tasks as those domains have slots left: then a
    -- fetch that finds fewer than it asked for found every task of the group the claim could take
    v_room  INTEGER := CASE WHEN p_claimed.pickable IS NOT NULL THEN
        (SELECT coalesce(sum(u.allowance), 0) FROM unnest(p_claimed.domains, p_claimed.allowance) u(name, allowance)
         WHERE u.name = ANY(p_claimed.pickable) AND u.allowance > 0) ELSE 0 END;
    v_short INTEGER[];
    v_picks INTEGER[];
    r       RECORD;
BEGIN
    -- the planned groups not known to be whole whose fetched tasks, past those taken and those in blocked
    -- domains, are fewer than their picks
    SELECT coalesce(array_agg(u.j ORDER BY u.j), '{}'), coalesce(array_agg(u.picks ORDER BY u.j), '{}')
    INTO v_short, v_picks
    FROM (SELECT w.j, count(*)::INTEGER AS picks FROM unnest(p_groups) w(j) WHERE w.j IS NOT NULL GROUP BY w.j) u
    WHERE NOT fetched.whole[u.j]
      AND (SELECT count(*) FROM generate_series(fetched.next[u.j], fetched.last[u.j]) p
           WHERE NOT (fetched.domains[p] = ANY(p_claimed.blocked) OR fetched.ids[p] = ANY(p_claimed.ids))) < u.picks;
    IF cardinality(v_short) = 0 THEN
        RETURN;
    END IF;
    -- fetched again whole: a group's first tasks include those it still has fetched (this claim holds their locks)
    SELECT * INTO r FROM queue_claim_fetch_plan_v2(
        p_rounds, ARRAY(SELECT u.j FROM unnest(v_short, v_picks) u(j, picks), generate_series(1, u.picks + v_room)),
        p_now, p_claimed);
    fetched.ids := fetched.ids || r.task_ids;
    fetched.domains := fetched.domains || r.task_domains;
    FOR q IN 1..cardinality(v_short) LOOP
        fetched.next[v_short[q]] := v_off + r.member_next[v_short[q]];
        fetched.last[v_short[q]] := v_off + r.member_last[v_short[q]];
        fetched.whole[v_short[q]] :=
            coalesce(r.member_last[v_short[q]] - r.member_next[v_short[q]] + 1, 0) < v_picks[q] + v_room;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_fetch_short_v1(p_rounds queue_claim_rounds, p_groups integer[], p_now timestamp with time zone, p_claimed queue_claim_state, INOUT fetched queue_claim_fetched) IS 'Fetch the tasks of the planned groups (p_groups, a group once a pick) that the claim has not fetched enough of:
those whose fetched tasks, past those taken and those in blocked domains, are fewer than their picks, unless their
last fetch found fewer than it asked for (whole: no task is past them). Each is fetched again from its first
task (queue_claim_fetch_plan_v2), as many as its picks and, among pickable domains, as many more as those
domains have slots left, and its run of fetched tasks replaced.';

CREATE FUNCTION queue_claim_fetched_next_v1(p_fetched queue_claim_fetched, p_j integer, p_claimed queue_claim_state)
    RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    p INTEGER := p_fetched.next[p_j];
BEGIN
    -- a task whose domain ran out of slots is passed over, as the reference pick's query would, and one taken
    WHILE p <= p_fetched.last[p_j]
          AND (p_fetched.domains[p] = ANY(p_claimed.blocked) OR p_fetched.ids[p] = ANY(p_claimed.ids)) LOOP
        p := p + 1;
    END LOOP;
    RETURN CASE WHEN p <= p_fetched.last[p_j] THEN p END;
END $$;

COMMENT ON FUNCTION queue_claim_fetched_next_v1(p_fetched queue_claim_fetched, p_j integer, p_claimed queue_claim_state) IS 'Where round-robin member p_j''s next fetched task is that the claim may take (outside its blocked domains, not
taken), or NULL when it has none left.';

CREATE FUNCTION queue_claim_walk_v3(p_types text[], p_now timestamp with time zone, p_types_plan integer[],
                                    p_groups_plan integer[], INOUT claimed queue_claim_state,
                                    INOUT rounds queue_claim_rounds, INOUT fetched queue_claim_fetched,
                                    OUT done boolean)
    RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    k        INTEGER := array_position(rounds.scopes, 'interleave');  -- the type rounds; NULL for one type
    g        INTEGER;
    r        RECORD;
    s        INTEGER := 0;  -- the planned picks taken
    j        INTEGER;
    p        INTEGER;
    v_short  BOOLEAN := false;
    v_id     BIGINT;
    v_domain TEXT;
BEGIN
    done := false;
    fetched := queue_claim_fetch_short_v1(rounds, p_groups_plan, p_now, claimed, fetched);
    LOOP
        EXIT WHEN done OR s = cardinality(p_types_plan);
        j := p_groups_plan[s + 1];  -- NULL past the groups planned: the reference pick is due
        p := queue_claim_fetched_next_v1(fetched, j, claimed);
        IF p IS NOT NULL THEN
            fetched.next[j] := p + 1;
            s := s + 1;
            v_id := fetched.ids[p];
            v_domain := fetched.domains[p];
        ELSE  -- the group has no fetched task left: the reference pick, from the rounds so far
            v_short := true;
            rounds := queue_fair_rounds_plan_v2(rounds, k, p_types_plan[1:s], p_groups_plan[1:s]);
            -- the round-robin winners whose fetch found all they have (whole) and none of it left would be found
            -- without a task by the reference pick's queries, one after another: they leave the rounds here
            g := array_position(rounds.scopes, rounds.scope[j]);
            WHILE fetched.whole[j] AND queue_claim_fetched_next_v1(fetched, j, claimed) IS NULL LOOP
                rounds.live[j] := false;
                rounds.idle[j] := NOT queue_claim_has_work_v1(substr(rounds.scope[j], 8), rounds.member[j], p_now,
                                                              claimed.ids);
                j := queue_swrr_pick_v1(rounds.member, rounds.weight, rounds.cur, rounds.live, rounds.lo[g], rounds.hi[g]);
            END LOOP;
            p := queue_claim_fetched_next_v1(fetched, j, claimed);
            IF p IS NOT NULL THEN  -- the winner's next task is fetched: the pick the reference would make
                rounds := queue_fair_rounds_plan_v2(rounds, k, p_types_plan[s + 1:s + 1], ARRAY[j]);
                fetched.next[j] := p + 1;
                v_id := fetched.ids[p];
                v_domain := fetched.domains[p];
            ELSE
                SELECT * INTO r FROM queue_claim_pick_fair_v2(p_types, true, k IS NOT NULL, p_now, claimed, rounds);
                rounds := r.rounds;
                v_id := r.task_id;
                v_domain := r.task_domain;
                done := v_id IS NULL;  -- nothing more can be picked
                EXIT WHEN done;
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
        rounds := queue_fair_rounds_plan_v2(rounds, k, p_types_plan[1:s], p_groups_plan[1:s]);
    END IF;
END $$;

COMMENT ON FUNCTION queue_claim_walk_v3(p_types text[], p_now timestamp with time zone, p_types_plan integer[], p_groups_plan integer[], INOUT claimed queue_claim_state, INOUT rounds queue_claim_rounds, INOUT fetched queue_claim_fetched, OUT done boolean) IS 'Take a scheduled claim''s planned picks (types p_types_plan, groups p_groups_plan), fetching first what the
claim''s fetched tasks lack (queue_claim_fetch_short_v1), and walk the plan, taking each group''s next fetched
task (queue_claim_fetched_next_v1). Where a group has none left, or the plan ends before n, the rounds so far
are applied and the pick the reference (queue_claim_pick_fair_v2) would make is made instead, and the walk
ends: the caller plans again. The round-robin winners known to have no task left (their fetch found all they
have) leave the rounds, marked idle if they have no work at all, as the reference pick''s queries would find
them one after another; the next winner''s fetched task is taken with its rounds applied, or, when it has none
fetched, the reference pick is made. Each pick''s domain hands out a slot (queue_claim_take_v1). done: nothing
more can be picked, or every domain is out of slots.';

CREATE OR REPLACE FUNCTION queue_claim_scheduled_v2(p_n integer, p_types text[], p_interleaved boolean,
                                                    p_now timestamp with time zone, INOUT claimed queue_claim_state,
                                                    INOUT rounds queue_claim_rounds)
    RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    k       INTEGER;  -- the scope of the type rounds; NULL when not interleaved
    g       INTEGER;  -- the scope of the one type's groups, when not interleaved
    t_plan  INTEGER[];
    g_plan  INTEGER[];
    r       RECORD;
    v_done  BOOLEAN := false;
    v_none  INTEGER[] := array_fill(NULL::INTEGER, ARRAY[cardinality(rounds.member)]);
    fetched queue_claim_fetched := ROW('{}', '{}', v_none, v_none,
                                       array_fill(false, ARRAY[cardinality(rounds.member)]))::queue_claim_fetched;
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
        SELECT * INTO r FROM queue_claim_walk_v3(p_types, p_now, t_plan, g_plan, claimed, rounds, fetched);
        claimed := r.claimed;
        rounds := r.rounds;
        fetched := r.fetched;
        v_done := r.done;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_scheduled_v2(p_n integer, p_types text[], p_interleaved boolean, p_now timestamp with time zone, INOUT claimed queue_claim_state, INOUT rounds queue_claim_rounds) IS 'Scheduled claim: smooth weighted round-robin over a task type''s groups (interleaved: over the task types first,
then over the chosen type''s groups), in batches. Plans the picks left as if every live member had work
(queue_fair_plan_v2 over the one type''s groups; interleaved, queue_fair_plan_interleaved_v2), takes them
(queue_claim_walk_v3, with the tasks fetched for earlier plans), and plans again until n are taken, nothing
more can be picked or every domain is out of slots. The picks are those of the reference pick
(queue_claim_pick_fair_v2) made one by one, in its order (docs/queue.md, "Fairness"). With one type, a pick''s
type is that type: the claim is the interleaved one without type rounds.';

DROP FUNCTION queue_claim_walk_v2(text[], integer, timestamp with time zone, integer[], integer[], queue_claim_state, queue_claim_rounds);

CREATE OR REPLACE FUNCTION queue_claim_group_tasks_v1(p_type text, p_group text, p_now timestamp with time zone,
                                                      p_claimed queue_claim_state, p_limit integer)
    RETURNS TABLE(id bigint, domain text, priority integer)
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
    -- each pickable domain's first tasks of the group (idx_tasks_pending_domain_group), as many as the domain
    -- has allowance left (a throttled one) or the limit, then the first of them
    RETURN QUERY
    SELECT t.id, t.domain, t.priority FROM tasks t
    WHERE t.id = ANY(ARRAY(
              SELECT c.id FROM unnest(p_claimed.pickable) AS u(name)
              CROSS JOIN LATERAL (SELECT t.id FROM tasks t
                                  WHERE t.status = 'pending' AND t.domain = u.name AND t.task_type = p_type
                                    AND t.task_group = p_group AND t.run_at <= p_now
                                    AND NOT (t.id = ANY(p_claimed.ids))
                                  ORDER BY t.priority DESC, t.id
                                  LIMIT least(p_limit, p_claimed.allowance[array_position(p_claimed.domains, u.name)])) c))
      AND t.status = 'pending'
    ORDER BY t.priority DESC, t.id LIMIT p_limit FOR UPDATE SKIP LOCKED;
END $$;

COMMENT ON FUNCTION queue_claim_group_tasks_v1(p_type text, p_group text, p_now timestamp with time zone, p_claimed queue_claim_state, p_limit integer) IS 'The first p_limit pending tasks of a group due at p_now by priority then age, outside the claim''s blocked domains
and the tasks it took, locked (SKIP LOCKED). With pickable domains (queue_claim_pickable_v1), the first of each
one''s first tasks (idx_tasks_pending_domain_group), no more of a throttled domain than its allowance left (the
claim can take no more of it), locked as they are chosen: a throttled one''s tasks are the claim''s alone (it
holds its domain''s lock), and a task of an unthrottled one that another claim holds is left out, not replaced.
Else the group''s tasks in order, past the blocked domains'' and those another claim holds.';
