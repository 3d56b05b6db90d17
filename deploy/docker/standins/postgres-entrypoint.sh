#!/bin/sh
# The official postgres image's start-up, in short: as root, own PGDATA and drop to the postgres user; on an
# empty PGDATA, initdb with POSTGRES_USER and POSTGRES_PASSWORD (scram-sha-256 for every host), create
# POSTGRES_DB, run /docker-entrypoint-initdb.d/*.sql and *.sh on a server listening on its socket only; then
# exec the server listening on every address.
set -eu
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "${1:-}" != postgres ]; then exec "$@"; fi
shift
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "error: POSTGRES_PASSWORD is not set (the official image refuses too)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  # shellcheck disable=SC2086
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  # The official image's socket folder (where pg_isready and psql look), not this build's default /tmp.
  printf "unix_socket_directories = '/var/run/postgresql'\n" >>"$PGDATA/postgresql.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -q \
      -c "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\""
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sql) psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" -q -f "$f" ;;
      *.sh) . "$f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -c listen_addresses='*' "$@"
