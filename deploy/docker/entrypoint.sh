#!/bin/sh
# The image's entrypoint (under tini). The book-pipeline commands derive the Dagster instance's variables
# (DAGSTER_PG_*, the storage folders) from DATABASE_URL themselves; the plain `dagster` commands the stack runs
# (the gRPC server, webserver, daemon and every run container) get them here, from the same function
# (book_assets.dagster_instance.dagster_environment), which also creates Dagster's database. Variables already
# set win (a Helm chart sets its own).
set -eu
if [ -n "${DATABASE_URL:-}" ] && [ -z "${DAGSTER_PG_HOST:-}" ]; then
  eval "$(python -c '
import os, shlex
from book_assets.dagster_instance import dagster_environment
from book_assets.settings import load_settings
for name, value in dagster_environment(load_settings()).items():
    if name not in os.environ:
        print(f"export {name}={shlex.quote(value)}")
')"
fi
exec "$@"
