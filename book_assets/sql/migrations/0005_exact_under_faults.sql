-- Exactness under faults: failure kinds counted exactly, claims that can be replayed after a lost
-- acknowledgement, budgets spent only by tasks that end, books keyed by their canonical final URL and kept
-- with the exact bytes that were served.

ALTER TABLE tasks
    ADD COLUMN error_kind    TEXT,  -- why the last failed attempt failed, as a kind (http_404, timeout, ...)
    ADD COLUMN claim_request UUID,  -- the claim call that handed out the current lease (a replay returns it)
    ADD COLUMN budget_key    TEXT;  -- the group budget this task was charged to when it was last leased
UPDATE tasks SET error_kind = split_part(error, ':', 1) WHERE error IS NOT NULL;
ALTER TABLE tasks_archive
    ADD COLUMN error_kind    TEXT,
    ADD COLUMN claim_request UUID,
    ADD COLUMN budget_key    TEXT;

-- A replayed claim finds its leases; a budget counts the tasks charged to it that are no longer pending.
CREATE INDEX idx_tasks_claim_request ON tasks (claim_request) WHERE status = 'in_progress';
CREATE INDEX idx_tasks_budget ON tasks (budget_key, task_group) WHERE budget_key IS NOT NULL AND status <> 'pending';
-- Dead letters counted by kind.
CREATE INDEX idx_tasks_failed_kind ON tasks (task_type, error_kind) WHERE status = 'failed';

-- A budget is a number of tasks that may *end* (complete, or fail for good) in a group. budget_total is the
-- number granted, budget_key names the grant (a replayed grant with the same key changes nothing) and
-- budget, as before, is what claims may still hand out: recomputed at each scheduled claim as
-- budget_total minus the tasks charged to the grant that are leased, completed or failed. A retry, an
-- expired lease or a release puts a task back to pending, and with it its unit of budget.
ALTER TABLE queue_members
    ADD COLUMN budget_total BIGINT CHECK (budget_total IS NULL OR budget_total >= 0),
    ADD COLUMN budget_key   TEXT;
UPDATE queue_members SET budget_total = budget WHERE budget IS NOT NULL;

ALTER TABLE books
    ADD COLUMN requested_url TEXT,   -- the URL the task asked for, when a redirect led elsewhere
    ADD COLUMN raw_body      BYTEA;  -- the served bytes, kept when raw_html (UTF-8) does not reproduce them


-- What each budgeted member of the scopes may still hand out: its grant less the tasks charged to it that
-- are not pending (leased, completed or failed).
CREATE FUNCTION queue_budget_left(p_scopes TEXT[])
RETURNS TABLE (scope TEXT, member TEXT, budget_left BIGINT)
LANGUAGE sql STABLE AS $$
    SELECT m.scope, m.member,
           greatest(m.budget_total - (SELECT count(*) FROM tasks t
                                      WHERE t.budget_key = m.budget_key AND t.task_group = m.member
                                        AND t.status <> 'pending'), 0)
    FROM queue_members m
    WHERE m.scope = ANY(p_scopes) AND m.budget_total IS NOT NULL
$$;


-- Expired leases back to pending (their attempt counts), or failed as lease_expired when out of attempts.
CREATE FUNCTION queue_reclaim_expired(p_types TEXT[], p_now TIMESTAMPTZ)
RETURNS VOID LANGUAGE sql AS $$
    UPDATE tasks t
    SET status = CASE WHEN t.attempts >= t.max_attempts THEN 'failed' ELSE 'pending' END,
        error = CASE WHEN t.attempts >= t.max_attempts
                     THEN format('lease_expired: lease expired after %s attempts (worker %s lost)',
                                 t.attempts, t.worker_id)
                     ELSE t.error END,
        error_kind = CASE WHEN t.attempts >= t.max_attempts THEN 'lease_expired' ELSE t.error_kind END,
        worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, slot_at = NULL, claim_request = NULL
    FROM (SELECT x.id FROM tasks x
          WHERE x.status = 'in_progress' AND x.lease_expires_at < p_now AND x.task_type = ANY(p_types)
          ORDER BY x.lease_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED) e
    WHERE t.id = e.id
$$;


-- The claim, replayable and budget-exact, around queue_claim (migration 0002), which picks and leases.
--
--  1. A request already answered (its answer was lost with the connection) gets the same leases back: a
--     retried claim never leases a second batch, so it spends no extra attempts, slots or budget.
--  2. Expired leases are reclaimed with their failure kind (queue_claim then finds none to reclaim).
--  3. Scheduled claims lock their groups' scopes (the lock order of queue_claim: scopes by name, then
--     domains) and refresh what each budget may still hand out.
--  4. queue_claim picks and leases; the leased rows are marked with this request and the budget charged.
--
-- It runs as one autocommit statement, so the scope and domain locks last one statement, never a client
-- round trip; and it commits synchronously (queue_claim's own synchronous_commit = off is confined to its
-- body by the SET below, and this function sets it on for the transaction): a claim acknowledged to a
-- worker survives a server crash, so no lease token and no politeness slot is ever handed out twice.
CREATE FUNCTION queue_claim_v2(p_request UUID, p_worker TEXT, p_n INTEGER, p_types TEXT[],
                               p_lease_s DOUBLE PRECISION, p_horizon_s DOUBLE PRECISION, p_scheduled BOOLEAN,
                               p_interleave JSONB)
RETURNS TABLE (id BIGINT, task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT,
               attempts INTEGER, max_attempts INTEGER, lease_token BIGINT, lease_expires_at TIMESTAMPTZ,
               slot_at TIMESTAMPTZ, next_at TIMESTAMPTZ)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_scopes TEXT[];
    v_ids    BIGINT[] := '{}';
    r        RECORD;
BEGIN
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
    -- 3. budgets
    IF p_scheduled THEN
        v_scopes := ARRAY(SELECT 'groups:' || x FROM unnest(p_types) x ORDER BY 1);
        PERFORM 1 FROM queue_scopes s WHERE s.scope = ANY(v_scopes) ORDER BY s.scope FOR UPDATE;
        UPDATE queue_members m SET budget = b.budget_left
        FROM queue_budget_left(v_scopes) b
        WHERE m.scope = b.scope AND m.member = b.member AND m.budget IS DISTINCT FROM b.budget_left;
    END IF;
    -- 4. pick and lease
    FOR r IN SELECT * FROM queue_claim(p_worker, p_n, p_types, p_lease_s, p_horizon_s, p_scheduled, p_interleave)
    LOOP
        id := r.id; task_type := r.task_type; payload := r.payload; priority := r.priority; domain := r.domain;
        task_group := r.task_group; attempts := r.attempts; max_attempts := r.max_attempts;
        lease_token := r.lease_token; lease_expires_at := r.lease_expires_at; slot_at := r.slot_at;
        next_at := r.next_at;
        RETURN NEXT;
        IF r.id IS NOT NULL THEN
            v_ids := v_ids || r.id;
        END IF;
    END LOOP;
    IF cardinality(v_ids) > 0 THEN
        UPDATE tasks t
        SET claim_request = p_request,
            budget_key = CASE WHEN p_scheduled THEN coalesce(m.budget_key, t.budget_key) ELSE t.budget_key END
        FROM tasks x LEFT JOIN queue_members m
             ON m.scope = 'groups:' || x.task_type AND m.member = x.task_group AND m.budget_total IS NOT NULL
        WHERE t.id = x.id AND x.id = ANY(v_ids);
    END IF;
    PERFORM set_config('synchronous_commit', 'on', true);
END $$;

ALTER FUNCTION queue_claim(TEXT, INTEGER, TEXT[], DOUBLE PRECISION, DOUBLE PRECISION, BOOLEAN, JSONB)
    SET synchronous_commit = on;
