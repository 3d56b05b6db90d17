-- A fair claim asks each idle member whether it has due work again. The question compared every pending task
-- with a CASE over the member's scope, which no index answers, so each claim read the pending tasks once (10 ms
-- at 10,000 of them, at a thousand hosts where most members go idle between claims). Asked per kind of scope,
-- it is one probe of idx_tasks_pending_type (a task type) or idx_tasks_pending_group (a type's group) a member.

CREATE OR REPLACE FUNCTION queue_claim_wake_members_v1(p_scopes text[], p_now timestamp with time zone) RETURNS void
    LANGUAGE sql
    AS $$
    UPDATE queue_members m SET idle = false, current = 0
    WHERE m.scope = 'interleave' AND 'interleave' = ANY(p_scopes) AND m.idle
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.status = 'pending' AND t.task_type = m.member AND t.run_at <= p_now);
    UPDATE queue_members m SET idle = false, current = 0
    WHERE m.scope = ANY(p_scopes) AND m.scope LIKE 'groups:%' AND m.idle
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.status = 'pending' AND t.task_type = substr(m.scope, 8) AND t.task_group = m.member
                    AND t.run_at <= p_now);
$$;

COMMENT ON FUNCTION queue_claim_wake_members_v1(p_scopes text[], p_now timestamp with time zone) IS 'Members last seen without work (idle) that have claimable work again re-enter the rounds at current 0: no
burst of saved credit, no old debt. The others stay out of the rounds until they do. Each kind of scope is asked
apart, so each member''s question is one probe of an index (a task type''s, or a type''s group''s), never a read of
the pending tasks.';
