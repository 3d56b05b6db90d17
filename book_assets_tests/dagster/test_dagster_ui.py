"""The Dagster UI in a real browser: the lineage shows the five assets, runs launched through the
webserver's GraphQL API materialize them (the crawl, then today's partition of the publishing job), the
snapshot's page shows its day partitions and the crawl's its freshness policy.

Set-up, chosen to keep the test isolated and quick:

- ``dagster-webserver`` runs as a subprocess on a free port on 127.0.0.1, loading the project's
  ``workspace.yaml``, with a temporary ``DAGSTER_HOME`` whose ``dagster.yaml`` keeps Dagster's own storage in
  SQLite files in that folder (the pipeline's data still goes to the PostgreSQL test database) and uses the
  default run coordinator, so a launched run starts without a daemon.
- The code location reads its settings from the environment: the test database, the sandbox's Travel
  category (11 books) as the start page, plain-HTTP fetching, no politeness delay, a 5-book snapshot.
- Chromium (Debian's, through Playwright) opens the global asset lineage; the first visit to a fresh
  instance shows a community modal, skipped when present.

The screenshot goes to ``artifacts/dagster-lineage.png``; with ``BOOK_PIPELINE_DOCS_SCREENSHOTS=1`` it is
also written to ``docs/lineage.png`` (the README's picture).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from book_assets.db.connection import Database
from book_assets.db.embedded import free_port
from book_assets.sandbox.server import SandboxServer
from book_assets.scraper.chromium import CHROMIUM_ARGS, find_chromium
from book_assets.settings import PROJECT_ROOT
from book_assets.store.books import book_counts

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ASSETS = ("listing_discovery", "book_details", "category_balanced_snapshot", "book_changes", "raw_archive")
DAGSTER_YAML = """\
# Test instance: Dagster's own storage in SQLite files under this DAGSTER_HOME; runs start at once.
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""
LAUNCH_RUN = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}
"""
RUN_STATUS = """
query Status($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run { status } } }
"""


@pytest.fixture
def webserver(tmp_path: Path, database_url: str, db: Database, sandbox: SandboxServer) -> Iterator[str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DATABASE_URL": database_url,
        "BOOK_PIPELINE_BASE_URL": sandbox.url_for("/catalogue/category/books/travel_2/index.html"),
        "BOOK_PIPELINE_FETCH_MODE": "http",
        "BOOK_PIPELINE_RATE": "0",
        "BOOK_PIPELINE_WORKERS": "1",
        "BOOK_PIPELINE_SNAPSHOT_BUDGET": "5",
        "BOOK_PIPELINE_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("BOOK_PIPELINE_ALLOWED_DOMAINS", None)
    log = (tmp_path / "webserver.log").open("w")
    command = [str(Path(sys.executable).parent / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(
        [*command, "-w", str(PROJECT_ROOT / "workspace.yaml")],
        cwd=home,  # not the project folder: its .env (the project's instance) would override DAGSTER_HOME
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the code server and run workers stop with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"dagster-webserver exited: {(tmp_path / 'webserver.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("dagster-webserver did not start within 120s")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def graphql(url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables}, timeout=60)
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body["errors"]
    data: dict[str, Any] = body["data"]
    return data


def wait_for_location(url: str, timeout_s: float = 120) -> None:
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entries = graphql(url, query, {})["workspaceOrError"]["locationEntries"]
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            return
        time.sleep(0.25)
    pytest.fail("code location did not load")


def launch(url: str, job: str, partition: str | None = None) -> str:
    tags = [{"key": "dagster/partition", "value": partition}] if partition else []
    params = {
        "selector": {
            "repositoryLocationName": "book_assets",
            "repositoryName": "__repository__",
            "jobName": job,
        },
        "runConfigData": {},
        "executionMetadata": {"tags": tags},
    }
    result = graphql(url, LAUNCH_RUN, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return str(result["run"]["runId"])


def wait_for_run(url: str, run_id: str, timeout_s: float = 600) -> str:
    deadline = time.monotonic() + timeout_s
    status = "?"
    while time.monotonic() < deadline:
        status = str(graphql(url, RUN_STATUS, {"runId": run_id})["runOrError"]["status"])
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(0.25)
    pytest.fail(f"run {run_id} still {status} after {timeout_s}s")


def open_lineage(page: Page, url: str, *, arrange: bool) -> None:
    """The global asset lineage; with ``arrange``, hide the side panels and expand every group (the UI keeps
    these choices in the browser's local storage, so later visits look the same)."""
    page.goto(f"{url}/asset-groups", wait_until="networkidle")
    page.locator("foreignObject").first.wait_for(timeout=30000)
    if arrange:
        # Cosmetic, for the screenshot: the UI's panels and menus differ with its stored state, so each step
        # is best effort; the assertions that follow look for the assets themselves.
        steps: list[Callable[[], None]] = [
            lambda: page.get_by_role("button", name="Hide navigation").click(timeout=3000),
            lambda: page.locator('button:has([aria-label="panel_show_right"])').last.click(timeout=3000),
            lambda: page.locator('button:has([aria-label="settings"])').last.click(timeout=3000),
            lambda: page.get_by_role("menuitem", name="Expand all groups").click(timeout=3000),
        ]
        for step in steps:
            with contextlib.suppress(PlaywrightTimeoutError):
                step()
        page.keyboard.press("Escape")
    page.wait_for_timeout(1500)


def test_the_catalog_lists_the_books_assets_and_launched_runs_materialize_them(
    webserver: str, db: Database, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    wait_for_location(webserver)
    # The run starts first and works while the browser opens the lineage (its run worker loads the code
    # location for seconds; nothing on the lineage page waits for it).
    today = datetime.now(UTC).date().isoformat()
    run_id = launch(webserver, "full_refresh_job")
    artifacts = PROJECT_ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            page.set_default_timeout(20000)
            # The community modal shows once on a fresh instance, whenever its query returns: skip it
            # whenever it is in the way.
            page.add_locator_handler(page.get_by_role("button", name="Skip"), lambda skip: skip.click())
            # The catalog lists every asset; the lineage draws only the nodes in its viewport, and the code
            # location holds every catalogue's assets.
            page.goto(f"{webserver}/assets", wait_until="networkidle")
            for name in ASSETS:
                page.get_by_text(name, exact=True).first.wait_for(timeout=15000)
            open_lineage(page, webserver, arrange=True)
            graph = page.locator("foreignObject")
            graph.get_by_text("book_details", exact=True).first.wait_for(timeout=15000)

            assert wait_for_run(webserver, run_id) == "SUCCESS", (tmp_path / "webserver.log").read_text()[-3000:]
            # The day's publishing (what the automation sensor requests after a crawl; no daemon here).
            publish = launch(webserver, "publish_job", today)
            assert wait_for_run(webserver, publish) == "SUCCESS", (tmp_path / "webserver.log").read_text()[-3000:]

            page.goto(f"{webserver}/runs/{run_id}", wait_until="networkidle")
            page.get_by_text("Success").first.wait_for(timeout=30000)

            page.set_viewport_size({"width": 1600, "height": 1300})  # the five assets and their groups, whole
            open_lineage(page, webserver, arrange=False)
            graph.get_by_text("book_details", exact=True).first.wait_for(timeout=15000)
            page.get_by_text("Materialized").first.wait_for(timeout=30000)
            page.wait_for_timeout(1000)
            screenshot = artifacts / "dagster-lineage.png"
            page.screenshot(path=str(screenshot))
            if os.environ.get("BOOK_PIPELINE_DOCS_SCREENSHOTS") == "1":
                (PROJECT_ROOT / "docs").mkdir(exist_ok=True)
                shutil.copyfile(screenshot, PROJECT_ROOT / "docs" / "lineage.png")

            # The snapshot's partitions: one per day, today's materialized by the run.
            page.goto(f"{webserver}/assets/category_balanced_snapshot?view=partitions", wait_until="networkidle")
            page.get_by_text(today).first.wait_for(timeout=30000)
            page.screenshot(path=str(artifacts / "dagster-snapshot-partitions.png"))
            # The crawl's overview names its freshness policy (the schedule's cron).
            page.goto(f"{webserver}/assets/book_details?view=overview", wait_until="networkidle")
            page.get_by_text("Freshness").first.wait_for(timeout=30000)
            page.screenshot(path=str(artifacts / "dagster-snapshot-freshness.png"))
        finally:
            browser.close()

    counts = book_counts(db)
    assert (counts["total"], counts["unique_urls"], counts["with_html"]) == (11, 11, 11)
    snapshot = db.query(
        "SELECT snapshot_day::text AS day, count(*)::int AS n FROM category_balanced_snapshot GROUP BY 1"
    )
    assert snapshot == [{"day": today, "n": 5}]
