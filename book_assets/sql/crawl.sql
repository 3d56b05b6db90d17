-- pending_by_group --
-- Pending tasks of one type per fairness group (categories of detail tasks), for budget splits.
SELECT task_group AS grp, count(*) AS n FROM tasks
WHERE status = 'pending' AND task_type = %(task_type)s GROUP BY task_group;

-- outstanding --
-- Work these task types can still be handed: in progress, or pending in a group that is neither out of
-- scheduling budget nor weighted 0 (weight-0 categories are skipped on purpose and stay pending).
SELECT count(*) AS n FROM tasks t
WHERE t.task_type = ANY(%(types)s)
  AND (t.status = 'in_progress'
       OR (t.status = 'pending' AND NOT EXISTS (
             SELECT 1 FROM queue_scopes s LEFT JOIN queue_members m
                    ON m.scope = s.scope AND m.member = t.task_group
             WHERE s.scope = 'groups:' || t.task_type
               AND (m.budget = 0 OR coalesce(m.weight, s.default_weight) = 0))));
