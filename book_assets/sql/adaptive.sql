-- forget_decisions --
-- A new crawl decides afresh: drop the decisions of its domains.
DELETE FROM adaptive_decisions WHERE domain = ANY(%(domains)s);

-- record_pages --
-- Add one worker's page counts and checks for (domain, page type) and return the shared decision. A
-- disagreement switches to the browser; agreements switch a probing page type to http once there are
-- %(probe_pages)s of them and no disagreement. Creates the row on first use.
INSERT INTO adaptive_decisions AS d (domain, page_type, mode, agreements, disagreements, rendered, plain, decided_at)
VALUES (%(domain)s, %(page_type)s,
        CASE WHEN %(disagreements)s > 0 THEN 'browser'
             WHEN %(agreements)s >= %(probe_pages)s THEN 'http' ELSE 'probe' END,
        %(agreements)s, %(disagreements)s, %(rendered)s, %(plain)s,
        CASE WHEN %(disagreements)s > 0 OR %(agreements)s >= %(probe_pages)s THEN now() END)
ON CONFLICT (domain, page_type) DO UPDATE SET
    agreements = d.agreements + EXCLUDED.agreements,
    disagreements = d.disagreements + EXCLUDED.disagreements,
    rendered = d.rendered + EXCLUDED.rendered,
    plain = d.plain + EXCLUDED.plain,
    mode = CASE WHEN d.mode = 'browser' OR EXCLUDED.disagreements > 0 THEN 'browser'
                WHEN d.mode = 'probe' AND d.agreements + EXCLUDED.agreements >= %(probe_pages)s THEN 'http'
                ELSE d.mode END,
    decided_at = CASE WHEN (d.mode <> 'browser' AND EXCLUDED.disagreements > 0)
                        OR (d.mode = 'probe' AND d.disagreements + EXCLUDED.disagreements = 0
                            AND d.agreements + EXCLUDED.agreements >= %(probe_pages)s) THEN now()
                      ELSE d.decided_at END,
    updated_at = now()
RETURNING mode;

-- list_decisions --
-- Every decision, for the crawl summary and Dagster metadata.
SELECT domain, page_type, mode, agreements, disagreements, rendered, plain, decided_at
FROM adaptive_decisions
ORDER BY domain, page_type;
