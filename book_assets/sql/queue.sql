-- Named queries of the task queue (book_assets/queue). The claim itself is the plpgsql function
-- queue_claim_v3, which composes small functions, one job each (docs/queue.md maps them; schema.sql shows
-- every definition with its design note): it needs loops (politeness allowances, round-robin picks) in one
-- round trip.

-- enqueue_many --
-- Insert a batch given as a JSON array in one statement. In an epoch (queue_epochs: the latest of the queue's
-- scope), a URL already enqueued in it (queue_seen) gets no task, whatever became of its first; every URL is
-- deduplicated against live tasks (pending / in progress) by the partial unique index idx_tasks_payload_url. Each
-- input row comes back, in input order, with its live task's id (NULL: none, the URL's task in this epoch ended)
-- and whether it was created.
-- New domains and fairness groups are registered, and listeners woken when anything was created.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS x(
        ord INTEGER, task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT,
        delay_s DOUBLE PRECISION, run_at TIMESTAMPTZ, max_attempts INTEGER)
), epoch AS (
    SELECT max(id) AS id FROM queue_epochs WHERE scope = %(scope)s
), seen AS (
    INSERT INTO queue_seen (epoch, url)
    SELECT e.id, x.payload->>'url' FROM input x CROSS JOIN epoch e WHERE e.id IS NOT NULL
    ON CONFLICT (epoch, url) DO NOTHING
    RETURNING url
), new_domains AS (
    INSERT INTO domains (domain, min_interval_s)
    SELECT DISTINCT domain, %(interval_s)s::DOUBLE PRECISION FROM input
    ON CONFLICT (domain) DO NOTHING
), new_groups AS (
    INSERT INTO queue_members (scope, member)
    SELECT DISTINCT 'groups:' || task_type, task_group FROM input
    ON CONFLICT (scope, member) DO NOTHING
), ins AS (
    INSERT INTO tasks (task_type, payload, priority, domain, task_group, run_at, max_attempts)
    SELECT task_type, payload, priority, domain, task_group,
           coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))), max_attempts
    FROM input
    WHERE (SELECT id FROM epoch) IS NULL OR payload->>'url' IN (SELECT url FROM seen)
    ORDER BY ord
    ON CONFLICT ((payload->>'url')) WHERE status IN ('pending', 'in_progress') DO NOTHING
    RETURNING id, payload->>'url' AS url
), wake AS (
    SELECT pg_notify('book_pipeline_tasks', '') AS sent FROM (SELECT 1 FROM ins LIMIT 1) AS any_new
)
SELECT x.ord, coalesce(i.id, e.id) AS id, i.id IS NOT NULL AS created
FROM input x
LEFT JOIN ins i ON i.url = x.payload->>'url'
-- the URL's live task (at most one, idx_tasks_payload_url), probed per input row: LIMIT keeps the probe a
-- subquery, where a join would let the planner hash every live task for a batch of one link
LEFT JOIN LATERAL (SELECT e.id FROM tasks e
                   WHERE i.id IS NULL AND e.payload->>'url' = x.payload->>'url'
                     AND e.status IN ('pending', 'in_progress')
                   LIMIT 1) e ON true
LEFT JOIN wake ON true
ORDER BY x.ord;

-- begin_epoch --
-- Start an epoch of a scope: from now on each URL is enqueued once (enqueue_many) by the queues of that scope,
-- until the scope's next one starts.
INSERT INTO queue_epochs (scope) VALUES (%(scope)s) RETURNING id;

-- claim --
-- Claim up to n tasks, or replay the answer of the same request (see queue_claim_v3 in schema.sql).
SELECT * FROM queue_claim_v3(%(request)s::UUID, %(worker)s, %(n)s, %(types)s::TEXT[],
                             %(lease_s)s::DOUBLE PRECISION, %(horizon_s)s::DOUBLE PRECISION, %(scheduled)s,
                             %(interleave)s::JSONB);

-- heartbeat_many --
-- Extend the leases the caller still holds (each fenced by its token); never shortens one. One statement for all
-- of a worker's tasks: a worker at many politely limited hosts holds many, most of them waiting for a slot. Like
-- a claim, a heartbeat lost in a crash only risks an early reclaim that fencing makes safe, so it skips the WAL
-- flush wait.
WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE tasks t
SET lease_expires_at = greatest(t.lease_expires_at, clock_timestamp() + make_interval(secs => %(extend_s)s))
FROM unnest(%(ids)s::BIGINT[], %(tokens)s::BIGINT[]) AS h(id, token)
WHERE t.id = h.id AND t.lease_token = h.token AND t.status = 'in_progress' AND (SELECT 1 FROM async) = 1
RETURNING t.id;

-- complete_many --
-- Mark tasks done, each only if its lease token still matches (a worker that lost its lease is refused).
-- A task this lease already completed counts as done again, unchanged: a replay after a lost
-- acknowledgement reports what happened.
UPDATE tasks t
SET status = 'completed', completed_at = CASE WHEN t.status = 'in_progress' THEN now() ELSE t.completed_at END,
    lease_expires_at = NULL, claim_request = NULL
FROM unnest(%(ids)s::BIGINT[], %(tokens)s::BIGINT[]) AS c(id, token)
WHERE t.id = c.id AND t.lease_token = c.token AND t.status IN ('in_progress', 'completed')
RETURNING t.id;

-- fail --
-- Record a failure under the caller's lease: back to pending after the backoff while attempts remain and the
-- error is retryable, otherwise failed (dead letter) with the error and its kind. A Retry-After also pushes
-- the domain. The task keeps the token of the lease that failed it, so a replay after a lost acknowledgement
-- reads the recorded outcome instead of being mistaken for a lost lease.
WITH target AS (
    SELECT t.id, t.status FROM tasks t WHERE t.id = %(id)s AND t.lease_token = %(token)s FOR UPDATE
), failed AS (
    UPDATE tasks t
    SET status = CASE WHEN %(retryable)s AND t.attempts < t.max_attempts THEN 'pending' ELSE 'failed' END,
        run_at = CASE WHEN %(retryable)s AND t.attempts < t.max_attempts
                      THEN now() + make_interval(secs => greatest(%(delay_s)s::DOUBLE PRECISION,
                                                                  coalesce(%(retry_after_s)s::DOUBLE PRECISION, 0)))
                      ELSE t.run_at END,
        error = %(error)s, error_kind = %(kind)s, worker_id = NULL, lease_expires_at = NULL, slot_at = NULL,
        claim_request = NULL
    FROM target x
    WHERE t.id = x.id AND x.status = 'in_progress'
    RETURNING t.status, t.domain
), replayed AS (
    SELECT x.status FROM target x WHERE x.status IN ('pending', 'failed')
), pushed AS (
    UPDATE domains d
    SET next_slot_at = greatest(d.next_slot_at,
                                clock_timestamp() + make_interval(secs => %(retry_after_s)s::DOUBLE PRECISION))
    FROM failed f
    WHERE %(retry_after_s)s::DOUBLE PRECISION IS NOT NULL AND d.domain = f.domain
)
SELECT status FROM failed UNION ALL SELECT status FROM replayed;

-- record_failed --
-- Insert tasks that failed before anyone could claim them (a link refused where it was found), failed for good
-- with their kind and error and no attempt made: counted with the other failures, never handed out. A row
-- whose URL already failed as found by the same task (the payload names it) is not inserted again, so a
-- replay after a lost acknowledgement records each refusal once. Its domain is registered as enqueue_many
-- registers one: a claim knows every task's domain (queue_claim_pickable_v1), a failed task requeued included.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS x(
        task_type TEXT, payload JSONB, priority INTEGER, domain TEXT, task_group TEXT, max_attempts INTEGER,
        error TEXT, kind TEXT)
), new_domains AS (
    INSERT INTO domains (domain, min_interval_s)
    SELECT DISTINCT domain, %(interval_s)s::DOUBLE PRECISION FROM input
    ON CONFLICT (domain) DO NOTHING
)
INSERT INTO tasks (task_type, payload, priority, domain, task_group, max_attempts, status, error, error_kind,
                   started_at, completed_at)
SELECT x.task_type, x.payload, x.priority, x.domain, x.task_group, x.max_attempts, 'failed', x.error, x.kind,
       now(), now()
FROM input x
WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.payload->>'url' = x.payload->>'url' AND t.status = 'failed'
                                          AND t.payload->'refused_by' = x.payload->'refused_by')
RETURNING id;

-- release --
-- Give leased tasks back (graceful shutdown): pending again, the attempt not counted.
WITH released AS (
    UPDATE tasks t
    SET status = 'pending', attempts = greatest(t.attempts - 1, 0), worker_id = NULL, lease_token = NULL,
        lease_expires_at = NULL, slot_at = NULL, started_at = NULL, claim_request = NULL
    FROM unnest(%(ids)s::BIGINT[], %(tokens)s::BIGINT[]) AS c(id, token)
    WHERE t.id = c.id AND t.lease_token = c.token AND t.status = 'in_progress'
    RETURNING t.id
), wake AS (
    SELECT pg_notify('book_pipeline_tasks', '') AS sent FROM (SELECT 1 FROM released LIMIT 1) AS any_released
)
SELECT count(*) AS released FROM released LEFT JOIN wake ON true;

-- requeue --
-- Move failed tasks matching the filters back to pending with their attempts reset. A failed task whose URL
-- already has a live task (the partial unique index) is skipped, as are all but the newest failed row per URL.
-- A task recorded failed before any claim (record_failed: a link refused where it was found, its URL cut) is
-- never moved: it holds no request to make again.
WITH matching AS (
    SELECT t.id, t.payload->>'url' AS url FROM tasks t
    WHERE t.status = 'failed' AND NOT t.payload ? 'refused_by'
      AND (%(task_type)s::TEXT IS NULL OR t.task_type = %(task_type)s::TEXT)
      AND (%(domain)s::TEXT IS NULL OR t.domain = %(domain)s::TEXT)
      AND (%(error_like)s::TEXT IS NULL OR t.error LIKE %(error_like)s::TEXT)
), chosen AS (
    SELECT DISTINCT ON (m.url) m.id FROM matching m
    WHERE NOT EXISTS (SELECT 1 FROM tasks o WHERE o.payload->>'url' = m.url
                                              AND o.status IN ('pending', 'in_progress'))
    ORDER BY m.url, m.id DESC
), moved AS (
    UPDATE tasks t
    SET status = 'pending', attempts = 0, run_at = now(), error = NULL, completed_at = NULL, started_at = NULL
    FROM chosen c WHERE t.id = c.id
    RETURNING t.id
), wake AS (
    SELECT pg_notify('book_pipeline_tasks', '') AS sent FROM (SELECT 1 FROM moved LIMIT 1) AS any_moved
)
SELECT (SELECT count(*) FROM moved) AS requeued,
       (SELECT count(*) FROM matching) - (SELECT count(*) FROM moved) AS skipped
FROM (SELECT 1) AS one LEFT JOIN wake ON true;

-- set_domain_policy --
-- Create or change a domain's politeness; a NULL interval keeps the current one. With set_throttle the
-- domain's AutoThrottle is switched on (a max_interval_s) or off (NULL), and its interval starts again from
-- the floor (the interval given). Without it, an autothrottled domain takes the interval as its new floor
-- and its current interval is raised to it, never lowered (a Crawl-delay learnt mid-crawl).
INSERT INTO domains AS d (domain, min_interval_s, max_in_flight, floor_interval_s, max_interval_s, target_concurrency)
VALUES (%(domain)s, coalesce(%(interval_s)s::DOUBLE PRECISION, %(default_interval_s)s::DOUBLE PRECISION),
        %(max_in_flight)s::INTEGER,
        CASE WHEN %(max_interval_s)s::DOUBLE PRECISION IS NOT NULL
             THEN coalesce(%(interval_s)s::DOUBLE PRECISION, %(default_interval_s)s::DOUBLE PRECISION) END,
        %(max_interval_s)s::DOUBLE PRECISION, %(target_concurrency)s::DOUBLE PRECISION)
ON CONFLICT (domain) DO UPDATE
SET min_interval_s = CASE
        WHEN %(set_throttle)s THEN coalesce(%(interval_s)s::DOUBLE PRECISION, d.floor_interval_s, d.min_interval_s)
        WHEN d.max_interval_s IS NOT NULL
        THEN greatest(d.min_interval_s, coalesce(%(interval_s)s::DOUBLE PRECISION, d.floor_interval_s))
        ELSE coalesce(%(interval_s)s::DOUBLE PRECISION, d.min_interval_s) END,
    floor_interval_s = CASE
        WHEN %(set_throttle)s AND %(max_interval_s)s::DOUBLE PRECISION IS NULL THEN NULL
        WHEN %(set_throttle)s THEN coalesce(%(interval_s)s::DOUBLE PRECISION, d.floor_interval_s, d.min_interval_s)
        WHEN d.max_interval_s IS NOT NULL THEN coalesce(%(interval_s)s::DOUBLE PRECISION, d.floor_interval_s)
        ELSE NULL END,
    max_interval_s = CASE WHEN %(set_throttle)s THEN %(max_interval_s)s::DOUBLE PRECISION ELSE d.max_interval_s END,
    target_concurrency = CASE WHEN %(set_throttle)s THEN %(target_concurrency)s::DOUBLE PRECISION
                              ELSE d.target_concurrency END,
    latency_s = CASE WHEN %(set_throttle)s THEN NULL ELSE d.latency_s END,
    max_in_flight = CASE WHEN %(set_max_in_flight)s THEN %(max_in_flight)s::INTEGER ELSE d.max_in_flight END;

-- observe --
-- One observed request to an autothrottled domain moves its interval (queue_throttle_interval_v1; no row:
-- the domain is not autothrottled). Like a heartbeat it skips the WAL flush wait: an observation lost in a
-- crash costs nothing.
WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE domains d
SET min_interval_s = queue_throttle_interval_v1(d.min_interval_s, %(latency_s)s::DOUBLE PRECISION, %(throttled)s,
                                                %(ok)s, coalesce(d.floor_interval_s, 0), d.max_interval_s,
                                                d.target_concurrency, %(min_step_s)s::DOUBLE PRECISION),
    latency_s = %(latency_s)s::DOUBLE PRECISION
WHERE d.domain = %(domain)s AND d.max_interval_s IS NOT NULL AND (SELECT 1 FROM async) = 1
RETURNING d.min_interval_s;

-- back_off --
-- A response that turned the request away without an error status (the caller's judgement: a soft block)
-- widens the domain's interval for every worker as a throttled observation does (queue_throttle_interval_v1:
-- at least double, at least min_step_s), up to its AutoThrottle cap, or the given cap when it has none; the
-- next crawl's politeness (set_domain_policy) starts it again from the configured interval. No row: unknown.
UPDATE domains d
SET min_interval_s = queue_throttle_interval_v1(d.min_interval_s, 0, true, false, coalesce(d.floor_interval_s, 0),
                                                coalesce(d.max_interval_s, %(max_interval_s)s::DOUBLE PRECISION),
                                                coalesce(d.target_concurrency, 1), %(min_step_s)s::DOUBLE PRECISION)
WHERE d.domain = %(domain)s
RETURNING d.min_interval_s;

-- push_domain --
-- No request to the domain before now + seconds (a 429 / Retry-After); never pulls the next slot earlier.
INSERT INTO domains AS d (domain, min_interval_s, next_slot_at)
VALUES (%(domain)s, %(default_interval_s)s::DOUBLE PRECISION,
        clock_timestamp() + make_interval(secs => %(seconds)s::DOUBLE PRECISION))
ON CONFLICT (domain) DO UPDATE SET next_slot_at = greatest(d.next_slot_at, excluded.next_slot_at)
RETURNING next_slot_at;

-- take_domain_slot --
-- A politeness slot for a request outside any task (a robots.txt fetch): the domain's next slot, as a claim
-- hands it out (queue_first_slot_v1). No row: the domain is unthrottled or unknown.
UPDATE domains d
SET next_slot_at = queue_first_slot_v1(d.next_slot_at, d.min_interval_s, clock_timestamp())
                   + make_interval(secs => d.min_interval_s)
WHERE d.domain = %(domain)s AND d.min_interval_s > 0
RETURNING d.next_slot_at - make_interval(secs => d.min_interval_s) AS slot_at;

-- domain_policy --
-- One domain's politeness row.
SELECT domain, min_interval_s, max_in_flight, next_slot_at, floor_interval_s, max_interval_s, target_concurrency,
       latency_s
FROM domains WHERE domain = %(domain)s;

-- lock_scope --
-- Create a round-robin scope if needed and lock its row (DO UPDATE locks it), so that setters serialize with
-- claimers, which lock the same row before reading and writing the scope's state.
INSERT INTO queue_scopes AS s (scope) VALUES (%(scope)s)
ON CONFLICT (scope) DO UPDATE SET scope = s.scope
RETURNING scope;

-- set_scope_weights --
-- Replace a scope's weights: listed members get theirs, the others the default; the round-robin restarts.
WITH scope AS (
    UPDATE queue_scopes SET default_weight = %(default_weight)s::DOUBLE PRECISION WHERE scope = %(scope)s
), listed AS (
    SELECT * FROM unnest(%(members)s::TEXT[], %(weights)s::DOUBLE PRECISION[]) AS u(member, weight)
), unlisted AS (
    UPDATE queue_members m SET weight = NULL, current = 0, idle = false
    WHERE m.scope = %(scope)s AND NOT (m.member = ANY(%(members)s::TEXT[]))
)
INSERT INTO queue_members AS m (scope, member, weight)
SELECT %(scope)s, l.member, l.weight FROM listed l
ON CONFLICT (scope, member) DO UPDATE SET weight = excluded.weight, current = 0, idle = false;

-- set_scope_budgets --
-- Grant members a budget: the number of their tasks that may end (docs/queue.md, "Fairness").
-- The grant is named by its key; granting the same key again (a replayed statement) changes nothing.
INSERT INTO queue_members AS m (scope, member, budget, budget_total, budget_key)
SELECT %(scope)s, u.member, u.budget, u.budget, %(key)s
FROM unnest(%(members)s::TEXT[], %(budgets)s::BIGINT[]) AS u(member, budget)
ON CONFLICT (scope, member) DO UPDATE
SET budget = excluded.budget, budget_total = excluded.budget_total, budget_key = excluded.budget_key
WHERE m.budget_key IS DISTINCT FROM excluded.budget_key;

-- clear_scope_budgets --
-- Remove every budget of a scope.
UPDATE queue_members SET budget = NULL, budget_total = NULL, budget_key = NULL
WHERE scope = %(scope)s AND budget_total IS NOT NULL;

-- budget_report --
-- Each budgeted member's grant and what became of the tasks charged to it.
SELECT m.member, m.budget_total AS budget,
       count(t.id) FILTER (WHERE t.status = 'completed') AS completed,
       count(t.id) FILTER (WHERE t.status = 'failed') AS failed,
       count(t.id) FILTER (WHERE t.status = 'in_progress') AS in_progress
FROM queue_members m
LEFT JOIN tasks t ON t.budget_key = m.budget_key AND t.task_group = m.member AND t.status <> 'pending'
WHERE m.scope = %(scope)s AND m.budget_total IS NOT NULL
GROUP BY m.member, m.budget_total ORDER BY m.member;

-- wake_idle_workers --
-- Wake every worker asleep on the queue's channel (they claim again, or find the queue drained).
SELECT pg_notify('book_pipeline_tasks', '') AS sent;

-- outstanding --
-- How many tasks of these types a worker may still be handed (queue_outstanding_v1).
SELECT count(*) AS n FROM queue_outstanding_v1(%(types)s::TEXT[]);

-- any_outstanding --
-- Whether a worker may still be handed a task of these types: the first outstanding task ends the question.
SELECT EXISTS (SELECT 1 FROM queue_outstanding_v1(%(types)s::TEXT[])) AS any;

-- scope_state --
-- The round-robin state of a scope (for inspection and tests).
SELECT m.member, coalesce(m.weight, s.default_weight) AS weight, m.current, m.budget, m.idle
FROM queue_members m JOIN queue_scopes s USING (scope)
WHERE m.scope = %(scope)s ORDER BY m.member;

-- failing_of_kinds --
-- URLs failing now (queue_failing_v1: the URL's newest task is failed) with a failure of one of the kinds, in
-- URL order, a batch after a given URL (keyset pagination).
SELECT t.payload->>'url' AS url
FROM queue_failing_v1(%(kinds)s::TEXT[], 2147483647, 0, 1) f JOIN tasks t ON t.id = f.id
WHERE f.requeueable AND t.payload->>'url' > %(after)s
ORDER BY t.payload->>'url' LIMIT %(limit)s;

-- resolve_failed --
-- The failed tasks of these URLs, of one of the kinds, done without a fetch (the caller rebuilt their result):
-- completed now, their last error and its kind kept; returns the URLs resolved.
UPDATE tasks t SET status = 'completed', completed_at = now()
WHERE t.status = 'failed' AND t.error_kind = ANY(%(kinds)s::TEXT[]) AND t.payload->>'url' = ANY(%(urls)s::TEXT[])
RETURNING t.payload->>'url' AS url;

-- stats_counts --
-- Number of tasks by type and status.
SELECT task_type, status, count(*) AS n FROM tasks GROUP BY task_type, status ORDER BY task_type, status;

-- stats_summary --
-- Age of the oldest pending task and tasks completed in the last minute.
SELECT extract(epoch FROM now() - (SELECT min(created_at) FROM tasks WHERE status = 'pending'))
           AS oldest_pending_s,
       (SELECT count(*) FROM tasks WHERE status = 'completed' AND completed_at > now() - interval '60 seconds')
           AS completed_last_minute,
       (SELECT count(*) FROM tasks WHERE status = 'in_progress' AND lease_expires_at < now())
           AS expired_leases;

-- stats_failures --
-- The most frequent errors of failed (dead-lettered) tasks, for humans (one example message per error).
SELECT left(error, 200) AS error, count(*) AS n FROM tasks
WHERE status = 'failed' GROUP BY left(error, 200) ORDER BY n DESC, error LIMIT %(limit)s;

-- stats_failed_by_kind --
-- Every failed (dead-lettered) task, counted by type and error kind.
SELECT task_type, coalesce(error_kind, 'unknown') AS kind, count(*) AS n FROM tasks
WHERE status = 'failed' GROUP BY task_type, coalesce(error_kind, 'unknown') ORDER BY task_type, n DESC, kind;

-- failed_by_kind_since --
-- Tasks of the queue's types claimed since a moment and now failed for good, by error kind: a run's failures, as
-- activity_since counts them.
SELECT coalesce(error_kind, 'unknown') AS kind, count(*) AS n FROM tasks
WHERE status = 'failed' AND started_at >= %(since)s AND task_type = ANY (%(types)s::text[])
GROUP BY coalesce(error_kind, 'unknown') ORDER BY n DESC, kind;

-- stats_last_failure_by_domain --
-- Tasks by domain and the kind of their last failed attempt, whatever became of them (a task retried to
-- success keeps the kind of its last failure): how many pages each domain turned away, and how.
SELECT domain, error_kind AS kind, count(*) AS n FROM tasks
WHERE error_kind IS NOT NULL GROUP BY domain, error_kind ORDER BY domain, n DESC, kind;

-- metrics_tasks --
-- The queue's gauges for the metrics exporter, one row per type, status and domain in one scan: tasks, the age
-- of the oldest pending task (since it was created), and how long the longest-waiting due task has been due
-- (pending with run_at passed: claimable but for politeness, budgets and weights).
SELECT task_type, status, domain, count(*) AS n,
       extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'pending')) AS oldest_pending_s,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now())) AS overdue_s,
       count(*) FILTER (WHERE status = 'in_progress' AND lease_expires_at < now()) AS expired_leases
FROM tasks GROUP BY task_type, status, domain;

-- metrics_domains --
-- Each domain's politeness for the metrics exporter: its interval now, the floor an AutoThrottle or a
-- Crawl-delay cannot go under (the interval itself when not throttled), and seconds until its next slot (0: free).
SELECT domain, min_interval_s AS interval_s, coalesce(floor_interval_s, min_interval_s) AS floor_interval_s,
       CASE WHEN next_slot_at > now() THEN extract(epoch FROM next_slot_at - now()) ELSE 0 END AS next_slot_in_s
FROM domains ORDER BY domain;

-- metrics_budgets --
-- What each budgeted group of every task type may still hand out (queue_budget_left_v1), for the exporter.
SELECT substr(b.scope, length('groups:') + 1) AS task_type, b.member AS grp, b.budget_left
FROM queue_budget_left_v1(ARRAY(SELECT scope FROM queue_scopes WHERE left(scope, length('groups:')) = 'groups:')) b
ORDER BY 1, 2;

-- prune_finished --
-- Delete one batch of finished tasks that ended more than older_than_s ago (queue_finished_before_v1).
DELETE FROM tasks WHERE id IN (
    SELECT queue_finished_before_v1(now() - make_interval(secs => %(older_than_s)s), %(batch)s));

-- prune_seen --
-- Delete one batch of the URLs seen in epochs that ended more than older_than_s ago (a later epoch of their scope
-- started before the cutoff), then those epochs once they hold none.
WITH ended AS (
    SELECT e.scope, max(e.id) AS before FROM queue_epochs e
    WHERE e.started_at < now() - make_interval(secs => %(older_than_s)s)
    GROUP BY e.scope
), batch AS (
    DELETE FROM queue_seen s WHERE (s.epoch, s.url) IN (
        SELECT x.epoch, x.url FROM queue_seen x
        JOIN queue_epochs e ON e.id = x.epoch
        JOIN ended ON ended.scope = e.scope AND x.epoch < ended.before
        LIMIT %(batch)s)
    RETURNING s.epoch
), epochs AS (
    DELETE FROM queue_epochs e USING ended
    WHERE e.scope = ended.scope AND e.id < ended.before AND NOT EXISTS (SELECT 1 FROM batch)
      AND NOT EXISTS (SELECT 1 FROM queue_seen s WHERE s.epoch = e.id)
)
SELECT count(*) AS n FROM batch;

-- listen --
-- Subscribe this connection to enqueue wake-ups.
LISTEN book_pipeline_tasks;

-- next_due --
-- Seconds until work of these types becomes claimable with no notification to say so: the next delayed or
-- retried task's run_at, or the next lease expiry (a claim then reclaims its task). NULL: neither exists.
SELECT extract(epoch FROM least(
           (SELECT min(t.run_at) FROM tasks t
            WHERE t.status = 'pending' AND t.task_type = ANY(%(types)s::TEXT[]) AND t.run_at > now()),
           (SELECT min(t.lease_expires_at) FROM tasks t
            WHERE t.status = 'in_progress' AND t.task_type = ANY(%(types)s::TEXT[])))
       - clock_timestamp()) AS due_in_s;

-- reslot --
-- Give a leased task a new politeness slot (its worker woke too late for the old one): the domain's next slot,
-- as a claim would hand it out (queue_first_slot_v1); the lease is extended to cover it. When the task holds
-- the domain's last slot handed out (the next is its slot plus the interval), the domain's slots start again
-- from the task's: nothing started on the missed slot, so a late wake costs the claim's lead, not an interval.
-- No row: lease lost or domain unthrottled.
WITH moved AS (
    UPDATE domains d
    SET next_slot_at = queue_first_slot_v1(
                           CASE WHEN d.next_slot_at = t.slot_at + make_interval(secs => d.min_interval_s)
                                THEN t.slot_at ELSE d.next_slot_at END,
                           d.min_interval_s, clock_timestamp())
                       + make_interval(secs => d.min_interval_s)
    FROM tasks t
    WHERE t.id = %(id)s AND t.lease_token = %(token)s AND t.status = 'in_progress'
      AND d.domain = t.domain AND d.min_interval_s > 0
    RETURNING d.next_slot_at - make_interval(secs => d.min_interval_s) AS slot
)
UPDATE tasks t
SET slot_at = m.slot, lease_expires_at = greatest(t.lease_expires_at, m.slot + make_interval(secs => %(lease_s)s))
FROM moved m
WHERE t.id = %(id)s
RETURNING t.slot_at, t.lease_expires_at;

-- pending_by_group --
-- Pending tasks of one type per fairness group.
SELECT task_group AS grp, count(*) AS n FROM tasks
WHERE status = 'pending' AND task_type = %(task_type)s GROUP BY task_group;

-- failing_now --
-- Pages failing now (queue_failing_v1) of the given task types (NULL: of every type): how many, how many may be
-- requeued, how many are due, and the due ones' newest id and last claim, which change with every new due
-- failure.
SELECT count(*) AS failing, count(*) FILTER (WHERE f.requeueable) AS requeueable,
       count(*) FILTER (WHERE f.due) AS due, max(f.id) FILTER (WHERE f.due) AS due_max_id,
       max(f.started_at) FILTER (WHERE f.due) AS due_last_claimed_at
FROM queue_failing_v1(%(kinds)s::TEXT[], %(max_requeues)s, %(backoff_s)s, %(growth)s) f
JOIN tasks t ON t.id = f.id
WHERE %(types)s::TEXT[] IS NULL OR t.task_type = ANY (%(types)s::TEXT[]);

-- requeue_due --
-- Move the due failures (queue_failing_v1) of the given task types (NULL: of every type) back to pending,
-- attempts reset and one more requeue counted.
WITH moved AS (
    UPDATE tasks t
    SET status = 'pending', attempts = 0, run_at = now(), error = NULL, completed_at = NULL, started_at = NULL,
        requeues = t.requeues + 1
    FROM queue_failing_v1(%(kinds)s::TEXT[], %(max_requeues)s, %(backoff_s)s, %(growth)s) f
    WHERE f.due AND t.id = f.id AND t.status = 'failed'
      AND (%(types)s::TEXT[] IS NULL OR t.task_type = ANY (%(types)s::TEXT[]))
    RETURNING t.id
), wake AS (
    SELECT pg_notify('book_pipeline_tasks', '') AS sent FROM (SELECT 1 FROM moved LIMIT 1) AS any_moved
)
SELECT (SELECT count(*) FROM moved) AS requeued FROM (SELECT 1) AS one LEFT JOIN wake ON true;

-- database_now --
-- The database's clock: the moment a run starts, on the clock every host's tasks are stamped with.
SELECT clock_timestamp() AS now;

-- activity_since --
-- Since a moment, by type (of the queue's) and group: tasks created, completed, and failed for good after a claim
-- since then, and the retries taken by the tasks claimed or completed since then.
SELECT task_type, task_group AS grp,
       count(*) FILTER (WHERE created_at >= %(since)s) AS created,
       count(*) FILTER (WHERE status = 'completed' AND completed_at >= %(since)s) AS completed,
       count(*) FILTER (WHERE status = 'failed' AND started_at >= %(since)s) AS failed,
       coalesce(sum(attempts - 1) FILTER (WHERE attempts > 1 AND (started_at >= %(since)s
                                                                 OR completed_at >= %(since)s)), 0) AS retries
FROM tasks
WHERE (created_at >= %(since)s OR started_at >= %(since)s OR completed_at >= %(since)s)
  AND task_type = ANY (%(types)s::text[])
GROUP BY task_type, task_group;

-- failures_since --
-- Tasks of one type claimed since a moment (and by another, when given) and now failed for good as one of the
-- kinds: group and error each.
SELECT task_group AS grp, error_kind, coalesce(error, '') AS error FROM tasks
WHERE status = 'failed' AND started_at >= %(since)s AND task_type = %(task_type)s
  AND (%(until)s::timestamptz IS NULL OR started_at <= %(until)s)
  AND error_kind = ANY (%(kinds)s::text[]);

-- completed_by_workers --
-- Tasks completed since a moment by the named workers, by type: a completed task keeps the id of the worker
-- whose lease completed it (a claim sets it; release and fail clear it).
SELECT task_type, count(*) AS n FROM tasks
WHERE status = 'completed' AND completed_at >= %(since)s AND worker_id = ANY(%(workers)s::TEXT[])
GROUP BY task_type;

-- clock_now --
-- The server's clock, for a worker to measure its own clock's offset from it (book_assets/queue/clock.py).
SELECT extract(epoch FROM clock_timestamp())::DOUBLE PRECISION AS epoch;
