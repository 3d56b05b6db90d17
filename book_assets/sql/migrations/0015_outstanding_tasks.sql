-- Whether the queue is drained is asked by every worker each time it has nothing in flight, which a polite crawl
-- of many hosts does between most slots. The question counted every outstanding task (5 ms a call with 10,000
-- pending, 0.2 ms of PostgreSQL's time a page at 100 hosts). The outstanding tasks are now one function: a count
-- of them says how many listing pages are left, and a drain asks only whether there is one.

CREATE FUNCTION queue_outstanding_v1(p_types text[]) RETURNS SETOF bigint
    LANGUAGE sql STABLE
    AS $$
    WITH exhausted AS (
        SELECT b.scope, b.member FROM queue_budget_left_v1(ARRAY(SELECT 'groups:' || x FROM unnest(p_types) x)) b
        WHERE b.budget_left = 0
    )
    SELECT t.id FROM tasks t
    WHERE t.task_type = ANY(p_types)
      AND (t.status = 'in_progress'
           OR (t.status = 'pending'
               AND NOT EXISTS (SELECT 1 FROM exhausted e WHERE e.scope = 'groups:' || t.task_type
                                                         AND e.member = t.task_group)
               AND NOT EXISTS (
                 SELECT 1 FROM queue_scopes s LEFT JOIN queue_members m
                        ON m.scope = s.scope AND m.member = t.task_group
                 WHERE s.scope = 'groups:' || t.task_type
                   AND coalesce(m.weight, s.default_weight) = 0)))
$$;

COMMENT ON FUNCTION queue_outstanding_v1(p_types text[]) IS 'The tasks of these types that a worker may still be handed: in progress, or pending in a group that is neither out
of budget nor weighted 0 (weight-0 groups are skipped on purpose and stay pending). Inlined into the query that
calls it, so a question of whether there is one stops at the first.';
