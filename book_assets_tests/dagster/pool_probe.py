"""A one-op job that holds its step for a while and prints when it ran: ``python -m ... NAME POOL|- SECONDS``.

Run by test_dagster_pools.py in separate processes on one instance (``DAGSTER_HOME``), the way runs of the
daemon's run queue share the instance's pool slots.
"""

import json
import sys
import time

import dagster as dg


def main() -> None:
    name, pool, seconds = sys.argv[1], (None if sys.argv[2] == "-" else sys.argv[2]), float(sys.argv[3])

    @dg.op(name="hold", pool=pool)
    def hold() -> None:
        start = time.time()
        time.sleep(seconds)
        print("SPAN " + json.dumps({"name": name, "start": start, "end": time.time()}), flush=True)

    @dg.job(name=f"{name}_job")
    def job() -> None:
        hold()

    with dg.DagsterInstance.get() as instance:
        assert job.execute_in_process(instance=instance).success


if __name__ == "__main__":
    main()
