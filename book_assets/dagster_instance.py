"""Point the Dagster instance (dagster.yaml) at the project's PostgreSQL.

dagster.yaml reads ``DAGSTER_PG_*`` variables; this module derives them from ``DATABASE_URL`` or the
embedded server so that Dagster's runs, event logs and schedules live on the same server as the queue,
in a database of their own (``<database>_dagster``).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg2

from book_assets.db.connection import ensure_database, resolve_database_url
from book_assets.settings import PROJECT_ROOT, Settings


def dagster_environment(settings: Settings) -> dict[str, str]:
    """Environment variables for dagster-webserver / dagster-daemon / in-process runs."""
    url = resolve_database_url(settings)
    parts = urlsplit(url)
    name = f"{parts.path.strip('/')}_dagster"
    try:
        ensure_database(url, name)
    except psycopg2.Error:  # no CREATEDB right: share the pipeline's database
        name = parts.path.strip("/")
    data = settings.data_dir / "dagster"
    (data / "compute_logs").mkdir(parents=True, exist_ok=True)
    (data / "storage").mkdir(parents=True, exist_ok=True)
    return {
        "DAGSTER_HOME": str(Path(os.environ.get("DAGSTER_HOME", PROJECT_ROOT)).resolve()),
        "DAGSTER_PG_USERNAME": unquote(parts.username or "postgres"),
        # dagster treats an empty variable as unset; a URL without a password (peer or trust auth) still works.
        "DAGSTER_PG_PASSWORD": unquote(parts.password or "trust"),
        "DAGSTER_PG_HOST": parts.hostname or "127.0.0.1",
        "DAGSTER_PG_PORT": str(parts.port or 5432),
        "DAGSTER_PG_DB": name,
        "DAGSTER_COMPUTE_LOG_DIR": str(data / "compute_logs"),
        "DAGSTER_ARTIFACT_DIR": str(data / "storage"),
        "DATABASE_URL": url,
    }
