-- Whether a task type or group has due work was an EXISTS, which PostgreSQL answers with the plan that expects
-- to meet a match soonest. A sequential scan expects that too, and meets the pending tasks only past the finished
-- ones before them: with a crawl's statistics the claim read every task of the table to ask one member (10,000
-- rows at 10,000 tasks). The question is now the member's first due task in its index's order, which only the
-- index answers without reading the rest; waking idle members asks it of each one.

CREATE OR REPLACE FUNCTION queue_claim_has_work_v1(p_type text, p_group text, p_now timestamp with time zone,
                                                   p_taken bigint[]) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF p_group IS NULL THEN  -- two statements, so that each reads its own index
        RETURN (SELECT t.id FROM tasks t
                WHERE t.status = 'pending' AND t.task_type = p_type AND t.run_at <= p_now
                  AND NOT (t.id = ANY(p_taken))
                ORDER BY t.priority DESC, t.id LIMIT 1) IS NOT NULL;
    END IF;
    RETURN (SELECT t.id FROM tasks t
            WHERE t.status = 'pending' AND t.task_type = p_type AND t.task_group = p_group AND t.run_at <= p_now
              AND NOT (t.id = ANY(p_taken))
            ORDER BY t.priority DESC, t.id LIMIT 1) IS NOT NULL;
END $$;

COMMENT ON FUNCTION queue_claim_has_work_v1(p_type text, p_group text, p_now timestamp with time zone, p_taken bigint[]) IS 'Whether a task type (p_group NULL) or one of its groups has claimable work besides the tasks taken: a member
without any is idle, one whose work only waits behind a politeness slot is not. Asked as the first such task in
the order of idx_tasks_pending_type or idx_tasks_pending_group, which only that index answers without a sort:
an EXISTS lets the planner pick a sequential scan that expects a match soon and reads every finished task first.';

CREATE OR REPLACE FUNCTION queue_claim_wake_members_v1(p_scopes text[], p_now timestamp with time zone) RETURNS void
    LANGUAGE sql
    AS $$
    UPDATE queue_members m SET idle = false, current = 0
    WHERE m.scope = 'interleave' AND 'interleave' = ANY(p_scopes) AND m.idle
      AND queue_claim_has_work_v1(m.member, NULL, p_now, '{}');
    UPDATE queue_members m SET idle = false, current = 0
    WHERE m.scope = ANY(p_scopes) AND m.scope LIKE 'groups:%' AND m.idle
      AND queue_claim_has_work_v1(substr(m.scope, 8), m.member, p_now, '{}');
$$;

COMMENT ON FUNCTION queue_claim_wake_members_v1(p_scopes text[], p_now timestamp with time zone) IS 'Members last seen without work (idle) that have claimable work again re-enter the rounds at current 0: no
burst of saved credit, no old debt. The others stay out of the rounds until they do. Each idle member is asked
apart (queue_claim_has_work_v1), one probe of an index each, never a read of the pending tasks.';
