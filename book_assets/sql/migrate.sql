-- The migration runner's statements for a database that squashed migrations made
-- (book_assets/db/migrations.py): its functions are replaced by those of 0001_initial, its tables kept.

-- drop_functions --
-- Drop every function and composite type of the schema (the functions first: they take the types), so that
-- the functions part of 0001_initial can create them as it has them; tables and rows stay.
DO $$ DECLARE f regprocedure; t regtype;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
    FOR t IN SELECT ty.oid::regtype FROM pg_type ty JOIN pg_class c ON c.oid = ty.typrelid
             WHERE c.relkind = 'c' AND ty.typnamespace = current_schema()::regnamespace LOOP
        EXECUTE format('DROP TYPE %s', t);
    END LOOP;
END $$;

-- squashed_tables --
-- Where the tables of the squashed migrations differ from those of 0001_initial: the pre-release chain lacks
-- the index of the claim's domains probe, created here as 0001_initial creates it, and both hold tasks_archive,
-- which 0001_initial has not (the retention deletes finished tasks; the books, versions and pages are the data).
-- An archive that holds rows stops the move: they are the owner's to keep or drop.
CREATE INDEX IF NOT EXISTS idx_tasks_pending_domain ON public.tasks USING btree (domain, run_at) INCLUDE (task_type) WHERE (status = 'pending'::text);
DO $$ BEGIN
    IF to_regclass('tasks_archive') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM tasks_archive) THEN
            RAISE EXCEPTION 'tasks_archive holds finished tasks, which 0.1.0 does not keep: copy them out if you need them, DROP TABLE tasks_archive and migrate again';
        END IF;
        DROP TABLE tasks_archive;
    END IF;
END $$;
