#!/usr/bin/env bash
# The whole suite (`make test`) from a fresh clone of HEAD while the machine is busy the way a developer's is,
# RUNS times in a row (3 by default): stress-ng keeps both cores, memory and the disk busy for each run.
# Prints one JSON line per run and a summary line; exits 1 unless every run passed. Record the figures in
# the commit message (the latest in docs/benchmarks.md).
#
#   scripts/test_under_load.sh [RUNS]          e.g. RUNS=1 for a single loaded run
#   STRESS="--cpu 2 --vm 1 --vm-bytes 1G --io 1" scripts/test_under_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
STRESS=${STRESS:---cpu 2 --vm 1 --vm-bytes 1G --io 1}
REPO=$(pwd)
COMMIT=$(git rev-parse --short HEAD)
command -v stress-ng >/dev/null 2>&1 || { echo "test_under_load: stress-ng is missing (make setup-tests installs it)" >&2; exit 1; }

passed=0
for run in $(seq 1 "$RUNS"); do
  work=$(mktemp -d /tmp/book-pipeline-under-load-XXXXXX)
  git clone --quiet "$REPO" "$work/clone"
  # shared/ beside the clone, as CI lays it out, when there is one beside this repository.
  [ -d "$REPO/../shared" ] && ln -s "$(cd "$REPO/../shared" && pwd)" "$work/shared"
  # shellcheck disable=SC2086 # STRESS is a list of options
  stress-ng $STRESS --timeout 7200s --quiet &
  stress=$!
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  started=$(date +%s)
  set +e
  (cd "$work/clone" && CI=true make test) >"$work/make-test.log" 2>&1
  rc=$?
  set -e
  elapsed=$(($(date +%s) - started))
  load_after=$(cut -d' ' -f1 /proc/loadavg)
  kill "$stress" 2>/dev/null || true
  wait "$stress" 2>/dev/null || true
  (cd "$work/clone" && make -s db-down >/dev/null 2>&1) || true
  summary=$(grep -E '^=+ .*(passed|failed|error).* =+$' "$work/make-test.log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
  [ "$rc" = 0 ] && passed=$((passed + 1))
  printf '{"run": %d, "commit": "%s", "exit": %d, "seconds": %d, "pytest": "%s", "load_1m_at_start": %s, "load_1m_at_end": %s, "stress": "%s", "log": "%s"}\n' \
    "$run" "$COMMIT" "$rc" "$elapsed" "$summary" "$load_before" "$load_after" "$STRESS" "$work/make-test.log"
  if [ "$rc" = 0 ]; then rm -rf "$work/clone"; fi
done
echo "test_under_load: $passed of $RUNS runs passed at $COMMIT"
[ "$passed" = "$RUNS" ]
