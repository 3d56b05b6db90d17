"""A one-op job that holds its step and writes when it ran (NAME.span.json beside MARKER).

``python -m ... NAME POOL|- MARKER CAP_SECONDS``: a step in a pool holds it until the MARKER file exists (at
most CAP_SECONDS); a step in no pool starts once a pool's step runs and writes MARKER. So a step in no pool
that runs beside a pool's step always overlaps it, however slow the machine, and one that waited for the
pool starts only after the cap.

Run by test_dagster_pools.py in separate processes on one instance (``DAGSTER_HOME``), the way runs of the
daemon's run queue share the instance's pool slots.
"""

import json
import sys
import time
from pathlib import Path

import dagster as dg


def _wait_for(path: Path, cap: float) -> None:
    deadline = time.time() + cap
    while not path.exists() and time.time() < deadline:
        time.sleep(0.05)


def main() -> None:
    name, pool, marker, cap = (
        sys.argv[1],
        (None if sys.argv[2] == "-" else sys.argv[2]),
        sys.argv[3],
        float(sys.argv[4]),
    )

    @dg.op(name="hold", pool=pool)
    def hold() -> None:
        held = Path(marker).with_name("pool-held")
        if pool is None:  # starts once a pool's step is running, and lets it go
            _wait_for(held, cap)
            start = time.time()
            Path(marker).touch()
            time.sleep(0.2)
        else:
            start = time.time()
            held.touch()
            _wait_for(Path(marker), cap)
        span = {"name": name, "start": start, "end": time.time()}  # in a file: Dagster's logs share stdout
        Path(marker).with_name(f"{name}.span.json").write_text(json.dumps(span))

    @dg.job(name=f"{name}_job")
    def job() -> None:
        hold()

    with dg.DagsterInstance.get() as instance:
        assert job.execute_in_process(instance=instance).success


if __name__ == "__main__":
    main()
