"""The database password stays out of everything Dagster keeps: run config, the job snapshot the UI
shows (resource config included), materialization metadata, event logs, compute logs, the step outputs its
IO manager pickled (the crawl's run value handed from step to step among them), and the crawl summary.

A small real materialization (the sandbox's Travel category, http mode) runs in process on an on-disk Dagster
instance, with a DATABASE_URL that carries a password; then every file of the instance and every record is
searched for that password. A control run that hands the URL over as plain resource config must be caught
by the same search, so the search cannot pass by looking in the wrong place.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import dagster as dg
import pytest
from dagster._serdes import serialize_value

from book_assets.defs.crawl.assets import crawl
from book_assets.defs.resources import (
    DatabaseResource,
    FetcherResource,
    SchedulingResource,
    SiteResource,
    default_resources,
)
from book_assets.sandbox.server import SandboxServer

pytestmark = pytest.mark.slow


def _password(database_url: str) -> str:
    password = unquote(urlsplit(database_url).password or "")
    if not password:
        pytest.skip("the test database URL has no password to look for")
    return password


def _records(instance: dg.DagsterInstance) -> list[str]:
    """Every run Dagster stored, with its config, tags, job and plan snapshots and its whole event log."""
    parts = []
    for record in instance.get_run_records():
        run = record.dagster_run
        parts += [serialize_value(run), repr(run.run_config), repr(run.tags)]
        if run.job_snapshot_id:
            parts.append(serialize_value(instance.get_job_snapshot(run.job_snapshot_id)))
        if run.execution_plan_snapshot_id:
            parts.append(serialize_value(instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)))
        parts += [serialize_value(entry) for entry in instance.all_logs(run.run_id)]
    return parts


def _files(instance_dir: Path) -> list[str]:
    """Every file of the instance: sqlite storages, the compute logs (stdout/stderr of every step) and the step
    outputs (``storage/<run id>/<step>/<output>``, pickled by the default filesystem IO manager)."""
    return [p.read_bytes().decode("utf-8", errors="replace") for p in instance_dir.rglob("*") if p.is_file()]


def _materialize(resources: dict[str, object], instance_dir: Path) -> tuple[dg.ExecuteInProcessResult, str]:
    """Materialize the two crawl assets on an on-disk instance; the result and all that Dagster kept."""
    instance_dir.mkdir(parents=True, exist_ok=True)
    with dg.DagsterInstance.local_temp(tempdir=str(instance_dir)) as instance:
        result = dg.materialize([crawl], instance=instance, resources=resources)
        kept = [repr(result.dagster_run.run_config), *_records(instance)]
    return result, "\n".join([*kept, *_files(instance_dir)])


def _sandbox_overrides(sandbox: SandboxServer, data_dir: Path) -> dict[str, object]:
    return {
        "site": SiteResource(base_url=f"{sandbox.url}/", allowed_domains=[sandbox.host], categories=["Travel"]),
        "fetcher": FetcherResource(fetch_mode="http", workers=1, concurrency=4),
        "scheduling": SchedulingResource(data_dir=str(data_dir)),
    }


def test_database_password_never_appears_in_dagster_records_logs_or_summary(
    database_url: str,
    sandbox: SandboxServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    password = _password(database_url)
    monkeypatch.setenv("DATABASE_URL", database_url)
    resources = {
        **default_resources(),  # the code location's, as the demo's and every launched run use them
        **_sandbox_overrides(sandbox, tmp_path),
    }
    result, kept = _materialize(resources, tmp_path / "dagster")
    assert result.success
    outputs = {p.parent.name for p in (tmp_path / "dagster" / "storage").rglob("*") if p.is_file()}
    assert "crawl.seed_queue" in outputs  # the run value handed on is among the files searched
    metadata = {
        str(event.asset_key): event.step_materialization_data.materialization.metadata
        for event in result.get_asset_materialization_events()
    }
    assert metadata["AssetKey(['book_details'])"]["books_new"].value == 11  # the run really crawled
    output = capfd.readouterr()
    kept += "\n".join([repr(metadata), output.out, output.err])
    assert password not in kept
    assert password not in unquote(kept)


def test_password_search_finds_a_url_handed_over_as_plain_resource_config(
    database_url: str, sandbox: SandboxServer, tmp_path: Path
) -> None:
    password = _password(database_url)
    resources = {"database": DatabaseResource(url=database_url), **_sandbox_overrides(sandbox, tmp_path)}
    result, kept = _materialize(resources, tmp_path / "dagster")
    assert result.success
    assert password in kept
