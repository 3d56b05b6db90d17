-- The schema of book-pipeline 0.1.0, in one migration: the task queue (tasks, domains and the round-robin
-- scopes and members of fair scheduling), the crawl's storage (books, their versions and presence,
-- listing pages, raw pages, robots.txt, crawls), the category-balanced snapshot and the adaptive-fetch
-- decisions; then the plpgsql/SQL functions the named queries (book_assets/sql/<topic>.sql) call.
--
-- Every function is called by a named query or by another function, and carries its design in a COMMENT;
-- docs/queue.md maps the claim. A function is named <name>_v<N>: a later migration that changes one creates
-- <name>_v<N+1>, points its callers there and drops <name>_v<N> in the same or a following migration, so
-- schema.sql never holds a version nothing calls (book_assets_tests/foundation/test_schema_functions.py).
-- No function takes more than 8 parameters or runs over 60 lines
-- (book_assets_tests/foundation/test_schema_function_size.py).

-- Tables, sequences, constraints and indexes.

CREATE TABLE public.adaptive_decisions (
    domain text NOT NULL,
    page_type text NOT NULL,
    mode text DEFAULT 'probe'::text NOT NULL,
    agreements integer DEFAULT 0 NOT NULL,
    disagreements integer DEFAULT 0 NOT NULL,
    rendered integer DEFAULT 0 NOT NULL,
    plain integer DEFAULT 0 NOT NULL,
    decided_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT adaptive_decisions_mode_check CHECK ((mode = ANY (ARRAY['probe'::text, 'http'::text, 'browser'::text])))
);

CREATE TABLE public.book_presence (
    book_id bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    event text NOT NULL,
    crawl_id bigint,
    CONSTRAINT book_presence_event_check CHECK ((event = ANY (ARRAY['removed'::text, 'returned'::text])))
);

CREATE TABLE public.book_versions (
    book_id bigint NOT NULL,
    version integer NOT NULL,
    url text NOT NULL,
    fields jsonb NOT NULL,
    changed text[] DEFAULT '{}'::text[] NOT NULL,
    content_hash text,
    fetched_at timestamp with time zone,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.books (
    id bigint NOT NULL,
    url text NOT NULL,
    title text,
    price text,
    rating text,
    category text,
    availability text,
    upc text,
    description text,
    raw_html text,
    scraped_at timestamp with time zone DEFAULT now() NOT NULL,
    price_amount numeric(10,2),
    price_excl_tax numeric(10,2),
    price_incl_tax numeric(10,2),
    tax numeric(10,2),
    rating_value smallint,
    stock integer,
    num_reviews integer,
    product_type text,
    content_hash text,
    http_status smallint,
    fetched_at timestamp with time zone,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    rendered_html text,
    requested_url text,
    raw_body bytea,
    removed_at timestamp with time zone,
    CONSTRAINT books_num_reviews_check CHECK ((num_reviews >= 0)),
    CONSTRAINT books_rating_value_check CHECK (((rating_value >= 1) AND (rating_value <= 5))),
    CONSTRAINT books_stock_check CHECK ((stock >= 0))
);

CREATE SEQUENCE public.books_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.books_id_seq OWNED BY public.books.id;

CREATE TABLE public.category_balanced_snapshot (
    url text NOT NULL,
    title text,
    category text NOT NULL,
    price numeric(10,2),
    rating smallint,
    stock integer,
    scraped_at timestamp with time zone NOT NULL,
    snapshot_at timestamp with time zone DEFAULT now() NOT NULL,
    snapshot_day date NOT NULL
);

CREATE TABLE public.crawls (
    id bigint NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    outcome text,
    complete_categories integer,
    incomplete_categories integer,
    removed integer,
    returned integer,
    note text,
    CONSTRAINT crawls_outcome_check CHECK ((outcome = ANY (ARRAY['decided'::text, 'undecided'::text, 'abandoned'::text])))
);

CREATE SEQUENCE public.crawls_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.crawls_id_seq OWNED BY public.crawls.id;

CREATE TABLE public.domains (
    domain text NOT NULL,
    min_interval_s double precision DEFAULT 1.0 NOT NULL,
    max_in_flight integer,
    next_slot_at timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    floor_interval_s double precision,
    max_interval_s double precision,
    target_concurrency double precision,
    latency_s double precision,
    CONSTRAINT domains_floor_interval_s_check CHECK ((floor_interval_s >= (0)::double precision)),
    CONSTRAINT domains_max_in_flight_check CHECK (((max_in_flight IS NULL) OR (max_in_flight >= 1))),
    CONSTRAINT domains_max_interval_s_check CHECK ((max_interval_s >= (0)::double precision)),
    CONSTRAINT domains_min_interval_s_check CHECK ((min_interval_s >= (0)::double precision)),
    CONSTRAINT domains_target_concurrency_check CHECK ((target_concurrency > (0)::double precision))
);

CREATE TABLE public.listing_pages (
    url text NOT NULL,
    category text,
    depth integer NOT NULL,
    next_url text,
    result_count integer,
    cards integer NOT NULL,
    book_urls text[] DEFAULT '{}'::text[] NOT NULL,
    sidebar text[] DEFAULT '{}'::text[] NOT NULL,
    listed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT listing_pages_depth_check CHECK ((depth >= 1))
);

CREATE TABLE public.pages (
    url text NOT NULL,
    final_url text NOT NULL,
    status smallint NOT NULL,
    headers jsonb NOT NULL,
    etag text,
    last_modified text,
    body bytea,
    content_hash text NOT NULL,
    fetched_at timestamp with time zone NOT NULL,
    validated_at timestamp with time zone NOT NULL
);

CREATE TABLE public.queue_members (
    scope text NOT NULL,
    member text NOT NULL,
    weight double precision,
    current double precision DEFAULT 0 NOT NULL,
    budget bigint,
    idle boolean DEFAULT false NOT NULL,
    budget_total bigint,
    budget_key text,
    CONSTRAINT queue_members_budget_check CHECK (((budget IS NULL) OR (budget >= 0))),
    CONSTRAINT queue_members_budget_total_check CHECK (((budget_total IS NULL) OR (budget_total >= 0))),
    CONSTRAINT queue_members_weight_check CHECK (((weight IS NULL) OR (weight >= (0)::double precision)))
);

CREATE TABLE public.queue_scopes (
    scope text NOT NULL,
    default_weight double precision DEFAULT 1 NOT NULL,
    CONSTRAINT queue_scopes_default_weight_check CHECK ((default_weight >= (0)::double precision))
);

CREATE TABLE public.robots_txt (
    origin text NOT NULL,
    host text NOT NULL,
    state text NOT NULL,
    holder text,
    held_until timestamp with time zone,
    http_status integer,
    body text,
    crawl_delay_s double precision,
    error text,
    fetched_at timestamp with time zone,
    retry_at timestamp with time zone,
    CONSTRAINT robots_txt_state_check CHECK ((state = ANY (ARRAY['fetching'::text, 'fetched'::text, 'unavailable'::text, 'unreachable'::text])))
);

CREATE TABLE public.tasks (
    id bigint NOT NULL,
    task_type text NOT NULL,
    payload jsonb NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    domain text DEFAULT 'books.toscrape.com'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    completed_at timestamp with time zone,
    error text,
    task_group text DEFAULT ''::text NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    worker_id text,
    lease_token bigint,
    lease_expires_at timestamp with time zone,
    slot_at timestamp with time zone,
    error_kind text,
    claim_request uuid,
    budget_key text,
    requeues integer DEFAULT 0 NOT NULL,
    CONSTRAINT tasks_max_attempts_positive CHECK ((max_attempts >= 1)),
    CONSTRAINT tasks_priority_not_negative CHECK ((priority >= 0)),
    CONSTRAINT tasks_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'in_progress'::text, 'completed'::text, 'failed'::text])))
);

CREATE SEQUENCE public.tasks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.tasks_id_seq OWNED BY public.tasks.id;

CREATE SEQUENCE public.tasks_lease_token_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER TABLE ONLY public.books ALTER COLUMN id SET DEFAULT nextval('public.books_id_seq'::regclass);

ALTER TABLE ONLY public.crawls ALTER COLUMN id SET DEFAULT nextval('public.crawls_id_seq'::regclass);

ALTER TABLE ONLY public.tasks ALTER COLUMN id SET DEFAULT nextval('public.tasks_id_seq'::regclass);

ALTER TABLE ONLY public.adaptive_decisions
    ADD CONSTRAINT adaptive_decisions_pkey PRIMARY KEY (domain, page_type);

ALTER TABLE ONLY public.book_presence
    ADD CONSTRAINT book_presence_pkey PRIMARY KEY (book_id, at);

ALTER TABLE ONLY public.book_versions
    ADD CONSTRAINT book_versions_pkey PRIMARY KEY (book_id, version);

ALTER TABLE ONLY public.books
    ADD CONSTRAINT books_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.books
    ADD CONSTRAINT books_url_key UNIQUE (url);

ALTER TABLE ONLY public.category_balanced_snapshot
    ADD CONSTRAINT category_balanced_snapshot_pkey PRIMARY KEY (snapshot_day, url);

ALTER TABLE ONLY public.crawls
    ADD CONSTRAINT crawls_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.domains
    ADD CONSTRAINT domains_pkey PRIMARY KEY (domain);

ALTER TABLE ONLY public.listing_pages
    ADD CONSTRAINT listing_pages_pkey PRIMARY KEY (url);

ALTER TABLE ONLY public.pages
    ADD CONSTRAINT pages_pkey PRIMARY KEY (url);

ALTER TABLE ONLY public.queue_members
    ADD CONSTRAINT queue_members_pkey PRIMARY KEY (scope, member);

ALTER TABLE ONLY public.queue_scopes
    ADD CONSTRAINT queue_scopes_pkey PRIMARY KEY (scope);

ALTER TABLE ONLY public.robots_txt
    ADD CONSTRAINT robots_txt_pkey PRIMARY KEY (origin);

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);

CREATE INDEX idx_book_presence_at ON public.book_presence USING btree (at);

CREATE INDEX idx_book_versions_recorded_at ON public.book_versions USING btree (recorded_at);

CREATE INDEX idx_books_category ON public.books USING btree (category);

CREATE INDEX idx_category_balanced_snapshot_day_category ON public.category_balanced_snapshot USING btree (snapshot_day, category);

CREATE INDEX idx_listing_pages_listed_at ON public.listing_pages USING btree (listed_at);

CREATE INDEX idx_robots_txt_host ON public.robots_txt USING btree (host);

CREATE INDEX idx_tasks_budget ON public.tasks USING btree (budget_key, task_group) WHERE ((budget_key IS NOT NULL) AND (status <> 'pending'::text));

CREATE INDEX idx_tasks_claim_request ON public.tasks USING btree (claim_request) WHERE (status = 'in_progress'::text);

CREATE INDEX idx_tasks_completed_at ON public.tasks USING btree (completed_at) WHERE (status = 'completed'::text);

CREATE INDEX idx_tasks_failed_kind ON public.tasks USING btree (task_type, error_kind) WHERE (status = 'failed'::text);

CREATE INDEX idx_tasks_failed_started ON public.tasks USING btree (started_at) WHERE (status = 'failed'::text);

CREATE INDEX idx_tasks_in_flight ON public.tasks USING btree (domain) WHERE (status = 'in_progress'::text);

CREATE INDEX idx_tasks_leases ON public.tasks USING btree (lease_expires_at) WHERE (status = 'in_progress'::text);

CREATE UNIQUE INDEX idx_tasks_payload_url ON public.tasks USING btree (((payload ->> 'url'::text))) WHERE (status = ANY (ARRAY['pending'::text, 'in_progress'::text]));

CREATE INDEX idx_tasks_pending ON public.tasks USING btree (priority DESC, id) WHERE (status = 'pending'::text);

-- Whether a domain has a due pending task of some types: one index probe per throttled domain, in run_at
-- order, the type read from the index (a filter, so that the order holds).
CREATE INDEX idx_tasks_pending_domain ON public.tasks USING btree (domain, run_at) INCLUDE (task_type) WHERE (status = 'pending'::text);

CREATE INDEX idx_tasks_pending_group ON public.tasks USING btree (task_type, task_group, priority DESC, id) WHERE (status = 'pending'::text);

CREATE INDEX idx_tasks_pending_type ON public.tasks USING btree (task_type, priority DESC, id) WHERE (status = 'pending'::text);

CREATE INDEX idx_tasks_queue ON public.tasks USING btree (status, priority DESC, created_at);

CREATE INDEX idx_tasks_url_id ON public.tasks USING btree (((payload ->> 'url'::text)), id);

ALTER TABLE ONLY public.book_presence
    ADD CONSTRAINT book_presence_book_id_fkey FOREIGN KEY (book_id) REFERENCES public.books(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.book_presence
    ADD CONSTRAINT book_presence_crawl_id_fkey FOREIGN KEY (crawl_id) REFERENCES public.crawls(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.book_versions
    ADD CONSTRAINT book_versions_book_id_fkey FOREIGN KEY (book_id) REFERENCES public.books(id) ON DELETE CASCADE;

-- Tables since the squash: field drift (book_assets/store/drift.py). A database that the squashed
-- migrations made lacks them; the runner creates them when it moves such a database (hence IF NOT EXISTS).

-- Field drift held at the door (book_assets/store/drift.py): each crawl's fill rate per field and category,
-- judged against the last good crawl's; the losses of optional fields held back until a crawl is judged; the
-- drift an operator accepted. The queries are drift.sql's.

CREATE TABLE IF NOT EXISTS public.crawl_fields (
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    category text NOT NULL,
    field text NOT NULL,
    pages integer NOT NULL CHECK (pages >= 0),
    filled integer NOT NULL CHECK (filled >= 0 AND filled <= pages),
    base_crawl_id bigint,
    base_pages integer,
    base_filled integer,
    drifted boolean DEFAULT false NOT NULL,
    PRIMARY KEY (crawl_id, category, field)
);

COMMENT ON TABLE public.crawl_fields IS 'The coverage of each contract field (BOOK_CONTRACT) in one crawl: of the book pages the crawl
stored or failed as missing_field / bad_value (pages), those that showed the field with a value of its type
(filled); category is empty for the whole crawl, else a category with at least drift_min_pages pages. A crawl''s
rows are written when it ends (judge_fields in book_assets/crawl/pipeline.py), with the last good crawl it was
judged against (base_crawl_id, base_pages, base_filled) and whether the fill rate fell by more than
drift_threshold (drifted). The last good crawl is the latest earlier one whose every drifted field was
accepted (drift_acceptances).';

CREATE TABLE IF NOT EXISTS public.held_losses (
    book_id bigint NOT NULL REFERENCES public.books(id) ON DELETE CASCADE,
    field text NOT NULL CHECK (field = ANY (ARRAY['description'::text, 'stock'::text])),
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    held_at timestamp with time zone DEFAULT now() NOT NULL,
    PRIMARY KEY (book_id, field)
);

CREATE INDEX IF NOT EXISTS idx_held_losses_crawl ON public.held_losses USING btree (crawl_id, field);

COMMENT ON TABLE public.held_losses IS 'A stored value of an optional field (description, stock) that a page of the running crawl no longer
showed: the book keeps the value and no version records its loss (write_book in book_assets/store/books.py)
until the crawl is judged. No drift of the field: the loss is applied (drift_apply_losses_v1), a version records
it and the change feed reports it. Drift: it stays held until an operator accepts the drift (book-pipeline
drift accept) or a page shows the field again (the row is deleted). One row per book and field: a later crawl
that again misses it takes the row over.';

CREATE TABLE IF NOT EXISTS public.drift_acceptances (
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    field text NOT NULL,
    accepted_by text NOT NULL,
    accepted_at timestamp with time zone DEFAULT now() NOT NULL,
    applied integer DEFAULT 0 NOT NULL,
    PRIMARY KEY (crawl_id, field)
);

COMMENT ON TABLE public.drift_acceptances IS 'An operator confirmed that the drift of a field in a crawl is the site''s real change (book-pipeline
drift accept): who (accepted_by), when (accepted_at) and how many held losses that applied. The crawl then
counts as good for that field, the Dagster check no_field_drift passes and later crawls are judged against it.';

-- A drift resolved by judging its crawl again (book_assets/store/drift.py rejudge): the parser fixed, reextract
-- rebuilt the crawl's pages from what was kept, and the fill rates came back. The queries are drift.sql's.

CREATE TABLE IF NOT EXISTS public.drift_resolutions (
    crawl_id bigint NOT NULL REFERENCES public.crawls(id) ON DELETE CASCADE,
    field text NOT NULL,
    category text NOT NULL,
    resolved_by text NOT NULL,
    resolved_at timestamp with time zone DEFAULT now() NOT NULL,
    judged_crawl_id bigint NOT NULL,
    drifted_pages integer NOT NULL,
    drifted_filled integer NOT NULL,
    pages integer NOT NULL,
    filled integer NOT NULL,
    PRIMARY KEY (crawl_id, field)
);

COMMENT ON TABLE public.drift_resolutions IS 'A field of a crawl that drifted and no longer does when the crawl is judged again from what is
stored (book-pipeline reextract: the fixed parser rebuilt the pages the crawl held): by what (resolved_by), when,
and its figures in the headline row of the drift (category empty: the whole crawl) as judged at the crawl''s end
(drifted_pages, drifted_filled) and as judged again (pages, filled) in judged_crawl_id: the crawl itself, or a
later one that fetched its pages again and whose drift of the field was resolved with it. The crawl''s
crawl_fields rows are the new judgement (none when a later crawl judged it); this row keeps what was resolved. No acceptance is recorded: the drift was the parser''s, not the site''s.';

-- Functions: the claim and its steps first, then the other named queries' functions. Each one's
-- COMMENT is its design note; docs/queue.md draws the map.

-- What a claim carries from step to step (queue_claim_v3): the throttled domains with work it locked, in name
-- order (a domain's index in each array), each one's interval, next slot, remaining allowance and whether its
-- next slot moved; the domains it may no longer give tasks; when the first closed domain opens; and the tasks
-- picked so far with their slots.
CREATE TYPE public.queue_claim_state AS (
    domains text[],
    interval_s double precision[],
    next_slot timestamp with time zone[],
    allowance integer[],
    moved boolean[],
    blocked text[],
    next_at timestamp with time zone,
    ids bigint[],
    slots timestamp with time zone[]
);

COMMENT ON TYPE public.queue_claim_state IS 'The state a claim carries from step to step (queue_claim_v3): the throttled
domains with work it locked, in name order (a domain''s index in domains, interval_s, next_slot, allowance and
moved), their next slots, what each may still give and whether its next slot moved (saved at the end of the
claim); the domains it may no longer give tasks (blocked: those out of allowance, and the throttled domains it
did not lock); when the first closed domain opens (next_at); the tasks picked so far and their slots (ids,
slots). One value instead of parallel INOUT arrays: each step takes it and returns it.';

-- What a fair claim carries of the round-robin state (queue_claim_rounds_v2 loads it, queue_claim_save_rounds_v2
-- saves it): the members of its scopes ordered by scope then member, so each scope's members are contiguous.
CREATE TYPE public.queue_claim_rounds AS (
    scope text[],
    member text[],
    weight double precision[],
    cur double precision[],
    budget bigint[],
    idle boolean[],
    live boolean[],
    scopes text[],
    lo integer[],
    hi integer[]
);

COMMENT ON TYPE public.queue_claim_rounds IS 'The round-robin state a fair claim carries from pick to pick (queue_claim_v3): one
element per member of its scopes, ordered by scope then member (a member''s index in scope, member, weight,
cur, budget, idle and live): its scope, name (a group; in scope ''interleave'', a task type), weight, current,
budget left (NULL: none set), whether it was last seen without work (idle) and whether it takes part in
rounds (live: weight above 0, budget left, not idle). scopes lists the scopes, and the members of scopes[k]
are lo[k]..hi[k]. One value instead of parallel INOUT arrays: each step takes it and returns it.';

CREATE FUNCTION public.queue_claim_v3(p_request uuid, p_worker text, p_n integer, p_types text[], p_lease_s double precision, p_horizon_s double precision, p_scheduled boolean, p_interleave jsonb) RETURNS TABLE(id bigint, task_type text, payload jsonb, priority integer, domain text, task_group text, attempts integer, max_attempts integer, lease_token bigint, lease_expires_at timestamp with time zone, slot_at timestamp with time zone, next_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_fair    BOOLEAN := p_scheduled OR p_interleave IS NOT NULL;
    v_now     TIMESTAMPTZ;
    v_scopes  TEXT[];
    claimed   queue_claim_state;
    r         RECORD;
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    -- 1. replay
    IF EXISTS (SELECT 1 FROM tasks t WHERE t.claim_request = p_request AND t.status = 'in_progress') THEN
        RETURN QUERY
        SELECT t.id, t.task_type, t.payload, t.priority, t.domain, t.task_group, t.attempts, t.max_attempts,
               t.lease_token, t.lease_expires_at, t.slot_at, NULL::TIMESTAMPTZ
        FROM tasks t WHERE t.claim_request = p_request AND t.status = 'in_progress' ORDER BY t.slot_at, t.id;
        RETURN;
    END IF;
    -- 2. expired leases
    PERFORM queue_reclaim_expired_v1(p_types, clock_timestamp());
    IF p_n IS NULL OR p_n < 1 THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    -- 3. scopes, budgets, idle members
    IF v_fair THEN
        v_scopes := queue_claim_lock_scopes_v1(p_types, p_scheduled, p_interleave);
        IF p_scheduled THEN
            UPDATE queue_members m SET budget = b.budget_left
            FROM queue_budget_left_v1(v_scopes) b
            WHERE m.scope = b.scope AND m.member = b.member AND m.budget IS DISTINCT FROM b.budget_left;
        END IF;
        PERFORM queue_claim_wake_members_v1(v_scopes, v_now);
    END IF;
    -- 4. domains
    claimed := queue_claim_domains_v2(p_n, p_types, v_now, v_now + make_interval(secs => p_horizon_s), p_horizon_s);
    -- 5. picks, by one strategy; the round-robin state and the domains' next slots are saved once
    IF NOT queue_claim_all_blocked_v1(claimed.blocked) THEN
        IF p_scheduled THEN
            SELECT * INTO r FROM queue_claim_scheduled_v2(p_n, p_types, p_interleave IS NOT NULL, v_now, claimed,
                                                          queue_claim_rounds_v2(v_scopes, p_interleave));
        ELSIF v_fair THEN
            SELECT * INTO r FROM queue_claim_interleaved_v2(p_n, p_types, v_now, claimed,
                                                            queue_claim_rounds_v2(v_scopes, p_interleave));
        ELSE
            claimed := queue_claim_plain_v1(p_n, p_types, v_now, claimed);
        END IF;
        IF v_fair THEN
            claimed := r.claimed;
            PERFORM queue_claim_save_rounds_v2(r.rounds);
        END IF;
        UPDATE domains dm SET next_slot_at = u.next
        FROM unnest(claimed.domains, claimed.next_slot, claimed.moved) AS u(name, next, moved)
        WHERE u.moved AND dm.domain = u.name;
    END IF;
    -- 6. leases
    RETURN QUERY SELECT * FROM queue_claim_lease_v1(p_request, p_scheduled, p_worker, p_lease_s, v_now, claimed.ids,
                                                    claimed.slots, claimed.next_at);
END $$;

COMMENT ON FUNCTION queue_claim_v3 IS 'Claim up to p_n tasks in one round trip (docs/queue.md, "The claim"):
1. a request already answered (its answer was lost with the connection) gets the same leases back: a retried
   claim never leases a second batch, so it spends no extra attempts, slots or budget;
2. expired leases are reclaimed (queue_reclaim_expired_v1);
3. a fair claim (p_scheduled: round-robin over the type''s groups; p_interleave: over task types) locks its
   scopes (queue_claim_lock_scopes_v1; lock order everywhere: scopes by name, then domains), refreshes what
   each group budget may still hand out (queue_budget_left_v1) and lets idle members with work back into the
   rounds (queue_claim_wake_members_v1);
4. the throttled domains with work this claim could hand out are locked, each with its allowance of politeness
   slots; the other throttled domains are closed to it, unlocked (queue_claim_domains_v2);
5. unless every domain is blocked, tasks are picked by one strategy: queue_claim_scheduled_v2 (p_scheduled:
   round-robin over groups, after round-robin over types when interleaved; planned in batches),
   queue_claim_interleaved_v2 (p_interleave alone: round-robin over types, pick by pick) or
   queue_claim_plain_v1 (priority, then age). A fair strategy starts from the scopes'' round-robin state
   (queue_claim_rounds_v2), which is saved once after (queue_claim_save_rounds_v2); so are the domains'' next
   slots;
6. the picked tasks are leased, marked with the request and charged to their budgets (queue_claim_lease_v1),
   or one row with a NULL id says when to come back.
It runs as one autocommit statement, so the scope and domain locks last one statement, never a client round
trip; and it commits synchronously: a claim acknowledged to a worker survives a server crash, so no lease
token and no politeness slot is ever handed out twice.';

CREATE FUNCTION public.queue_reclaim_expired_v1(p_types text[], p_now timestamp with time zone) RETURNS void
    LANGUAGE sql
    AS $$
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

COMMENT ON FUNCTION queue_reclaim_expired_v1 IS 'Expired leases of the types back to pending (the attempt counts), or failed as lease_expired when out of
attempts: a dead worker''s tasks come back with the next claim, no janitor.';

CREATE FUNCTION public.queue_claim_lock_scopes_v1(p_types text[], p_scheduled boolean, p_interleave jsonb) RETURNS text[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_scopes TEXT[] := '{}';
BEGIN
    IF p_interleave IS NOT NULL THEN
        v_scopes := ARRAY['interleave'];
        INSERT INTO queue_scopes (scope) VALUES ('interleave') ON CONFLICT DO NOTHING;
        INSERT INTO queue_members AS m (scope, member, weight)
            SELECT 'interleave', e.key, e.value::DOUBLE PRECISION FROM jsonb_each_text(p_interleave) e
            ON CONFLICT (scope, member) DO UPDATE SET weight = excluded.weight
            WHERE m.weight IS DISTINCT FROM excluded.weight;
    END IF;
    IF p_scheduled THEN
        v_scopes := v_scopes || ARRAY(SELECT 'groups:' || t FROM unnest(p_types) t ORDER BY 1);
    END IF;
    INSERT INTO queue_scopes (scope) SELECT unnest(v_scopes) ORDER BY 1 ON CONFLICT DO NOTHING;
    PERFORM 1 FROM queue_scopes s WHERE s.scope = ANY(v_scopes) ORDER BY s.scope FOR UPDATE;
    RETURN v_scopes;
END $$;

COMMENT ON FUNCTION queue_claim_lock_scopes_v1 IS 'Lock the round-robin scopes a fair claim uses, in name order (lock order everywhere: scopes, then domains),
creating them as needed; an interleaved claim first stores its task types'' weights. Returns the scopes.';

CREATE FUNCTION public.queue_budget_left_v1(p_scopes text[]) RETURNS TABLE(scope text, member text, budget_left bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT m.scope, m.member,
           greatest(m.budget_total - (SELECT count(*) FROM tasks t
                                      WHERE t.budget_key = m.budget_key AND t.task_group = m.member
                                        AND t.status <> 'pending'), 0)
    FROM queue_members m
    WHERE m.scope = ANY(p_scopes) AND m.budget_total IS NOT NULL
$$;

COMMENT ON FUNCTION queue_budget_left_v1 IS 'What each budgeted member of the scopes may still hand out: its grant less the tasks charged to it that are
not pending (leased, completed or failed). Recomputed from the tasks at each scheduled claim, so a lost or
replayed claim never spends a budget twice.';

CREATE FUNCTION public.queue_claim_wake_members_v1(p_scopes text[], p_now timestamp with time zone) RETURNS void
    LANGUAGE sql
    AS $$
    UPDATE queue_members m SET idle = false, current = 0
    WHERE m.scope = ANY(p_scopes) AND m.idle
      AND EXISTS (SELECT 1 FROM tasks t
                  WHERE t.status = 'pending' AND t.run_at <= p_now
                    AND CASE WHEN m.scope = 'interleave' THEN t.task_type = m.member
                             ELSE t.task_type = substr(m.scope, 8) AND t.task_group = m.member END)
$$;

COMMENT ON FUNCTION queue_claim_wake_members_v1 IS 'Members last seen without work (idle) that have claimable work again re-enter the rounds at current 0: no
burst of saved credit, no old debt. The others stay out of the rounds until they do.';

CREATE FUNCTION public.queue_claim_domains_v2(p_n integer, p_types text[], p_now timestamp with time zone, p_horizon timestamp with time zone, p_horizon_s double precision) RETURNS public.queue_claim_state
    LANGUAGE plpgsql
    AS $$
DECLARE
    r       RECORD;
    v_slot  TIMESTAMPTZ;
    k       INTEGER;
    claimed queue_claim_state := ROW('{}', '{}', '{}', '{}', '{}', '{}', NULL, '{}', '{}');
BEGIN
    FOR r IN
        SELECT d.domain, d.min_interval_s, d.max_in_flight, d.next_slot_at FROM domains d
        -- one probe of idx_tasks_pending_domain per domain: LIMIT 1 rules out a hash join over every due task,
        -- and the order by run_at a scan of the table that stops at its first match (or never, for a domain
        -- without work), which the planner would otherwise pick for a domain holding most of the tasks
        CROSS JOIN LATERAL (SELECT 1 FROM tasks t
                            WHERE t.status = 'pending' AND t.domain = d.domain AND t.run_at <= p_now
                              AND t.task_type = ANY(p_types)
                            ORDER BY t.run_at LIMIT 1) due
        WHERE d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL
        ORDER BY d.domain FOR UPDATE OF d
    LOOP
        v_slot := queue_first_slot_v1(r.next_slot_at, r.min_interval_s, p_now);
        IF r.min_interval_s > 0 THEN
            IF v_slot > p_horizon THEN
                k := 0;
                claimed.next_at := least(claimed.next_at, v_slot - make_interval(secs => p_horizon_s));
            ELSE
                k := floor(extract(epoch FROM p_horizon - v_slot) / r.min_interval_s)::INTEGER + 1;
            END IF;
        ELSE
            k := p_n;
        END IF;
        IF r.max_in_flight IS NOT NULL THEN
            k := least(k, r.max_in_flight - (SELECT count(*) FROM tasks t
                                              WHERE t.status = 'in_progress' AND t.domain = r.domain
                                                AND t.lease_expires_at >= p_now)::INTEGER);
        END IF;
        k := greatest(k, 0);
        claimed.domains := claimed.domains || r.domain;
        claimed.interval_s := claimed.interval_s || r.min_interval_s;
        claimed.next_slot := claimed.next_slot || v_slot;
        claimed.allowance := claimed.allowance || k;
        claimed.moved := claimed.moved || false;
        IF k = 0 THEN
            claimed.blocked := claimed.blocked || r.domain;
        END IF;
    END LOOP;
    -- the other throttled domains: a task that turns up in one during the claim waits for the next claim, since
    -- its domain's slots were not read under the lock
    claimed.blocked := claimed.blocked || ARRAY(
        SELECT d.domain FROM domains d
        WHERE (d.min_interval_s > 0 OR d.max_in_flight IS NOT NULL) AND NOT (d.domain = ANY(claimed.domains))
        ORDER BY d.domain);
    RETURN claimed;
END $$;

COMMENT ON FUNCTION queue_claim_domains_v2 IS 'Lock the throttled domains (a politeness interval or an in-flight cap) that have work this claim could hand
out (a pending task of p_types due at p_now: idx_tasks_pending_domain), in name order, and give each its
allowance for this claim: the politeness slots that start within the horizon (the first by
queue_first_slot_v1; p_n for a domain with only an in-flight cap), capped by its in-flight room. Domains with
no allowance are blocked; next_at says when the first of them opens. The throttled domains without such work
are neither locked nor planned, so a claim''s cost follows the domains with work, not the number of domains
(docs/growth.md): they are blocked for this claim, since a task that appears in one after the lock (a
concurrent enqueue, a retry falling due) has no slot read under the lock; the next claim locks its domain.
Returns the claim''s state (queue_claim_state), with no task picked yet.';

CREATE FUNCTION public.queue_first_slot_v1(p_next_slot_at timestamp with time zone, p_interval_s double precision, p_now timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT greatest(p_next_slot_at, p_now + make_interval(secs => least(0.05, p_interval_s / 4)))
$$;

COMMENT ON FUNCTION queue_first_slot_v1 IS 'A throttled domain''s first slot from now: its next slot, and at least a little ahead of now (at most 50 ms, a
quarter interval), so that the worker is asleep when its slot comes instead of racing the claim''s return trip,
and request starts stay an interval apart even under load. Used by the claim, reslot and take_domain_slot
(queue.sql).';

CREATE FUNCTION public.queue_claim_all_blocked_v1(p_blocked text[]) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT cardinality(p_blocked) > 0
       AND NOT EXISTS (SELECT 1 FROM domains d WHERE NOT (d.domain = ANY(p_blocked)))
$$;

COMMENT ON FUNCTION queue_claim_all_blocked_v1 IS 'Whether every known domain is blocked, so that nothing more can be handed out.';

CREATE FUNCTION public.queue_claim_plain_v1(p_n integer, p_types text[], p_now timestamp with time zone, INOUT claimed public.queue_claim_state) RETURNS public.queue_claim_state
    LANGUAGE plpgsql
    AS $$
DECLARE
    cur      REFCURSOR;
    k        INTEGER;
    v_id     BIGINT;
    v_domain TEXT;
    v_more   BOOLEAN;
BEGIN
    LOOP
        v_more := false;
        IF cardinality(p_types) = 1 THEN
            OPEN cur FOR
                SELECT t.id, t.domain FROM tasks t
                WHERE t.status = 'pending' AND t.task_type = p_types[1] AND t.run_at <= p_now
                  AND NOT (t.domain = ANY(claimed.blocked)) AND NOT (t.id = ANY(claimed.ids))
                ORDER BY t.priority DESC, t.id LIMIT p_n - cardinality(claimed.ids) FOR UPDATE SKIP LOCKED;
        ELSE
            OPEN cur FOR
                SELECT t.id, t.domain FROM tasks t
                WHERE t.status = 'pending' AND t.task_type = ANY(p_types) AND t.run_at <= p_now
                  AND NOT (t.domain = ANY(claimed.blocked)) AND NOT (t.id = ANY(claimed.ids))
                ORDER BY t.priority DESC, t.id LIMIT p_n - cardinality(claimed.ids) FOR UPDATE SKIP LOCKED;
        END IF;
        LOOP
            FETCH cur INTO v_id, v_domain;
            EXIT WHEN NOT FOUND;
            k := array_position(claimed.domains, v_domain);
            IF k IS NOT NULL AND claimed.allowance[k] <= 0 THEN
                v_more := true;  -- its domain ran out within this batch: fetch again without it
                CONTINUE;
            END IF;
            claimed := queue_claim_take_v1(claimed, v_id, v_domain);
        END LOOP;
        CLOSE cur;
        EXIT WHEN cardinality(claimed.ids) >= p_n OR NOT v_more;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_plain_v1 IS 'Plain claim: pending tasks of the types by priority then age, skipping blocked domains, in batches until n are
taken or no domain with work has allowance left (a domain that runs out within a batch is left out of the next
one). One type gets its own statement so that it reads the per-type index.';

CREATE FUNCTION public.queue_claim_rounds_v2(p_scopes text[], p_interleave jsonb) RETURNS public.queue_claim_rounds
    LANGUAGE sql STABLE
    AS $$
    WITH m AS (
        SELECT m.scope, m.member, coalesce(m.weight, s.default_weight) AS weight, m.current, m.budget, m.idle,
               row_number() OVER (ORDER BY m.scope, m.member)::INTEGER AS j
        FROM queue_members m JOIN queue_scopes s USING (scope)
        WHERE m.scope = ANY(p_scopes)
          AND (m.scope <> 'interleave' OR p_interleave ? m.member)
    ), ranges AS (
        SELECT m.scope, min(m.j) AS lo, max(m.j) AS hi FROM m GROUP BY m.scope
    )
    SELECT coalesce(array_agg(m.scope ORDER BY m.j), '{}'), coalesce(array_agg(m.member ORDER BY m.j), '{}'),
           coalesce(array_agg(m.weight ORDER BY m.j), '{}'), coalesce(array_agg(m.current ORDER BY m.j), '{}'),
           coalesce(array_agg(m.budget ORDER BY m.j), '{}'), coalesce(array_agg(m.idle ORDER BY m.j), '{}'),
           coalesce(array_agg(m.weight > 0 AND (m.budget IS NULL OR m.budget > 0) AND NOT m.idle ORDER BY m.j),
                    '{}'),
           (SELECT coalesce(array_agg(r.scope ORDER BY r.lo), '{}') FROM ranges r),
           (SELECT coalesce(array_agg(r.lo ORDER BY r.lo), '{}') FROM ranges r),
           (SELECT coalesce(array_agg(r.hi ORDER BY r.lo), '{}') FROM ranges r)
    FROM m
$$;

COMMENT ON FUNCTION queue_claim_rounds_v2 IS 'The round-robin state of the scopes, as the claim starts (queue_claim_rounds): their members ordered by scope
then member, each scope''s a contiguous range. A member is live while its weight is above 0, it has budget
left and it is not idle. Interleave members are the claim''s task types.';

CREATE FUNCTION public.queue_claim_save_rounds_v2(p_rounds public.queue_claim_rounds) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN  -- plpgsql, so that the statement's plan is cached for the session as the claim's own are
    UPDATE queue_members qm SET current = u.cur, budget = u.budget, idle = u.idle
    FROM unnest(p_rounds.scope, p_rounds.member, p_rounds.cur, p_rounds.budget, p_rounds.idle)
         AS u(scope, member, cur, budget, idle)
    WHERE qm.scope = u.scope AND qm.member = u.member
      AND (qm.current, qm.budget, qm.idle) IS DISTINCT FROM (u.cur, u.budget, u.idle);
END $$;

COMMENT ON FUNCTION queue_claim_save_rounds_v2 IS 'Save a fair claim''s round-robin state (queue_claim_rounds): each member''s current, budget and idleness,
writing only the rows that changed. The claim holds its scopes'' locks, so the state is shared by every worker.';

CREATE FUNCTION public.queue_claim_scheduled_v2(p_n integer, p_types text[], p_interleaved boolean, p_now timestamp with time zone, INOUT claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    k      INTEGER;  -- the scope of the type rounds; NULL when not interleaved
    g      INTEGER;  -- the scope of the one type's groups, when not interleaved
    t_plan INTEGER[];
    g_plan INTEGER[];
    r      RECORD;
    v_done BOOLEAN := false;
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
        SELECT * INTO r FROM queue_claim_walk_v2(p_types, k, p_now, t_plan, g_plan, claimed, rounds);
        claimed := r.claimed;
        rounds := r.rounds;
        v_done := r.done;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_scheduled_v2 IS 'Scheduled claim: smooth weighted round-robin over a task type''s groups (interleaved: over the task types first,
then over the chosen type''s groups), in batches. Plans the picks left as if every live member had work
(queue_fair_plan_v2 over the one type''s groups; interleaved, queue_fair_plan_interleaved_v2), takes them
(queue_claim_walk_v2), and plans again until n are taken, nothing more can be picked or every domain is out
of slots. The picks are those of the reference pick (queue_claim_pick_fair_v2) made one by one, in its order
(docs/queue.md, "Fairness"). With one type, a pick''s type is that type: the claim is the interleaved one
without type rounds.';

CREATE FUNCTION public.queue_claim_walk_v2(p_types text[], p_k integer, p_now timestamp with time zone, p_types_plan integer[], p_groups_plan integer[], INOUT claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds, OUT done boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    f_id     BIGINT[];   -- the fetched tasks, grouped by member in each member's order
    f_domain TEXT[];
    f_next   INTEGER[];  -- per member: its next fetched task, and its last
    f_last   INTEGER[];
    r        RECORD;
    s        INTEGER := 0;  -- the planned picks taken
    j        INTEGER;
    p        INTEGER;
    v_short  BOOLEAN := false;
    v_id     BIGINT;
    v_domain TEXT;
BEGIN
    done := false;
    SELECT * INTO f_id, f_domain, f_next, f_last FROM queue_claim_fetch_plan_v2(rounds, p_groups_plan, p_now, claimed);
    LOOP
        EXIT WHEN done OR s = cardinality(p_types_plan);
        j := p_groups_plan[s + 1];  -- NULL past the groups planned: the reference pick is due
        p := f_next[j];
        -- a fetched task whose domain ran out of slots during this walk is passed over, as the
        -- reference pick's query would
        WHILE p <= f_last[j] AND f_domain[p] = ANY(claimed.blocked) LOOP
            p := p + 1;
        END LOOP;
        IF p IS NOT NULL AND p <= f_last[j] THEN
            f_next[j] := p + 1;
            s := s + 1;
            v_id := f_id[p];
            v_domain := f_domain[p];
        ELSE
            v_short := true;
            rounds := queue_fair_rounds_plan_v2(rounds, p_k, p_types_plan[1:s], p_groups_plan[1:s]);
            SELECT * INTO r FROM queue_claim_pick_fair_v2(p_types, true, p_k IS NOT NULL, p_now, claimed, rounds);
            rounds := r.rounds;
            v_id := r.task_id;
            v_domain := r.task_domain;
            IF v_id IS NULL THEN
                done := true;  -- nothing more can be picked
                EXIT;
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
        rounds := queue_fair_rounds_plan_v2(rounds, p_k, p_types_plan[1:s], p_groups_plan[1:s]);
    END IF;
END $$;

COMMENT ON FUNCTION queue_claim_walk_v2 IS 'Take a scheduled claim''s planned picks (types p_types_plan, groups p_groups_plan; p_k the type scope, NULL
for one type): fetch each planned group''s tasks in one statement (queue_claim_fetch_plan_v2) and walk the
plan, taking each group''s next task, passing over a task whose domain ran out of slots during the walk.
Where a group has none left to give, or the plan ends before n, the rounds so far are applied and the
reference pick (queue_claim_pick_fair_v2) made instead, and the walk ends: the caller plans again. Each
pick''s domain hands out a slot (queue_claim_take_v1). done: nothing more can be picked, or every domain is
out of slots.';

CREATE FUNCTION public.queue_claim_fetch_plan_v2(p_rounds public.queue_claim_rounds, p_groups integer[], p_now timestamp with time zone, p_claimed public.queue_claim_state, OUT task_ids bigint[], OUT task_domains text[], OUT member_next integer[], OUT member_last integer[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_member INTEGER[];
BEGIN
    SELECT coalesce(array_agg(x.j ORDER BY x.j, x.priority DESC, x.id), '{}'),
           coalesce(array_agg(x.id ORDER BY x.j, x.priority DESC, x.id), '{}'),
           coalesce(array_agg(x.domain ORDER BY x.j, x.priority DESC, x.id), '{}')
    INTO v_member, task_ids, task_domains
    FROM (SELECT u.j, t.id, t.domain, t.priority
          FROM (SELECT w.j, count(*)::INTEGER AS picks FROM unnest(p_groups) w(j) GROUP BY w.j) u
          CROSS JOIN LATERAL (
              SELECT t.id, t.domain, t.priority FROM tasks t
              WHERE t.status = 'pending' AND t.task_type = substr(p_rounds.scope[u.j], 8)
                AND t.task_group = p_rounds.member[u.j] AND t.run_at <= p_now
                AND NOT (t.domain = ANY(p_claimed.blocked)) AND NOT (t.id = ANY(p_claimed.ids))
              ORDER BY t.priority DESC, t.id LIMIT u.picks FOR UPDATE SKIP LOCKED) t) x;
    member_next := array_fill(NULL::INTEGER, ARRAY[cardinality(p_rounds.member)]);
    member_last := member_next;
    FOR q IN 1..cardinality(v_member) LOOP
        member_next[v_member[q]] := coalesce(member_next[v_member[q]], q);
        member_last[v_member[q]] := q;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_fetch_plan_v2 IS 'The tasks of a planned walk, in one statement: for each group member of p_groups, as many of its next tasks
as the plan gives it picks (priority, then age; outside the blocked domains and the tasks taken; FOR UPDATE
SKIP LOCKED). They come grouped by member in each member''s order (task_ids, task_domains), with each
member''s first and last position (member_next, member_last; NULL: none fetched). A group''s fetched tasks
are those the reference pick would take from it one by one, since blocked domains only grow during a claim.';

CREATE FUNCTION public.queue_claim_interleaved_v2(p_n integer, p_types text[], p_now timestamp with time zone, INOUT claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    r RECORD;
BEGIN
    WHILE cardinality(claimed.ids) < p_n LOOP
        SELECT * INTO r FROM queue_claim_pick_fair_v2(p_types, false, true, p_now, claimed, rounds);
        rounds := r.rounds;
        EXIT WHEN r.task_id IS NULL;
        -- the pick left blocked domains out, so its domain has a slot to give
        claimed := queue_claim_take_v1(claimed, r.task_id, r.task_domain);
        IF r.task_domain = ANY(claimed.blocked) THEN
            EXIT WHEN queue_claim_all_blocked_v1(claimed.blocked);
        END IF;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_interleaved_v2 IS 'Interleaved claim without group scheduling: round-robin over task types, pick by pick
(queue_claim_pick_fair_v2) until n are taken, nothing more can be picked or every domain is out of slots (then
it stops rather than mark members idle that only wait for a slot); each pick''s domain hands out a slot.';

CREATE FUNCTION public.queue_claim_pick_fair_v2(p_types text[], p_scheduled boolean, p_interleave boolean, p_now timestamp with time zone, p_claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds, OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    k      INTEGER := array_position(rounds.scopes, 'interleave');
    g      INTEGER;
    tj     INTEGER;
    gj     INTEGER;
    r      RECORD;
    v_type TEXT;
BEGIN
    LOOP
        tj := NULL;
        v_type := p_types[1];
        IF p_interleave THEN
            IF k IS NULL THEN
                RETURN;  -- no interleave member
            END IF;
            tj := queue_swrr_pick_v1(rounds.member, rounds.weight, rounds.cur, rounds.live, rounds.lo[k], rounds.hi[k]);
            IF tj IS NULL THEN
                RETURN;
            END IF;
            v_type := rounds.member[tj];
        END IF;
        gj := NULL;
        task_id := NULL;
        g := array_position(rounds.scopes, 'groups:' || v_type);
        IF p_scheduled AND g IS NOT NULL THEN
            SELECT * INTO r FROM queue_claim_pick_group_v2(v_type, g, p_now, p_claimed, rounds);
            rounds := r.rounds;
            gj := r.gj;
            task_id := r.task_id;
            task_domain := r.task_domain;
        ELSIF NOT p_scheduled THEN
            SELECT * INTO task_id, task_domain
            FROM queue_claim_next_task_v1(v_type, NULL, p_now, p_claimed.blocked, p_claimed.ids);
        END IF;
        IF task_id IS NULL THEN
            IF tj IS NULL THEN
                RETURN;  -- the claim's one type has nothing to give
            END IF;
            rounds.live[tj] := false;
            rounds.idle[tj] := NOT queue_claim_has_work_v1(v_type, NULL, p_now, p_claimed.ids);
            CONTINUE;
        END IF;
        IF tj IS NOT NULL THEN
            rounds.cur := queue_swrr_apply_v1(rounds.weight, rounds.cur, rounds.live, rounds.lo[k], rounds.hi[k], tj);
        END IF;
        IF gj IS NOT NULL THEN
            rounds.cur := queue_swrr_apply_v1(rounds.weight, rounds.cur, rounds.live, rounds.lo[g], rounds.hi[g], gj);
            IF rounds.budget[gj] IS NOT NULL THEN
                rounds.budget[gj] := rounds.budget[gj] - 1;
                IF rounds.budget[gj] <= 0 THEN
                    rounds.live[gj] := false;
                END IF;
            END IF;
        END IF;
        RETURN;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_pick_fair_v2 IS 'One fair pick, the reference the batched strategy reproduces: a task type by round-robin over the interleave
members (or the claim''s one type), then, when scheduled, one of the type''s groups (queue_claim_pick_group_v2),
then its task, outside p_claimed''s blocked domains and tasks. A type without a task to give is skipped like a
group. The rounds of the winners are applied and a group''s budget spent. Returns the round-robin state and
the task, or a NULL task when nothing more can be picked.';

CREATE FUNCTION public.queue_claim_pick_group_v2(p_type text, p_g integer, p_now timestamp with time zone, p_claimed public.queue_claim_state, INOUT rounds public.queue_claim_rounds, OUT gj integer, OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    LOOP
        gj := queue_swrr_pick_v1(rounds.member, rounds.weight, rounds.cur, rounds.live, rounds.lo[p_g], rounds.hi[p_g]);
        IF gj IS NULL THEN
            RETURN;
        END IF;
        SELECT * INTO task_id, task_domain
        FROM queue_claim_next_task_v1(p_type, rounds.member[gj], p_now, p_claimed.blocked, p_claimed.ids);
        IF task_id IS NOT NULL THEN
            RETURN;
        END IF;
        rounds.live[gj] := false;
        rounds.idle[gj] := NOT queue_claim_has_work_v1(p_type, rounds.member[gj], p_now, p_claimed.ids);
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_claim_pick_group_v2 IS 'Pick a group of a task type (the members of scope p_g) by round-robin and its next task. A group without one
is skipped without losing its place (its current is left as is) and marked idle if it has no work at all.
Returns the state, the group''s index and the task, or NULLs when no group has a task to give.';

CREATE FUNCTION public.queue_claim_next_task_v1(p_type text, p_group text, p_now timestamp with time zone, p_blocked text[], p_taken bigint[], OUT task_id bigint, OUT task_domain text) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_group IS NULL THEN  -- two statements, so that each reads its own index
        SELECT t.id, t.domain INTO task_id, task_domain FROM tasks t
        WHERE t.status = 'pending' AND t.task_type = p_type AND t.run_at <= p_now
          AND NOT (t.domain = ANY(p_blocked)) AND NOT (t.id = ANY(p_taken))
        ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    SELECT t.id, t.domain INTO task_id, task_domain FROM tasks t
    WHERE t.status = 'pending' AND t.task_type = p_type AND t.task_group = p_group AND t.run_at <= p_now
      AND NOT (t.domain = ANY(p_blocked)) AND NOT (t.id = ANY(p_taken))
    ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
END $$;

COMMENT ON FUNCTION queue_claim_next_task_v1 IS 'The next task of a type (p_group NULL: any group) by priority then age, outside blocked domains and the tasks
already taken, locked (SKIP LOCKED); NULLs when there is none.';

CREATE FUNCTION public.queue_claim_has_work_v1(p_type text, p_group text, p_now timestamp with time zone, p_taken bigint[]) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF p_group IS NULL THEN  -- two statements, so that each reads its own index
        RETURN EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = p_type
                         AND t.run_at <= p_now AND NOT (t.id = ANY(p_taken)));
    END IF;
    RETURN EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = p_type
                     AND t.task_group = p_group AND t.run_at <= p_now AND NOT (t.id = ANY(p_taken)));
END $$;

COMMENT ON FUNCTION queue_claim_has_work_v1 IS 'Whether a task type (p_group NULL) or one of its groups has claimable work besides the tasks taken: a member
without any is idle, one whose work only waits behind a politeness slot is not.';

CREATE FUNCTION public.queue_claim_take_v1(INOUT claimed public.queue_claim_state, p_id bigint, p_domain text) RETURNS public.queue_claim_state
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    k      INTEGER := array_position(claimed.domains, p_domain);
    v_slot TIMESTAMPTZ;
BEGIN
    IF k IS NOT NULL THEN
        IF claimed.interval_s[k] > 0 THEN
            v_slot := claimed.next_slot[k];
            claimed.next_slot[k] := v_slot + make_interval(secs => claimed.interval_s[k]);
            claimed.moved[k] := true;
        END IF;
        claimed.allowance[k] := claimed.allowance[k] - 1;
        IF claimed.allowance[k] <= 0 THEN
            claimed.blocked := claimed.blocked || p_domain;
        END IF;
    END IF;
    claimed.ids := claimed.ids || p_id;
    claimed.slots := claimed.slots || v_slot;
END $$;

COMMENT ON FUNCTION queue_claim_take_v1 IS 'Add task p_id of domain p_domain to the claim: a throttled domain hands out its next
politeness slot (NULL when it only caps in-flight requests), spends one unit of its allowance, and is blocked
when none is left; its next slot is marked moved, to be saved at the end of the claim.';

CREATE FUNCTION public.queue_fair_plan_v2(p_rounds public.queue_claim_rounds, p_lo integer, p_hi integer, p_n integer) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    weight DOUBLE PRECISION[] := p_rounds.weight;
    live   BOOLEAN[] := p_rounds.live;
    cur    DOUBLE PRECISION[] := p_rounds.cur;
    left_  BIGINT[] := p_rounds.budget;
    total  DOUBLE PRECISION := 0;
    k      INTEGER := 0;
    w      DOUBLE PRECISION;
    v_one  BOOLEAN := true;
    v_low  DOUBLE PRECISION;
    best   INTEGER;
    bv     DOUBLE PRECISION;
    v      DOUBLE PRECISION;
    picks  INTEGER[] := '{}';
BEGIN
    FOR j IN p_lo..p_hi LOOP
        IF live[j] THEN
            total := total + weight[j];
            k := k + 1;
            v_one := v_one AND (w IS NULL OR weight[j] = w);
            w := weight[j];
            v_low := least(v_low, cur[j]);
        END IF;
    END LOOP;
    IF k = 0 OR p_n < 1 THEN
        RETURN picks;
    END IF;
    IF v_one AND queue_fair_integral_v1(weight, cur, live, p_lo, p_hi) THEN
        RETURN queue_fair_plan_closed_v2(p_rounds, p_lo, p_hi, p_n, total,
                                         v_low - (ceil(p_n::DOUBLE PRECISION / k) - 1) * total);
    END IF;
    FOR i IN 1..p_n LOOP
        best := NULL;
        FOR j IN p_lo..p_hi LOOP
            IF live[j] THEN
                v := cur[j] + weight[j];
                cur[j] := v;
                IF best IS NULL OR v > bv THEN  -- in name order, so the first maximum is the smallest name
                    best := j;
                    bv := v;
                END IF;
            END IF;
        END LOOP;
        cur[best] := cur[best] - total;
        picks := picks || best;
        IF left_[best] IS NOT NULL THEN
            left_[best] := left_[best] - 1;
            EXIT WHEN left_[best] <= 0;
        END IF;
    END LOOP;
    RETURN picks;
END $$;

COMMENT ON FUNCTION queue_fair_plan_v2 IS 'The next picks of a scheduled claim among members lo..hi (indexes into the state''s arrays, which are in name
order), by smooth weighted round-robin as if every live member had work: up to p_n member indexes, in pick
order, ending early with the pick that spends a member''s last unit of budget (the live members, and so the
rounds'' total, change there). Empty when no member is live. Pure. Members of one weight with whole-number
state are planned in closed form (queue_fair_plan_closed_v2); otherwise the rounds are run one by one, the
arithmetic of queue_swrr_pick_v1 and queue_swrr_apply_v1.';

CREATE FUNCTION public.queue_fair_plan_closed_v2(p_rounds public.queue_claim_rounds, p_lo integer, p_hi integer, p_n integer, p_total double precision, p_low double precision) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    -- Array variables, not fields of p_rounds: the query reads each once as a parameter, where a field
    -- would be selected from the composite again for every row. plpgsql also keeps the query's plan for the
    -- session, which a LANGUAGE sql function would plan again at every call.
    cur    DOUBLE PRECISION[] := p_rounds.cur;
    budget BIGINT[] := p_rounds.budget;
    live   BOOLEAN[] := p_rounds.live;
BEGIN
    RETURN ARRAY(
        WITH pairs AS (
            SELECT g.member, c.nth, cur[g.member] - c.nth * p_total AS value,
                   budget[g.member] IS NOT NULL AND c.nth = budget[g.member] - 1 AS spends_budget
            FROM generate_series(p_lo, p_hi) g(member)
            CROSS JOIN LATERAL generate_series(
                0, least(p_n::BIGINT, coalesce(budget[g.member], p_n),
                         floor((cur[g.member] - p_low) / p_total)::BIGINT + 1) - 1) c(nth)
            WHERE live[g.member]
        ), ranked AS (
            SELECT x.member, x.spends_budget, row_number() OVER (ORDER BY x.value DESC, x.member) AS ord
            FROM pairs x
        )
        SELECT r.member FROM ranked r
        WHERE r.ord <= least(p_n, coalesce((SELECT min(x.ord) FROM ranked x WHERE x.spends_budget), p_n))
        ORDER BY r.ord);
END $$;

COMMENT ON FUNCTION queue_fair_plan_closed_v2 IS 'queue_fair_plan_v2 in closed form, for live members lo..hi of one weight with whole-number state (p_total:
their total weight; p_low: a current no member falls below within p_n picks). With the live set fixed, a
member''s (c+1)-th pick comes while its current less c totals is the highest, so the picks are the pairs
(member, c) by current - c*total descending, ties to the smallest name, up to p_n and ending with the pick
that spends a member''s last unit of budget. Pure.';

CREATE FUNCTION public.queue_fair_plan_interleaved_v2(p_rounds public.queue_claim_rounds, p_k integer, p_n integer, OUT t_plan integer[], OUT g_plan integer[]) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_types queue_claim_rounds := p_rounds;  -- the type rounds, which have no budgets
    tj      INTEGER;
    g       INTEGER;
    c       INTEGER;
    occ     INTEGER;
    v_sub   INTEGER[];
    v_cut   INTEGER;
BEGIN
    v_types.budget := array_fill(NULL::BIGINT, ARRAY[cardinality(p_rounds.member)]);
    t_plan := queue_fair_plan_v2(v_types, p_rounds.lo[p_k], p_rounds.hi[p_k], p_n);
    g_plan := array_fill(NULL::INTEGER, ARRAY[cardinality(t_plan)]);
    FOR tj IN SELECT DISTINCT x.j FROM unnest(t_plan) x(j) LOOP
        g := array_position(p_rounds.scopes, 'groups:' || p_rounds.member[tj]);
        CONTINUE WHEN g IS NULL;  -- the type has no groups
        c := (SELECT count(*) FROM unnest(t_plan) x(j) WHERE x.j = tj);
        v_sub := queue_fair_plan_v2(p_rounds, p_rounds.lo[g], p_rounds.hi[g], c);
        occ := 0;
        FOR i IN 1..cardinality(t_plan) LOOP
            IF t_plan[i] = tj THEN
                occ := occ + 1;
                EXIT WHEN occ > cardinality(v_sub);
                g_plan[i] := v_sub[occ];
            END IF;
        END LOOP;
    END LOOP;
    v_cut := array_position(g_plan, NULL);
    IF v_cut IS NOT NULL THEN
        t_plan := t_plan[1:v_cut];
        g_plan := g_plan[1:v_cut - 1];
    END IF;
END $$;

COMMENT ON FUNCTION queue_fair_plan_interleaved_v2 IS 'The next picks of an interleaved scheduled claim: the type rounds over the interleave members (scope p_k; no
budgets at this level), up to p_n type indexes (t_plan), and for each planned type its group rounds
(queue_fair_plan_v2 over its ''groups:'' scope, for as many picks as the type got) as the parallel g_plan.
Both end before the first pick whose type has no group planned for it; t_plan then holds that pick''s type as
one extra element: the reference pick is due there. Pure.';

CREATE FUNCTION public.queue_fair_rounds_v2(INOUT rounds public.queue_claim_rounds, p_lo integer, p_hi integer, p_winners integer[]) RETURNS public.queue_claim_rounds
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    s      INTEGER := cardinality(p_winners);
    weight DOUBLE PRECISION[] := rounds.weight;  -- array variables, updated in place
    cur    DOUBLE PRECISION[] := rounds.cur;
    budget BIGINT[] := rounds.budget;
    live   BOOLEAN[] := rounds.live;
    total  DOUBLE PRECISION := 0;
    cnt    INTEGER[];
    j      INTEGER;
BEGIN
    IF s = 0 THEN
        RETURN;
    END IF;
    IF queue_fair_integral_v1(weight, cur, live, p_lo, p_hi) THEN
        cnt := array_fill(0, ARRAY[p_hi]);
        FOREACH j IN ARRAY p_winners LOOP
            cnt[j] := cnt[j] + 1;
        END LOOP;
        FOR i IN p_lo..p_hi LOOP
            IF live[i] THEN
                total := total + weight[i];
            END IF;
        END LOOP;
        FOR i IN p_lo..p_hi LOOP
            IF live[i] THEN
                cur[i] := cur[i] + s * weight[i] - cnt[i] * total;
            END IF;
        END LOOP;
    ELSE
        FOREACH j IN ARRAY p_winners LOOP
            cur := queue_swrr_apply_v1(weight, cur, live, p_lo, p_hi, j);
        END LOOP;
    END IF;
    FOREACH j IN ARRAY p_winners LOOP
        IF budget[j] IS NOT NULL THEN
            budget[j] := budget[j] - 1;
            IF budget[j] <= 0 THEN
                live[j] := false;
            END IF;
        END IF;
    END LOOP;
    rounds.cur := cur;
    rounds.budget := budget;
    rounds.live := live;
END $$;

COMMENT ON FUNCTION queue_fair_rounds_v2 IS 'Apply the rounds of planned picks (queue_fair_plan_v2, all made with the same live members) to members lo..hi:
currents as queue_swrr_apply_v1 leaves them (in closed form when that is exact), each winner''s budget spent,
and a member whose budget reached 0 out of the rounds.';

CREATE FUNCTION public.queue_fair_rounds_plan_v2(INOUT rounds public.queue_claim_rounds, p_k integer, p_types integer[], p_groups integer[]) RETURNS public.queue_claim_rounds
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v_budget  BIGINT[] := rounds.budget;
    v_winners INTEGER[];
BEGIN
    IF p_k IS NOT NULL THEN  -- the type rounds, which have no budgets
        rounds.budget := array_fill(NULL::BIGINT, ARRAY[cardinality(rounds.cur)]);
        rounds := queue_fair_rounds_v2(rounds, rounds.lo[p_k], rounds.hi[p_k], p_types);
        rounds.budget := v_budget;
    END IF;
    FOR g IN 1..cardinality(rounds.lo) LOOP
        CONTINUE WHEN g = p_k;
        v_winners := ARRAY(SELECT x.j FROM unnest(p_groups) WITH ORDINALITY x(j, ord)
                           WHERE x.j BETWEEN rounds.lo[g] AND rounds.hi[g] ORDER BY x.ord);
        IF cardinality(v_winners) > 0 THEN
            rounds := queue_fair_rounds_v2(rounds, rounds.lo[g], rounds.hi[g], v_winners);
        END IF;
    END LOOP;
END $$;

COMMENT ON FUNCTION queue_fair_rounds_plan_v2 IS 'Apply the rounds of the first picks of a scheduled claim''s plan: the type rounds over the interleave members
(scope p_k; none when p_k is NULL, a claim of one type), then each type''s group rounds
(queue_fair_rounds_v2, which also spends the group budgets).';

CREATE FUNCTION public.queue_fair_integral_v1(p_weight double precision[], p_cur double precision[], p_live boolean[], p_lo integer, p_hi integer) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT coalesce(bool_and(p_weight[j] = trunc(p_weight[j]) AND p_cur[j] = trunc(p_cur[j])
                             AND abs(p_weight[j]) < 1e9 AND abs(p_cur[j]) < 1e12), true)
    FROM generate_series(p_lo, p_hi) j WHERE p_live[j]
$$;

COMMENT ON FUNCTION queue_fair_integral_v1 IS 'Whether the round-robin arithmetic of members lo..hi is exact in closed form: every live member''s weight and
current is a whole number well inside a double''s exact range, so that current + s*weight - c*total equals s
rounds applied one by one.';

CREATE FUNCTION public.queue_swrr_pick_v1(names text[], weights double precision[], currents double precision[], live boolean[], lo integer, hi integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    best INTEGER;
    best_value DOUBLE PRECISION;
    v DOUBLE PRECISION;
BEGIN
    FOR j IN lo..hi LOOP
        IF live[j] THEN
            v := currents[j] + weights[j];
            IF best IS NULL OR v > best_value OR (v = best_value AND names[j] < names[best]) THEN
                best := j;
                best_value := v;
            END IF;
        END IF;
    END LOOP;
    RETURN best;
END $$;

COMMENT ON FUNCTION queue_swrr_pick_v1 IS 'One smooth-weighted-round-robin round over members lo..hi of the arrays (nginx''s algorithm;
book_assets_tests/queue/wrr.py is its executable specification). Returns the index of the live member with
the highest current + weight (ties: smallest name), or NULL if none is live. Pure: the caller applies the round
(queue_swrr_apply_v1) only once the pick is known to have work.';

CREATE FUNCTION public.queue_swrr_apply_v1(weights double precision[], currents double precision[], live boolean[], lo integer, hi integer, winner integer) RETURNS double precision[]
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    total DOUBLE PRECISION := 0;
BEGIN
    FOR j IN lo..hi LOOP
        IF live[j] THEN
            currents[j] := currents[j] + weights[j];
            total := total + weights[j];
        END IF;
    END LOOP;
    currents[winner] := currents[winner] - total;
    RETURN currents;
END $$;

COMMENT ON FUNCTION queue_swrr_apply_v1 IS 'One smooth-weighted-round-robin round applied to members lo..hi (nginx''s algorithm): every live member adds
its weight to its current, the winner loses the total. Returns the currents.';

CREATE FUNCTION public.queue_claim_lease_v1(p_request uuid, p_scheduled boolean, p_worker text, p_lease_s double precision, p_now timestamp with time zone, p_ids bigint[], p_slots timestamp with time zone[], p_next_at timestamp with time zone) RETURNS TABLE(id bigint, task_type text, payload jsonb, priority integer, domain text, task_group text, attempts integer, max_attempts integer, lease_token bigint, lease_expires_at timestamp with time zone, slot_at timestamp with time zone, next_at timestamp with time zone)
    LANGUAGE sql
    AS $$
    WITH picked AS (
        SELECT u.id, u.slot, u.ord FROM unnest(p_ids, p_slots) WITH ORDINALITY AS u(id, slot, ord)
    ), leased AS (
        UPDATE tasks t
        SET status = 'in_progress', attempts = t.attempts + 1, worker_id = p_worker,
            lease_token = nextval('tasks_lease_token_seq'), started_at = p_now, slot_at = p.slot,
            lease_expires_at = greatest(p_now, coalesce(p.slot, p_now)) + make_interval(secs => p_lease_s),
            claim_request = p_request,
            budget_key = CASE WHEN p_scheduled
                              THEN coalesce((SELECT m.budget_key FROM queue_members m
                                             WHERE m.scope = 'groups:' || t.task_type AND m.member = t.task_group
                                               AND m.budget_total IS NOT NULL), t.budget_key)
                              ELSE t.budget_key END
        FROM picked p WHERE t.id = p.id
        RETURNING t.id, t.task_type, t.payload, t.priority, t.domain, t.task_group, t.attempts, t.max_attempts,
                  t.lease_token, t.lease_expires_at, t.slot_at, p.ord
    ), answer AS (
        SELECT l.id, l.task_type, l.payload, l.priority, l.domain, l.task_group, l.attempts, l.max_attempts,
               l.lease_token, l.lease_expires_at, l.slot_at, l.ord FROM leased l
        UNION ALL
        SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0
        WHERE cardinality(p_ids) = 0
    )
    SELECT a.id, a.task_type, a.payload, a.priority, a.domain, a.task_group, a.attempts, a.max_attempts,
           a.lease_token, a.lease_expires_at, a.slot_at, p_next_at
    FROM answer a ORDER BY a.ord
$$;

COMMENT ON FUNCTION queue_claim_lease_v1 IS 'Lease the picked tasks in one UPDATE: a fresh fencing token each (tasks_lease_token_seq), the attempt counted,
the lease running from the later of now and the task''s politeness slot; each row is marked with the claim''s
request (a replay finds it) and, for a scheduled claim, charged to its group''s budget grant. With nothing
picked, one row with a NULL id and next_at, the moment to come back.';

CREATE FUNCTION public.queue_throttle_interval_v1(p_interval double precision, p_latency_s double precision, p_throttled boolean, p_ok boolean, p_floor double precision, p_cap double precision, p_target_concurrency double precision, p_min_step_s double precision) RETURNS double precision
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT least(greatest(p_cap, p_floor), greatest(p_floor,
        CASE WHEN p_throttled
             THEN greatest(2 * p_interval, p_latency_s / p_target_concurrency, p_min_step_s)
             WHEN p_ok
             THEN greatest(p_latency_s / p_target_concurrency, (p_interval + p_latency_s / p_target_concurrency) / 2)
             ELSE greatest(p_interval, p_latency_s / p_target_concurrency)
        END))
$$;

COMMENT ON FUNCTION queue_throttle_interval_v1 IS 'The next interval of an autothrottled domain after one observation (pure; the Python reference is
book_assets/queue/throttle.py next_interval, which a test compares with this function): throttled: at least
double (at least p_min_step_s: 0 cannot double), never below latency / target; otherwise: Scrapy''s
AutoThrottle, target = latency / target_concurrency, new = max(target, (old + target) / 2), and an observation
that is not ok may raise the interval but never lower it; then clamped to [floor, max(floor, cap)].';

CREATE FUNCTION public.queue_failing_v1(p_kinds text[], p_max_requeues integer, p_backoff_s double precision, p_growth double precision) RETURNS TABLE(id bigint, started_at timestamp with time zone, requeueable boolean, due boolean)
    LANGUAGE sql STABLE
    AS $$
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

COMMENT ON FUNCTION queue_failing_v1 IS 'Pages failing now: each URL whose newest task is failed (a page fetched again since is not failing).
requeueable: its error kind is one of p_kinds and it was requeued fewer than p_max_requeues times; due:
requeueable, and its last attempt was claimed at least p_backoff_s * p_growth ^ requeues ago, so each requeue
of a page waits longer than the one before.';

CREATE FUNCTION public.queue_finished_before_v1(p_cutoff timestamp with time zone, p_batch integer) RETURNS SETOF bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    RETURN QUERY SELECT t.id FROM tasks t WHERE t.status = 'completed' AND t.completed_at < p_cutoff
                 LIMIT p_batch FOR UPDATE SKIP LOCKED;
    RETURN QUERY SELECT t.id FROM tasks t
                 WHERE t.status = 'failed' AND coalesce(t.started_at, t.created_at) < p_cutoff
                 LIMIT p_batch FOR UPDATE SKIP LOCKED;
END $$;

COMMENT ON FUNCTION queue_finished_before_v1 IS 'Up to p_batch completed and p_batch failed tasks that ended before p_cutoff (failed ones by the claim of their
last attempt), locked with SKIP LOCKED: one short batch of a retention prune, which waits for no worker and
holds no lock for long.';

CREATE FUNCTION public.book_changes_v1(p_day date) RETURNS TABLE(day date, change text, book_id bigint, url text, title text, category text, price numeric, version integer, fields text[], changed_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
    WITH bounds AS (
        SELECT p_day::timestamp AT TIME ZONE 'UTC' AS day_start, (p_day + 1)::timestamp AT TIME ZONE 'UTC' AS day_end
    ),
    versions AS (
        SELECT v.book_id, min(v.version) AS first_version, max(v.recorded_at) AS at,
               coalesce(array_agg(DISTINCT f.name ORDER BY f.name) FILTER (WHERE f.name IS NOT NULL), '{}') AS fields
        FROM bounds b
        JOIN book_versions v ON v.recorded_at >= b.day_start AND v.recorded_at < b.day_end
        LEFT JOIN LATERAL unnest(v.changed) AS f(name) ON true
        GROUP BY v.book_id
    ),
    last_event AS (
        SELECT DISTINCT ON (p.book_id) p.book_id, p.event, p.at
        FROM bounds b
        JOIN book_presence p ON p.at >= b.day_start AND p.at < b.day_end
        ORDER BY p.book_id, p.at DESC
    ),
    presence AS (
        SELECT e.book_id, e.event AS at_end, e.at,
               coalesce((SELECT q.event FROM book_presence q WHERE q.book_id = e.book_id AND q.at < b.day_start
                         ORDER BY q.at DESC LIMIT 1), 'returned') AS at_start
        FROM last_event e CROSS JOIN bounds b
    ),
    changes AS (
        SELECT coalesce(v.book_id, p.book_id) AS book_id,
               CASE
                   WHEN v.first_version = 1 THEN CASE WHEN p.at_end = 'removed' THEN NULL ELSE 'new' END
                   WHEN p.at_end IS DISTINCT FROM p.at_start THEN p.at_end
                   WHEN v.book_id IS NOT NULL THEN 'changed'
               END AS change,
               coalesce(v.fields, '{}') AS fields,
               greatest(v.at, p.at) AS at
        FROM versions v FULL JOIN presence p ON p.book_id = v.book_id
    )
    SELECT p_day, c.change, c.book_id, bk.url, lv.fields ->> 'title', lv.fields ->> 'category',
           (lv.fields ->> 'price_amount')::numeric(10, 2), lv.version, c.fields, c.at
    FROM changes c
    CROSS JOIN bounds b
    JOIN books bk ON bk.id = c.book_id
    LEFT JOIN LATERAL (
        SELECT v.version, v.fields FROM book_versions v
        WHERE v.book_id = c.book_id AND v.recorded_at < b.day_end
        ORDER BY v.version DESC LIMIT 1
    ) lv ON true
    WHERE c.change IS NOT NULL
$$;

COMMENT ON FUNCTION book_changes_v1 IS 'The changes of day p_day (UTC), one row per book, comparing the day''s start with its end: new: first version
recorded that day (and not removed by its end); removed: listed at the start, marked removed by the end;
returned: marked removed at the start, listed again by the end; changed: any other book with a new version
that day. fields: the changed field names of the day''s versions (book_versions.changed); title/category/price
and version: the book''s latest version recorded by the day''s end.';

CREATE FUNCTION public.snapshot_books_as_of_v1(p_until timestamp with time zone) RETURNS TABLE(book_id bigint, url text, title text, category text, price numeric, rating smallint, stock integer, recorded_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
    SELECT DISTINCT ON (v.book_id)
           v.book_id, v.url, v.fields ->> 'title', v.fields ->> 'category',
           (v.fields ->> 'price_amount')::numeric(10, 2), (v.fields ->> 'rating_value')::smallint,
           (v.fields ->> 'stock')::integer, v.recorded_at
    FROM book_versions v
    WHERE v.recorded_at < p_until
    ORDER BY v.book_id, v.version DESC
$$;

COMMENT ON FUNCTION snapshot_books_as_of_v1 IS 'Every book as it stood before p_until: the latest version of each book recorded before then, with the
snapshot''s typed fields read from the version''s JSON (fields as book_assets/store/books.py records them).';

CREATE FUNCTION public.drift_apply_losses_v1(p_crawl bigint, p_field text, p_hold text[]) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
DECLARE
    v_ids bigint[];
BEGIN
    WITH released AS (
        DELETE FROM held_losses h USING books b
        WHERE h.book_id = b.id AND h.field = p_field AND h.crawl_id <= p_crawl
          AND NOT (coalesce(b.category, '') = ANY (p_hold))
        RETURNING h.book_id
    )
    SELECT coalesce(array_agg(book_id), '{}') INTO v_ids FROM released;
    EXECUTE format(
        'WITH lost AS (UPDATE books SET %1$I = NULL, version = version + 1, updated_at = now()
                       WHERE id = ANY ($1) AND %1$I IS NOT NULL RETURNING id)
         SELECT coalesce(array_agg(id), ''{}'') FROM lost', p_field)
    INTO v_ids USING v_ids;
    INSERT INTO book_versions (book_id, version, url, fields, changed, content_hash, fetched_at)
    SELECT b.id, b.version, b.url, last.fields || jsonb_build_object(p_field, NULL), ARRAY[p_field],
           b.content_hash, b.fetched_at
    FROM books b
    CROSS JOIN LATERAL (
        SELECT v.fields FROM book_versions v WHERE v.book_id = b.id ORDER BY v.version DESC LIMIT 1
    ) last
    WHERE b.id = ANY (v_ids);
    RETURN coalesce(array_length(v_ids, 1), 0);
END
$_$;

COMMENT ON FUNCTION drift_apply_losses_v1 IS 'Apply the held losses of field p_field staged by crawl p_crawl or before (held_losses), except in the
categories p_hold (where the field drifted): each book loses the value (NULL), its version moves on and a
book_versions row records it (the latest version''s fields with p_field NULL, changed = {p_field}), so the
change feed reports a book that really lost its description. Returns the books changed.';
