"""`make dev`: `dg dev` (webserver and daemon) on the project's Dagster instance.

dagster.yaml reads the instance's database from DAGSTER_PG_* variables; this writes them to the project's
`.env` (from DATABASE_URL or the embedded server, starting it when needed), which `dg dev` reads as it would
when a user types it in the project folder, then hands over to `dg dev` with any extra arguments
(e.g. `make dev ARGS="--port 3001"`).

    .venv/bin/python scripts/dg_dev.py [dg dev options]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from book_assets.dagster_instance import write_env_file
from book_assets.settings import PROJECT_ROOT, load_settings


def main() -> None:
    write_env_file(load_settings())
    os.environ.setdefault("VIRTUAL_ENV", str(Path(sys.executable).parent.parent))
    dg = str(Path(sys.executable).parent / "dg")
    os.chdir(PROJECT_ROOT)
    os.execv(dg, [dg, "dev", *sys.argv[1:]])


if __name__ == "__main__":
    main()
