-- The two roles of a book-pipeline deployment, created once by the database's owner or a superuser:
--   migrator  owns the pipeline's schema: runs `book-pipeline db migrate` (deploy/k8s/migrate-job.yaml) and
--             nothing else;
--   app       what the workers, the queue exporter, Dagster's code, run and step pods connect as: reads and
--             writes rows, calls the queue's functions, creates nothing (no DDL).
-- Objects the migrator creates later are granted to the app by the default privileges below, so a new
-- migration needs no new GRANT. Run it with psql (the names and passwords are psql variables):
--   psql "$ADMIN_URL" -v database=bookpipeline -v migrator=book_pipeline_migrator -v app=book_pipeline_app \
--        -v migrator_password=... -v app_password=... -f deploy/postgres/roles.sql
-- Then DATABASE_URL is postgresql://book_pipeline_app:...@host/bookpipeline (secret book-pipeline-db) and the
-- migration Job's is postgresql://book_pipeline_migrator:...@host/bookpipeline (secret book-pipeline-migrate).
\set ON_ERROR_STOP on

CREATE ROLE :"migrator" LOGIN PASSWORD :'migrator_password';
CREATE ROLE :"app" LOGIN PASSWORD :'app_password';

GRANT CONNECT, TEMPORARY ON DATABASE :"database" TO :"migrator", :"app";
-- Only the migrator creates objects in the schema (PostgreSQL before 15 let every role create there).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA public TO :"migrator";
GRANT USAGE ON SCHEMA public TO :"app";

-- What the migrator has created already (a database migrated before these roles existed is granted too)...
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO :"app";
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO :"app";
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO :"app";
-- ...and what it creates from now on.
ALTER DEFAULT PRIVILEGES FOR ROLE :"migrator" IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"migrator" IN SCHEMA public
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"migrator" IN SCHEMA public
    GRANT EXECUTE ON FUNCTIONS TO :"app";
