#!/usr/bin/env bash
# Idempotent set-up. `bootstrap.sh` (for `make demo`): uv, the locked virtualenv and a Chromium, which a user
# without root can have too (an existing Chromium, or BOOK_PIPELINE_CHROMIUM). `bootstrap.sh --tests` (for
# `make test`): also the tools only the tests use, from Debian: psql, a compose client, PgBouncer,
# libfaketime, iproute2, stress-ng, Prometheus, and for the compose stack's test the Docker engine,
# debootstrap and npm.
# The database is brought up by the commands themselves (embedded PostgreSQL unless DATABASE_URL is set), and by
# step 4, which writes the Dagster instance's variables to .env.
# A second run does no work beyond a few existence checks.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=0
case "${1:-}" in
  --tests) TESTS=1 ;;
  "") ;;
  *) echo "usage: bootstrap.sh [--tests]" >&2; exit 2 ;;
esac

UV_VERSION=0.13.8
say() { printf 'bootstrap: %s\n' "$*" >&2; }

# 1. uv (pinned), from PyPI.
if ! command -v uv >/dev/null 2>&1 && [ ! -x "$HOME/.local/bin/uv" ]; then
  say "installing uv $UV_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check --user "uv==$UV_VERSION" 2>/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
UV=$(command -v uv || echo "$HOME/.local/bin/uv")

# 2. The virtualenv, exactly as locked (well under a second when already in sync), with its bytecode, and the
#    project's own bytecode (an editable install, which uv does not compile): every CLI command, fork server and
#    Dagster step is a fresh interpreter, and where PYTHONDONTWRITEBYTECODE is set nothing else writes the .pyc
#    files, so each would compile its imports again (Dagster alone: ~3 s of CPU; the package: ~0.1 s). compileall
#    rewrites only what changed since its last run.
"$UV" sync --frozen --quiet --compile-bytecode
.venv/bin/python -m compileall -q book_assets >/dev/null

# 3. A Chromium for Playwright: an explicit path; else a headless shell (Playwright's own where it can be
#    downloaded, else Debian's chromium-headless-shell as root), which is faster than full Chromium for a
#    crawler (README, Requirements); full Chromium (Playwright's, then the system's) only as a fallback.
#    A headless-shell install that failed once is not retried on every run (marker in .venv; delete it to retry).
PW_CACHE="${PLAYWRIGHT_BROWSERS_PATH:-$HOME/.cache/ms-playwright}"
SHELL_MARKER=.venv/.book-pipeline-no-headless-shell
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get install -y -qq "$1" >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq "$1" >/dev/null; }; } \
      && return 0
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo apt-get update -qq >/dev/null && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null && return 0
  fi
  return 1
}
headless_shell_ok() {
  compgen -G "$PW_CACHE/chromium_headless_shell-*/chrome-*linux*/*headless?shell" >/dev/null && return 0
  [ -x /usr/bin/chromium-headless-shell ] || command -v chromium-headless-shell >/dev/null 2>&1
}
chromium_ok() {
  headless_shell_ok && return 0
  compgen -G "$PW_CACHE/chromium-*/chrome-linux*/chrome" >/dev/null && return 0
  for c in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do [ -x "$c" ] && return 0; done
  return 1
}
if [ -n "${BOOK_PIPELINE_CHROMIUM:-}" ]; then
  [ -x "$BOOK_PIPELINE_CHROMIUM" ] || { say "BOOK_PIPELINE_CHROMIUM=$BOOK_PIPELINE_CHROMIUM is not an executable"; exit 1; }
elif ! headless_shell_ok && [ ! -e "$SHELL_MARKER" ]; then
  say "no Chromium headless shell found; trying Playwright's own build"
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 300 .venv/bin/playwright install chromium-headless-shell >/tmp/book-pipeline-playwright-install.log 2>&1; then
    say "playwright install failed (no download access?); trying the system package chromium-headless-shell"
    apt_install chromium-headless-shell || { say "no headless shell available; full Chromium will be used"; touch "$SHELL_MARKER"; }
  fi
fi
if [ -z "${BOOK_PIPELINE_CHROMIUM:-}" ] && ! chromium_ok; then
  say "no Chromium found; trying Playwright's own full build, then the system package chromium"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 .venv/bin/playwright install chromium >>/tmp/book-pipeline-playwright-install.log 2>&1 || apt_install chromium || true
  chromium_ok || { say "no Chromium: install one (apt-get install -y chromium-headless-shell) or set BOOK_PIPELINE_CHROMIUM=/path/to/chrome"; exit 1; }
fi

# 4. The Dagster instance's variables (DAGSTER_HOME, DAGSTER_PG_*) in the git-ignored .env, which `dg` and
#    `dagster` read in the project folder; this brings up the embedded PostgreSQL unless DATABASE_URL is set.
.venv/bin/python -m book_assets.dagster_instance >/dev/null \
  || say "could not write .env for the Dagster instance (is the database reachable?); dg commands in this folder need it: .venv/bin/python -m book_assets.dagster_instance"

[ "$TESTS" = 1 ] || exit 0

# 5. psql: the tests log in to the embedded server as another local user, with and without its password.
if ! command -v psql >/dev/null 2>&1; then
  say "installing the PostgreSQL client (psql)"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client >/dev/null
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo apt-get update -qq >/dev/null && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client >/dev/null
  fi
  command -v psql >/dev/null 2>&1 || { say "no psql: install the PostgreSQL client (apt-get install -y postgresql-client)"; exit 1; }
fi

# 6. A compose client: the tests validate docker-compose.yml with `config` (no engine needed).
if ! { command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; } \
   && ! command -v docker-compose >/dev/null 2>&1; then
  say "installing a compose client (docker-compose) to validate docker-compose.yml"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo apt-get update -qq >/dev/null && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
  fi
  command -v docker-compose >/dev/null 2>&1 || { say "no compose client: install docker-compose (apt-get install -y docker-compose)"; exit 1; }
fi

# 7. Scale-out test tools from Debian: PgBouncer (a crawl through transaction pooling), libfaketime (a host
#    whose clock is skewed), iproute2 (network namespaces as hosts), stress-ng (the suite under load,
#    scripts/test_under_load.sh) and Prometheus with promtool (the metrics tests scrape a crawl, check the rules). Tests that need one skip, naming it, on a machine where none can be installed.
# The compose stack's test (scripts/compose_e2e.py) adds Debian's Docker engine, debootstrap (a Debian base
#    image when no registry answers) and npm (PostgreSQL 16 for the postgres:16 stand-in).
for tool in pgbouncer:pgbouncer faketime:faketime ip:iproute2 stress-ng:stress-ng prometheus:prometheus \
            dockerd:docker.io debootstrap:debootstrap npm:npm; do
  command -v "${tool%%:*}" >/dev/null 2>&1 && continue
  say "installing ${tool#*:} for the scale-out tests"
  apt_install "${tool#*:}" || say "could not install ${tool#*:}: the tests that need it will skip"
done
