-- Whether every domain is blocked is asked after each pick whose domain ran out of slots: at a thousand politely
-- limited hosts, after nearly every pick. The question compared each known domain with the blocked list, a
-- thousand by a thousand names (0.9 ms, about 1 ms of PostgreSQL's CPU a page). The blocked domains are known
-- domains, so while they are fewer than the known ones some domain is not blocked; the names are compared only
-- once they are as many.

CREATE OR REPLACE FUNCTION queue_claim_all_blocked_v1(p_blocked text[]) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT cardinality(p_blocked) > 0
       AND cardinality(p_blocked) >= (SELECT count(*) FROM domains)
       AND NOT EXISTS (SELECT 1 FROM domains d WHERE NOT (d.domain = ANY(p_blocked)))
$$;

COMMENT ON FUNCTION queue_claim_all_blocked_v1(p_blocked text[]) IS 'Whether every known domain is blocked, so that nothing more can be handed out. The blocked domains are known
domains: while they are fewer than the known ones, some domain is not; the names are compared only once they are
as many.';
