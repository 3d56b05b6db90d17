"""`make dev`: `dg dev` (webserver and daemon) on the project's Dagster instance.

dagster.yaml reads the instance's database from DAGSTER_PG_* variables; this fills them in from DATABASE_URL
or the embedded server (starting it when needed), as `book-pipeline ui` does, then hands over to `dg dev`
with any extra arguments (e.g. `make dev ARGS="--port 3001"`).

    .venv/bin/python scripts/dg_dev.py [dg dev options]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from book_assets.dagster_instance import dagster_environment
from book_assets.settings import PROJECT_ROOT, load_settings


def main() -> None:
    os.environ.update(dagster_environment(load_settings()))
    os.environ.setdefault("VIRTUAL_ENV", str(Path(sys.executable).parent.parent))
    dg = str(Path(sys.executable).parent / "dg")
    os.chdir(PROJECT_ROOT)
    os.execv(dg, [dg, "dev", *sys.argv[1:]])


if __name__ == "__main__":
    main()
