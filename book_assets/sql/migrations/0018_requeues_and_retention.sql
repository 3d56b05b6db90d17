-- Daily operation: requeues of failed pages that can succeed, counted per task so each page is requeued a
-- bounded number of times with a growing delay (queue.sql: failing_now, requeue_due), and the retention of
-- finished tasks (queue.sql: prune_finished), whose lookups by URL and by finishing time need indexes.

ALTER TABLE tasks ADD COLUMN requeues INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks_archive ADD COLUMN requeues INTEGER NOT NULL DEFAULT 0;

-- Every task of a URL, newest last: whether a failed page has been fetched again since (failing_now).
CREATE INDEX idx_tasks_url_id ON tasks ((payload->>'url'), id);
-- Failed tasks by the claim of their last attempt, when they failed (failing_now, prune_finished).
CREATE INDEX idx_tasks_failed_started ON tasks (started_at) WHERE status = 'failed';

-- The pages failing now and which of them may be requeued now, for the failed-tasks sensor's figure and the
-- requeue of a recrawl run (queue.sql: failing_now, requeue_due).
CREATE FUNCTION queue_failing_v1(p_kinds TEXT[], p_max_requeues INTEGER, p_backoff_s DOUBLE PRECISION,
                                 p_growth DOUBLE PRECISION)
RETURNS TABLE (id BIGINT, started_at TIMESTAMPTZ, requeueable BOOLEAN, due BOOLEAN)
LANGUAGE sql STABLE AS $$
    SELECT n.id, n.started_at, n.requeueable,
           n.requeueable AND coalesce(n.started_at, '-infinity') <= now() - make_interval(
               secs => p_backoff_s * power(p_growth, n.requeues))
    FROM (
        -- Each failed URL's newest task: a page fetched again since (a later crawl, a requeue) is not failing.
        SELECT DISTINCT ON (t.payload->>'url') t.id, t.status, t.started_at, t.requeues,
               t.error_kind = ANY(p_kinds) AND t.requeues < p_max_requeues AS requeueable
        FROM tasks t
        WHERE t.payload->>'url' IN (SELECT f.payload->>'url' FROM tasks f WHERE f.status = 'failed')
        ORDER BY t.payload->>'url', t.id DESC
    ) n
    WHERE n.status = 'failed'
$$;

COMMENT ON FUNCTION queue_failing_v1(TEXT[], INTEGER, DOUBLE PRECISION, DOUBLE PRECISION) IS
'Pages failing now: each URL whose newest task is failed (a page fetched again since is not failing). '
'requeueable: its error kind is one of p_kinds and it was requeued fewer than p_max_requeues times; due: '
'requeueable, and its last attempt was claimed at least p_backoff_s * p_growth ^ requeues ago, so each '
'requeue of a page waits longer than the one before.';

-- Up to p_batch finished tasks that ended before p_cutoff, locked for the caller's DELETE: completed ones by
-- completed_at, failed ones by the claim of their last attempt (queue.sql: prune_finished, prune_archive).
CREATE FUNCTION queue_finished_before_v1(p_cutoff TIMESTAMPTZ, p_batch INTEGER)
RETURNS SETOF BIGINT
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY SELECT t.id FROM tasks t WHERE t.status = 'completed' AND t.completed_at < p_cutoff
                 LIMIT p_batch FOR UPDATE SKIP LOCKED;
    RETURN QUERY SELECT t.id FROM tasks t
                 WHERE t.status = 'failed' AND coalesce(t.started_at, t.created_at) < p_cutoff
                 LIMIT p_batch FOR UPDATE SKIP LOCKED;
END $$;

COMMENT ON FUNCTION queue_finished_before_v1(TIMESTAMPTZ, INTEGER) IS
'Up to p_batch completed and p_batch failed tasks that ended before p_cutoff (failed ones by the claim of '
'their last attempt), locked with SKIP LOCKED: one short batch of a retention prune, which waits for no '
'worker and holds no lock for long.';
