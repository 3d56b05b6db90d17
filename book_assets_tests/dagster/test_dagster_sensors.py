"""failed_tasks_sensor: fires when enough pages failing now are due for a requeue (transient failures, their
delay passed, requeues left), once per batch, never for permanent failures; the requeue job works.
alert_sensor: posts failed runs, failed checks and overdue assets to a real local HTTP receiver (webhook or Slack
API), silent unconfigured; an alert refused for ticks on end arrives when the receiver accepts, once, in order.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypedDict
from urllib.parse import parse_qs

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState, FreshnessStateChange

from book_assets.alerts import (
    DELIVERY_ATTEMPTS,
    SLACK_API_ENV,
    SLACK_CHANNEL_ENV,
    SLACK_TOKEN_ENV,
    WEBHOOK_ENV,
    AlertNotDelivered,
)
from book_assets.crawl.config import DETAIL, LISTING, TASK_TYPES
from book_assets.db.connection import Database
from book_assets.defs.crawl.jobs import requeue_failed_tasks
from book_assets.defs.crawl.sensors import alert_sensor, build_failed_tasks_sensor, run_failure_summary
from book_assets.defs.resources import DatabaseResource
from book_assets.queue import TaskQueue
from book_assets.queue.failures import RequeuePolicy, failing_now, requeue_due
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site

THRESHOLD = 3
#: The sensor's policy in these tests: 5xx and timeouts can change, two requeues a page, the first an hour
#: after the last attempt (the second four hours).
POLICY = RequeuePolicy.of({"http_5xx", "timeout"}, max_requeues=2, backoff_s=3600)


def url(i: int) -> str:
    return f"http://sandbox.test/catalogue/book_{i}/index.html"


def fail_tasks(
    db: Database,
    n: int,
    *,
    task_type: str = DETAIL,
    kind: str = "http_5xx",
    start: int = 0,
    hours_ago: float = 2.0,
) -> None:
    """Enqueue ``n`` tasks of one attempt each and fail them for good with ``kind`` through the queue's own
    API (retryable when the kind can change: its attempts run out), their last attempt ``hours_ago``."""
    queue = TaskQueue(db, task_types=sorted({*TASK_TYPES, task_type}), default_interval_s=0)
    for i in range(start, start + n):
        queue.enqueue(task_type, {"url": url(i)}, max_attempts=1)
    claimed = queue.claim("test-worker", n, task_types=[task_type])
    assert len(claimed) == n
    for task in claimed.tasks:
        assert queue.fail(task, f"{kind}: failed", kind=kind, retryable=kind in POLICY.kinds) == "dead"
    attempted_ago(db, [t.id for t in claimed.tasks], hours_ago)


def attempted_ago(db: Database, ids: list[int], hours: float) -> None:
    """Move the tasks' last claim ``hours`` into the past: the time the requeue delay counts from."""
    db.query("UPDATE tasks SET started_at = now() - make_interval(secs => %s) WHERE id = ANY(%s)", (hours * 3600, ids))


def fail_again(db: Database, n: int) -> list[int]:
    """Claim the pending (requeued) tasks and fail them again with a 5xx; their ids."""
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    tasks = queue.claim("test-worker", n, task_types=[DETAIL]).tasks
    for task in tasks:
        queue.fail(task, "http_5xx: failed", kind="http_5xx", retryable=True)
    return [t.id for t in tasks]


def failed_count(db: Database) -> int:
    return TaskQueue(db, task_types=TASK_TYPES).stats().total("failed")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def evaluate(
    database_url: str, instance: dg.DagsterInstance, cursor: str | None, site: Site | None = None
) -> dg.SensorResult:
    sensor = build_failed_tasks_sensor(THRESHOLD, POLICY, site=site)
    context = dg.build_sensor_context(
        cursor=cursor, instance=instance, resources={"database": DatabaseResource(url=database_url)}
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def skipped(result: dg.SensorResult) -> str:
    assert not result.run_requests
    return skip_message(result)


def skip_message(result: dg.SensorResult) -> str:
    assert result.skip_reason is not None
    return result.skip_reason.skip_message or ""


def test_below_threshold_skips_with_the_pages_failing_now(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD - 1)
    assert "2 page(s) failing now: 2 due for a requeue" in skipped(evaluate(database_url, instance, None))


def test_permanent_failures_never_request_a_requeue(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, 10, kind="http_404", hours_ago=100)
    fail_tasks(db, 5, kind="not_a_book_page", start=50, hours_ago=100)
    assert "15 page(s) failing now: 0 due for a requeue, 0 waiting for their next, 15 permanent" in skipped(
        evaluate(database_url, instance, None)
    )


def test_due_transient_failures_request_one_requeue_run(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD)
    fail_tasks(db, 10, kind="http_404", start=50)  # alongside, and left alone
    first = evaluate(database_url, instance, None)
    assert first.run_requests and len(first.run_requests) == 1
    run_key = first.run_requests[0].run_key
    assert run_key and first.run_requests[0].tags["book-pipeline/failing-pages"] == str(THRESHOLD)

    assert "already requested" in skipped(evaluate(database_url, instance, first.cursor))
    # A lost cursor still yields the same run key, so Dagster deduplicates the run.
    assert (evaluate(database_url, instance, None).run_requests or [])[0].run_key == run_key


def test_a_failure_inside_its_requeue_delay_waits(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD, hours_ago=0.5)  # the first requeue comes an hour after the last attempt
    assert "3 page(s) failing now: 0 due for a requeue, 3 waiting for their next" in skipped(
        evaluate(database_url, instance, None)
    )


def test_a_page_that_fails_again_is_requeued_later_each_time_and_then_left(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD)
    assert requeue_due(db, POLICY) == THRESHOLD
    ids = fail_again(db, THRESHOLD)
    attempted_ago(db, ids, 2)  # past the first delay (1 h), not the second (4 h)
    assert "0 due for a requeue, 3 waiting" in skipped(evaluate(database_url, instance, None))
    assert requeue_due(db, POLICY) == 0

    attempted_ago(db, ids, 5)
    second = evaluate(database_url, instance, None)
    assert second.run_requests
    assert requeue_due(db, POLICY) == THRESHOLD
    attempted_ago(db, fail_again(db, THRESHOLD), 1000)
    # Two requeues were the policy's: the pages stay failed, for an operator (requeue_failed_tasks).
    assert "3 page(s) failing now: 0 due for a requeue, 0 waiting for their next, 3 permanent or out of requeues" in (
        skipped(evaluate(database_url, instance, None))
    )
    assert requeue_due(db, POLICY) == 0


def test_a_page_stored_by_a_later_crawl_is_not_failing(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    fail_tasks(db, THRESHOLD)
    queue = TaskQueue(db, task_types=TASK_TYPES, default_interval_s=0)
    for i in range(THRESHOLD):  # the next day's crawl enqueues the same pages and stores them
        queue.enqueue(DETAIL, {"url": url(i)})
    queue.complete_many(queue.claim("test-worker", THRESHOLD, task_types=[DETAIL]).tasks)
    assert failing_now(db, POLICY).failing == 0
    assert "0 page(s) failing now" in skipped(evaluate(database_url, instance, None))
    assert failed_count(db) == THRESHOLD  # the old rows are history until the retention prunes them


def test_each_catalogues_sensor_counts_and_requeues_its_own_pages_only(
    db: Database, database_url: str, instance: dg.DagsterInstance
) -> None:
    quotes = site_named("quotes")
    sensor = build_failed_tasks_sensor(THRESHOLD, POLICY, site=quotes)
    assert (sensor.name, sensor.job_name) == ("quotes_failed_tasks_sensor", "quotes_recrawl_failed_job")
    fail_tasks(db, THRESHOLD, task_type="author", start=100)  # quotes' author pages
    assert "0 page(s) failing now" in skipped(evaluate(database_url, instance, None))  # the books' sensor
    requested = evaluate(database_url, instance, None, quotes)
    assert requested.run_requests is not None and len(requested.run_requests) == 1
    fail_tasks(db, THRESHOLD)  # books' detail pages
    quotes_kinds = [kind.name for kind in quotes.page_kinds]
    assert requeue_due(db, POLICY, quotes_kinds) == THRESHOLD
    assert failing_now(db, POLICY, TASK_TYPES).due == THRESHOLD  # the books' stay for their own retry
    assert failing_now(db, POLICY, quotes_kinds).failing == 0


def test_requeue_job_moves_failed_tasks_back_to_pending(db: Database, database_url: str) -> None:
    fail_tasks(db, 2, task_type=DETAIL, kind="timeout")
    fail_tasks(db, 1, task_type=LISTING, kind="http_404", start=50)
    result = requeue_failed_tasks.execute_in_process(
        run_config={"ops": {"requeue_failed": {"config": {"error_like": "timeout%"}}}},
        resources={"database": DatabaseResource(url=database_url)},
    )
    assert result.success
    assert result.output_for_node("requeue_failed") == 2
    assert failed_count(db) == 1

    everything = requeue_failed_tasks.execute_in_process(resources={"database": DatabaseResource(url=database_url)})
    assert everything.output_for_node("requeue_failed") == 1
    assert failed_count(db) == 0


def doomed_run(instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """A real failed run of ``doomed_job``, whose one op raises."""

    @dg.op
    def fetch_everything() -> None:
        raise RuntimeError("database went away")

    @dg.job(tags={"book-pipeline/crawl": "true"})
    def doomed_job() -> None:
        fetch_everything()

    result = doomed_job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    return result


def failure_context(
    instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult, sensor_name: str
) -> dg.RunFailureSensorContext:
    """The context a run-failure sensor gets for the failed run ``result``."""
    return dg.build_run_status_sensor_context(
        sensor_name=sensor_name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=result.get_run_failure_event(),
    ).for_run_failure()


def test_run_failure_summary_logs_the_job_step_and_error(
    instance: dg.DagsterInstance, capfd: pytest.CaptureFixture[str]
) -> None:
    context = failure_context(instance, doomed_run(instance), "run_failure_summary")
    capfd.readouterr()
    run_failure_summary(context)
    summary = capfd.readouterr().err  # the sensor's logger is Dagster's, which writes to stderr
    assert "doomed_job failed in fetch_everything" in summary
    assert "book-pipeline/crawl=true" in summary


class Received(TypedDict):
    """One POST a :class:`Receiver` answered."""

    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A real HTTP server on 127.0.0.1 that records every POST (path, headers, body) and answers ``status``."""

    def __init__(self, status: int = 200, reply: bytes = b"ok", *, refuse_first: int = 0) -> None:
        """``refuse_first``: answer that many POSTs 503 before answering ``status`` (which a test may change)."""
        self.requests: list[Received] = []
        self.status = status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(503 if len(receiver.requests) <= refuse_first else receiver.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # A short poll: shutdown() waits for the serving loop to look up, every 0.5 s by default.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def no_alert_destination(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (WEBHOOK_ENV, SLACK_TOKEN_ENV, SLACK_CHANNEL_ENV, SLACK_API_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def event_instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """An instance whose event log is one store, as the project's PostgreSQL one is (the test default shards
    it by run, which cursors over all runs' events cannot read)."""
    storage = {
        "module": "dagster._core.storage.event_log",
        "class": "ConsolidatedSqliteEventLogStorage",
        "config": {"base_dir": str(tmp_path / "events")},
    }
    with dg.instance_for_test(overrides={"event_log_storage": storage}) as inst:
        yield inst


def evaluate_alert(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    """One tick of ``alert_sensor`` from ``cursor``."""
    result = alert_sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
    assert isinstance(result, dg.SensorResult)
    return result


def alerted_doomed_run(instance: dg.DagsterInstance) -> tuple[str, dg.SensorResult]:
    """A failed run of ``doomed_job`` and the ``alert_sensor`` tick after it: the run's id and the tick."""
    start = evaluate_alert(instance, None)  # a first tick watches from now on: no history replayed
    run_id = doomed_run(instance).run_id
    return run_id, evaluate_alert(instance, start.cursor)


@pytest.mark.usefixtures("no_alert_destination")
def test_alert_posts_the_failed_run_to_the_webhook(
    event_instance: dg.DagsterInstance, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hooks/book-pipeline")
    run_id, _ = alerted_doomed_run(event_instance)
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert request["path"] == "/hooks/book-pipeline"
    payload = json.loads(request["body"])
    assert payload["job_name"] == "doomed_job" and payload["steps"] == ["fetch_everything"]
    assert payload["run_id"] == run_id and payload["severity"] == "error"
    assert "database went away" in payload["error"]
    assert (
        payload["text"].startswith("book-pipeline: run ") and "doomed_job failed in fetch_everything" in payload["text"]
    )
    assert payload["tags"]["book-pipeline/crawl"] == "true"
    link = f"http://127.0.0.1:3000/runs/{run_id}"  # the webserver_url default
    assert payload["run_url"] == link and payload["text"].endswith(f"({link})")


@pytest.mark.usefixtures("no_alert_destination")
def test_an_alert_refused_twice_is_delivered_within_the_tick_with_a_link_to_the_run(
    event_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = Receiver(refuse_first=2)
    try:
        monkeypatch.setenv(WEBHOOK_ENV, f"{flaky.url}/hook")
        monkeypatch.setenv("BOOK_PIPELINE_WEBSERVER_URL", "https://dagster.example.org/")
        run_id, tick = alerted_doomed_run(event_instance)  # the tick succeeds: the third delivery was taken
    finally:
        flaky.close()
    assert len(flaky.requests) == 3 and "1 alert(s) sent" in skip_message(tick)
    payloads = [json.loads(r["body"]) for r in flaky.requests]
    assert all(p == payloads[0] for p in payloads)  # the same alert each time
    assert payloads[0]["run_url"] == f"https://dagster.example.org/runs/{run_id}"


@pytest.mark.usefixtures("no_alert_destination")
def test_alert_posts_to_slack_through_its_api(
    event_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    slack = Receiver(reply=b'{"ok": true, "channel": "C1", "ts": "1.0"}')
    try:
        monkeypatch.setenv(SLACK_TOKEN_ENV, "xoxb-test-token")
        monkeypatch.setenv(SLACK_CHANNEL_ENV, "#book-pipeline")
        monkeypatch.setenv(SLACK_API_ENV, f"{slack.url}/api/")
        alerted_doomed_run(event_instance)
    finally:
        slack.close()
    assert len(slack.requests) == 1
    request = slack.requests[0]
    assert request["path"] == "/api/chat.postMessage"
    assert request["headers"]["Authorization"] == "Bearer xoxb-test-token"
    body = request["body"].decode()
    form = json.loads(body) if body.startswith("{") else {k: v[0] for k, v in parse_qs(body).items()}
    assert form["channel"] == "#book-pipeline" and "doomed_job failed in fetch_everything" in form["text"]


@pytest.mark.usefixtures("no_alert_destination")
def test_alert_is_silent_when_no_destination_is_configured(
    event_instance: dg.DagsterInstance, receiver: Receiver
) -> None:
    _, tick = alerted_doomed_run(event_instance)
    assert receiver.requests == [] and "0 alert(s) sent" in skip_message(tick)


@pytest.mark.usefixtures("no_alert_destination")
@pytest.mark.parametrize(
    ("status", "deliveries"),
    [(500, DELIVERY_ATTEMPTS), (404, 1)],  # a moment's refusal is tried again within the tick; a wrong hook is not
)
def test_an_alert_the_receiver_keeps_refusing_fails_the_tick_and_keeps_the_cursor(
    event_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, status: int, deliveries: int
) -> None:
    refusing = Receiver(status=status)
    try:
        monkeypatch.setenv(WEBHOOK_ENV, f"{refusing.url}/hook")
        start = evaluate_alert(event_instance, None)
        doomed_run(event_instance)
        with pytest.raises(AlertNotDelivered, match=f"HTTP {status}"):
            evaluate_alert(event_instance, start.cursor)  # the daemon keeps the cursor of a failed tick
        assert len(refusing.requests) == deliveries
        with pytest.raises(AlertNotDelivered, match=f"HTTP {status}"):
            evaluate_alert(event_instance, start.cursor)
    finally:
        refusing.close()
    assert len(refusing.requests) == 2 * deliveries  # tried again each tick


@pytest.mark.usefixtures("no_alert_destination")
def test_an_alert_one_destination_took_is_not_sent_it_again_while_the_other_refuses(
    event_instance: dg.DagsterInstance, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    slack = Receiver(status=500, reply=b'{"ok": true, "channel": "C1", "ts": "1.0"}')
    try:
        monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hook")
        monkeypatch.setenv(SLACK_TOKEN_ENV, "xoxb-test-token")
        monkeypatch.setenv(SLACK_CHANNEL_ENV, "#book-pipeline")
        monkeypatch.setenv(SLACK_API_ENV, f"{slack.url}/api/")
        run_id, part_sent = alerted_doomed_run(event_instance)  # the webhook takes it, Slack refuses
        slack.status = 200
        slack_delivered = evaluate_alert(event_instance, part_sent.cursor)
    finally:
        slack.close()
    assert [json.loads(r["body"])["run_id"] for r in receiver.requests] == [run_id]
    assert len(slack.requests) == DELIVERY_ATTEMPTS + 1
    assert part_sent.cursor != slack_delivered.cursor and "1 alert(s) sent" in skip_message(slack_delivered)


def failed_check_run(
    instance: dg.DagsterInstance,
    *,
    blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.ExecuteInProcessResult:
    """A real run of an asset whose check fails: the run succeeds unless the check blocks at severity ERROR."""

    @dg.asset
    def shelf() -> int:
        return 3

    @dg.asset_check(asset=shelf, blocking=blocking)
    def shelf_is_full() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=False, severity=severity, description="3 books on a shelf of 10\nmore detail")

    result = dg.materialize([shelf, shelf_is_full], instance=instance, raise_on_error=False)
    assert result.success is not (blocking and severity == dg.AssetCheckSeverity.ERROR)
    return result


@pytest.mark.usefixtures("no_alert_destination")
def test_a_failed_check_is_alerted_once_and_an_undelivered_alert_waits_for_the_next_tick(
    event_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = evaluate_alert(event_instance, None)  # a first tick watches from now on: no history replayed
    down = Receiver(status=500)
    try:
        monkeypatch.setenv(WEBHOOK_ENV, f"{down.url}/hook")
        run_id = failed_check_run(event_instance).run_id  # the run succeeds: no run failure reports it
        with pytest.raises(AlertNotDelivered):
            evaluate_alert(event_instance, start.cursor)  # the daemon keeps the cursor of a failed tick
    finally:
        down.close()
    assert len(down.requests) == DELIVERY_ATTEMPTS

    receiver = Receiver()
    try:
        monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hook")
        delivered = evaluate_alert(event_instance, start.cursor)
        again = evaluate_alert(event_instance, delivered.cursor)
    finally:
        receiver.close()
    assert len(receiver.requests) == 1 and delivered.cursor != start.cursor
    payload = json.loads(receiver.requests[0]["body"])
    assert (payload["asset"], payload["check"], payload["run_id"]) == ("shelf", "shelf_is_full", run_id)
    assert payload["severity"] == "error"
    assert payload["text"].startswith("book-pipeline: check shelf_is_full on shelf failed (error) in run ")
    assert "3 books on a shelf of 10" in payload["text"] and payload["run_url"].endswith(f"/runs/{run_id}")
    assert again.cursor == delivered.cursor and "0 alert(s) sent" in skip_message(again)


@pytest.mark.usefixtures("no_alert_destination")
@pytest.mark.parametrize("blocking", [False, True])  # a WARN check never fails its run, blocking or not
def test_a_failed_warn_check_is_alerted_as_a_warning(
    event_instance: dg.DagsterInstance, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, blocking: bool
) -> None:
    monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hook")
    start = evaluate_alert(event_instance, None)
    run_id = failed_check_run(event_instance, blocking=blocking, severity=dg.AssetCheckSeverity.WARN).run_id
    evaluate_alert(event_instance, start.cursor)
    [alert] = [json.loads(r["body"]) for r in receiver.requests]
    assert (alert["check"], alert["run_id"], alert["severity"]) == ("shelf_is_full", run_id, "warn")
    assert alert["text"].startswith("book-pipeline: check shelf_is_full on shelf failed (warn) in run ")


@pytest.mark.usefixtures("no_alert_destination")
def test_a_failed_blocking_check_is_alerted_once_as_the_failed_run_that_names_it(
    event_instance: dg.DagsterInstance, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hook")
    start = evaluate_alert(event_instance, None)
    result = failed_check_run(event_instance, blocking=True)
    assert "1 alert(s) sent" in skip_message(evaluate_alert(event_instance, start.cursor))
    [alert] = [json.loads(r["body"]) for r in receiver.requests]
    assert "shelf_is_full" in alert["text"] and alert["run_id"] == result.run_id and "check" not in alert


@pytest.mark.usefixtures("no_alert_destination")
def test_an_asset_whose_freshness_policy_fails_is_alerted_once_with_a_link_to_it(
    event_instance: dg.DagsterInstance, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hook")
    start = evaluate_alert(event_instance, None)
    # What the daemon's freshness evaluation records as book_details nears, then passes, its window.
    for previous, new in ((FreshnessState.PASS, FreshnessState.WARN), (FreshnessState.WARN, FreshnessState.FAIL)):
        event_instance._report_runless_asset_event(
            FreshnessStateChange(
                key=dg.AssetKey("book_details"), previous_state=previous, new_state=new, state_change_timestamp=0.0
            )
        )
    first = evaluate_alert(event_instance, start.cursor)
    again = evaluate_alert(event_instance, first.cursor)
    [alert] = [json.loads(r["body"]) for r in receiver.requests]
    assert alert["asset"] == "book_details" and alert["previous_state"] == "WARN"
    assert alert["text"].startswith("book-pipeline: book_details is overdue: its freshness policy failed")
    assert alert["asset_url"] == "http://127.0.0.1:3000/assets/book_details"
    assert "0 alert(s) sent" in skip_message(again)


def alert_sensors() -> list[dg.SensorDefinition]:
    """The code location's sensors that post alerts."""
    from book_assets.definitions import build_definitions

    return [s for s in build_definitions().get_repository_def().sensor_defs if "alert" in s.name]


def tick(sensors: list[dg.SensorDefinition], instance: dg.DagsterInstance, cursors: dict[str, str | None]) -> None:
    """One daemon tick of each sensor: its evaluation (the call the daemon's code server makes), its new cursor
    kept; a tick that raises fails, and the daemon keeps the cursor it had."""
    for sensor in sensors:
        with dg.build_sensor_context(instance=instance, cursor=cursors.get(sensor.name)) as context:
            try:
                cursors[sensor.name] = sensor.evaluate_tick(context).cursor
            except Exception:  # as the code server does: any error fails the tick
                continue


def check_run(instance: dg.DagsterInstance, name: str, severity: dg.AssetCheckSeverity) -> str:
    """A run whose non-blocking check ``name`` fails with ``severity``: the run succeeds; its id."""

    @dg.asset(name=f"{name}_shelf")
    def shelf() -> int:
        return 3

    @dg.asset_check(asset=shelf, name=name)
    def failing_check() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=False, severity=severity, description=f"{name} failed")

    result = dg.materialize([shelf, failing_check], instance=instance)
    assert result.success
    return result.run_id


def failed_run(instance: dg.DagsterInstance, job_name: str) -> str:
    """A run of ``job_name`` whose one op raises; its id."""

    @dg.op(name=f"{job_name}_op")
    def explode() -> None:
        raise RuntimeError(f"{job_name} went away")

    @dg.job(name=job_name)
    def job() -> None:
        explode()

    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    return result.run_id


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: a connection there is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/hook"


@pytest.mark.usefixtures("no_alert_destination")
def test_alerts_refused_for_several_ticks_all_arrive_once_in_order_when_the_receiver_accepts(
    event_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    sensors, cursors = alert_sensors(), dict[str, str | None]()
    tick(sensors, event_instance, cursors)  # the first tick watches from now on
    receiver = Receiver(status=500)
    try:
        monkeypatch.setenv(WEBHOOK_ENV, closed_port_url())  # the receiver is down: connection refused
        expected = [failed_run(event_instance, "first_doomed_job")]
        tick(sensors, event_instance, cursors)
        expected.append(check_run(event_instance, "error_check", dg.AssetCheckSeverity.ERROR))
        tick(sensors, event_instance, cursors)
        monkeypatch.setenv(WEBHOOK_ENV, f"{receiver.url}/hook")  # up, answering 500
        expected.append(check_run(event_instance, "warn_check", dg.AssetCheckSeverity.WARN))
        expected.append(failed_run(event_instance, "second_doomed_job"))
        tick(sensors, event_instance, cursors)
        tick(sensors, event_instance, cursors)
        refused = len(receiver.requests)
        receiver.status = 200
        tick(sensors, event_instance, cursors)
        tick(sensors, event_instance, cursors)  # nothing left: nothing sent again
    finally:
        receiver.close()
    assert refused > 0
    accepted = [json.loads(r["body"]) for r in receiver.requests[refused:]]
    assert [a["run_id"] for a in accepted] == expected
    assert [a.get("job_name") for a in accepted][::3] == ["first_doomed_job", "second_doomed_job"]
    assert [a.get("severity") for a in accepted[1:3]] == ["error", "warn"]
