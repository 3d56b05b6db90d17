"""Point the Dagster instance (dagster.yaml) at the project's PostgreSQL.

dagster.yaml reads ``DAGSTER_PG_*`` variables; this module derives them from ``DATABASE_URL`` or the
embedded server so that Dagster's runs, event logs and schedules live on the same server as the queue,
in a database of their own (``<database>_dagster``).

The ``book-pipeline`` commands set these variables themselves. For a Dagster user's own commands (``dg check
defs``, ``dg dev``, ``dg launch``, ``dagster ...``) run in the project folder, :func:`write_env_file` keeps them
in the project's git-ignored ``.env``, which both CLIs read from the working directory (``dagster`` before it
looks for ``DAGSTER_HOME``); set-up (``scripts/bootstrap.sh``) writes it with
``python -m book_assets.dagster_instance``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg2

from book_assets.db.connection import ensure_database, resolve_database_url
from book_assets.settings import PROJECT_ROOT, Settings, load_settings

#: The lines of ``.env`` this module owns; a user's own lines around them are kept as they are.
BLOCK_START = "# >>> Dagster instance (written by `python -m book_assets.dagster_instance`; the dg CLI reads it)"
BLOCK_END = "# <<< Dagster instance"


def dagster_environment(settings: Settings, *, home: Path | None = None) -> dict[str, str]:
    """Environment variables for dagster-webserver / dagster-daemon / in-process runs.

    ``home``: the ``DAGSTER_HOME`` (default: the environment's, else the project root).
    """
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
        "DAGSTER_HOME": str((home or Path(os.environ.get("DAGSTER_HOME", PROJECT_ROOT))).resolve()),
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


def env_file_values(settings: Settings, root: Path) -> dict[str, str]:
    """What ``.env`` holds for the project at ``root``: the instance's variables, ``DAGSTER_HOME`` = ``root``.

    ``DATABASE_URL`` only when the settings name a server: the embedded server's URL written there would read
    as an external server, which nothing starts after a reboot (unset, every command starts it when needed).
    """
    values = dagster_environment(settings, home=root)
    if not settings.database_url:
        del values["DATABASE_URL"]
    return values


def _line(name: str, value: str) -> str:
    """One ``.env`` line that gives ``value`` unless the environment already sets ``name``.

    ``NAME="${NAME:-value}"``: python-dotenv (which ``dg``, the ``dagster`` CLI and the settings all read the
    file with) expands it from the environment at read time. Dagster's CLI lets a ``.env`` in its working
    directory override the environment, so a literal value would take a command that was handed another
    instance (``DATABASE_URL`` set in the shell, a test's database) onto this one. A value that the expansion
    cannot carry (``$``, ``}``, ``"``, ``\\``) is written single-quoted, as a literal.
    """
    if any(c in value for c in '$}"\\'):
        return f"{name}='" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f'{name}="${{{name}:-{value}}}"'


def write_env_file(settings: Settings, root: Path = PROJECT_ROOT) -> Path:
    """Write (or refresh) the instance's block of ``root/.env``, readable by its owner only (it holds the
    database password); returns the file's path."""
    path = root / ".env"
    kept = path.read_text() if path.exists() else ""
    kept = re.sub(rf"(?ms)^{re.escape(BLOCK_START)}$.*?^{re.escape(BLOCK_END)}$\n?", "", kept)
    if kept and not kept.endswith("\n"):
        kept += "\n"
    block = [BLOCK_START, *(_line(k, v) for k, v in env_file_values(settings, root).items()), BLOCK_END]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(kept + "\n".join(block) + "\n")
    path.chmod(0o600)
    return path


def main() -> None:
    """Write the project's ``.env`` for the Dagster instance (starting the embedded server when needed)."""
    path = write_env_file(load_settings())
    print(f"wrote the Dagster instance's variables to {path}")


if __name__ == "__main__":
    main()
