"""Sensors: requeue failed pages that can succeed when enough are due, summarize failed runs, alert on them.

``failed_tasks_sensor`` reads the pages failing now (:func:`book_assets.queue.failures.failing_now`: each
URL whose newest task failed, not every failed row ever written) under the settings' requeue policy. When at
least the threshold of them are *due* (a transient kind, requeues left, their delay passed) it requests
``recrawl_failed_job``, keyed by the due failures' watermark: a second tick, a lost cursor or a run still
queued cannot launch the same requeue twice. Permanent failures (404, robots.txt, not a book page) are never
due, and a page that fails again after a requeue is due again only after a longer delay, at most
``requeue_max`` times: no requeue storm. While a crawl run is queued or running (the full refresh, or the
requeue it launched) it waits, its cursor kept: one crawl of the catalogue at a time. Every catalogue has its
own (:func:`build_failed_tasks_sensor`: ``failed_tasks_sensor``, ``quotes_failed_tasks_sensor``), which counts
and requeues its own task types' failures, waits for its own catalogue's crawl runs and requests its own
``recrawl_failed_job``.

``alert_sensor`` posts one message per failed run, per failed check whose run succeeds nevertheless (a WARN
check, or an ERROR check that does not block: a failed blocking ERROR check fails its run, whose alert names
the check) and per asset whose freshness policy the daemon finds failing, to the destinations
:mod:`book_assets.alerts` reads from the environment (a webhook, Slack); nothing when none is configured. It
reads them from the event log behind a cursor that passes an alert only once delivered: a receiver that
refuses for hours loses nothing, and gets every alert once, in order, when it accepts again.

``drift_cleared_sensor`` lets a held day proceed once its drift is gone: the blocking check ``no_field_drift``
failed last, and the database no longer holds a drift of its crawl that no one accepted (``book-pipeline drift
accept`` recorded an acceptance, or ``reextract`` judged the crawl again and resolved it). It requests
``recheck_drift_job`` (the check alone), once per failed evaluation; when the check passes, the publishing
automation (:data:`book_assets.defs.catalog.PUBLISH_AUTOMATION`) sees the crawl's blocking checks passed and
publishes the day.

The threshold and the policy are settings, read (and validated) each time the code location loads
(:mod:`book_assets.defs.crawl.catalogue`).
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

# The freshness daemon's events (one per change of an asset's freshness state) are not exported by dagster.
from dagster._core.definitions.freshness import FreshnessState, FreshnessStateChange

from book_assets.alerts import (
    Alert,
    AlertDestinations,
    AlertNotDelivered,
    CheckFailureAlert,
    FreshnessAlert,
    RunFailureAlert,
    asset_url,
    run_url,
    send_alert,
)
from book_assets.defs.catalog import crawl_name
from book_assets.defs.crawl.jobs import NO_FIELD_DRIFT, crawl_jobs, recheck_drift_job
from book_assets.defs.crawl.observe import crawl_run_in_progress
from book_assets.defs.resources import DatabaseResource
from book_assets.queue.failures import RequeuePolicy, failing_now
from book_assets.settings import default, load_settings
from book_assets.sites.registry import site_named
from book_assets.sites.site import Site
from book_assets.store.drift import unaccepted_drift

if TYPE_CHECKING:  # the type of what DagsterInstance.get_latest_asset_check_evaluation_record returns, not exported
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecord


def build_failed_tasks_sensor(
    threshold: int, policy: RequeuePolicy, *, site: Site | None = None, minimum_interval_seconds: int = 60
) -> dg.SensorDefinition:
    """``site``'s ``failed_tasks_sensor`` (the default site's when None; ``quotes_failed_tasks_sensor``): request
    its ``recrawl_failed_job`` when at least ``threshold`` of its failing pages are due under ``policy``."""
    crawled = site or site_named(default("site"))
    kinds = tuple(kind.name for kind in crawled.page_kinds)
    job = crawl_jobs(crawled).recrawl_failed

    @dg.sensor(
        name=crawl_name(crawled.name, "failed_tasks_sensor"),
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Requeue {crawled.name}'s failed pages that can succeed when {threshold} or more are due "
        f"(transient failures, at most {policy.max_requeues} requeues a page, ever further apart).",
    )
    def failed_tasks_sensor(context: dg.SensorEvaluationContext, database: DatabaseResource) -> dg.SensorResult:
        running = crawl_run_in_progress(context.instance, crawled.name)
        if running is not None:
            reason = f"waiting for crawl run {running.run_id[:8]} ({running.job_name}, {running.status.value})"
            return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=context.cursor)
        with database.open(application_name="book-pipeline sensor") as db:
            failing = failing_now(db, policy, kinds)
        figure = (
            f"{failing.failing} page(s) failing now: {failing.due} due for a requeue, "
            f"{failing.requeueable - failing.due} waiting for their next, {failing.permanent} permanent "
            "or out of requeues"
        )
        run_key = f"requeue-failed-{failing.watermark()}"
        if failing.due < threshold:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"{figure}; threshold {threshold}"), cursor=run_key)
        if context.cursor == run_key:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(f"{figure}; their requeue was already requested"), cursor=run_key
            )
        context.log.info(f"{figure}: requesting {job.name}")
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key=run_key, tags={"book-pipeline/failing-pages": str(failing.due)})],
            cursor=run_key,
        )

    return failed_tasks_sensor


def failure_of(context: dg.RunFailureSensorContext) -> RunFailureAlert:
    """The failed run's job, failed steps, first line of the error and user tags."""
    return run_failure_of(context.instance, context.dagster_run, context.failure_event.message or "")


def run_failure_of(instance: dg.DagsterInstance, run: dg.DagsterRun, run_message: str) -> RunFailureAlert:
    """The alert for ``run``, failed with ``run_message``: its job, failed steps, first line of the error of
    the first failed step (the run's message when no step failed) and user tags."""
    records = instance.get_records_for_run(run_id=run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
    step_failures = [r.event_log_entry.dagster_event for r in records if r.event_log_entry.dagster_event]
    steps = [event.step_key for event in step_failures if event.step_key]
    # The first failed step's own error (Dagster's wrapper's innermost cause) says what happened; the run's
    # message only lists the steps.
    errors = [e.step_failure_data.error for e in step_failures if e.step_failure_data.error is not None]
    error = errors[0] if errors else None
    while error is not None and error.cause is not None:
        error = error.cause
    message = (error.message if error is not None else run_message).strip().splitlines()
    return RunFailureAlert(
        run_id=run.run_id,
        job_name=run.job_name,
        steps=steps,
        error=message[0] if message else "",
        tags={k: v for k, v in sorted(run.tags.items()) if not k.startswith(".dagster")},
        run_url=run_url(load_settings().webserver_url, run.run_id),
    )


@dg.run_failure_sensor(
    name="run_failure_summary",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Log a one-paragraph summary of every failed run of this code location.",
)
def run_failure_summary(context: dg.RunFailureSensorContext) -> None:
    failure = failure_of(context)
    context.log.error(f"{failure.text} (tags: {', '.join(f'{k}={v}' for k, v in failure.tags.items())})")


#: The events that may need an alert: failed runs, check evaluations and freshness state changes.
ALERT_EVENTS = (
    dg.DagsterEventType.RUN_FAILURE,
    dg.DagsterEventType.ASSET_CHECK_EVALUATION,
    dg.DagsterEventType.FRESHNESS_STATE_CHANGE,
)
#: Events read per tick, at most.
ALERT_BATCH = 100


@dataclass(frozen=True)
class AlertCursor:
    """Where ``alert_sensor`` stands: the storage id of the last event it is done with, and the destinations
    that already took the alert of the event after it (when another refused it), which are not sent it again.

    As a string: ``"<storage id>"``, or ``"<storage id>:<destination>,..."`` while the next alert is part-sent.
    """

    after: int
    delivered: tuple[str, ...] = ()

    @classmethod
    def parse(cls, cursor: str) -> "AlertCursor":
        after, _, delivered = cursor.partition(":")
        return cls(int(after), tuple(d for d in delivered.split(",") if d))

    def __str__(self) -> str:
        return f"{self.after}:{','.join(self.delivered)}" if self.delivered else str(self.after)


@dg.sensor(
    name="alert_sensor",
    # A failed run is alerted within about this long (a run-failure sensor's default interval).
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Post every failed run, every failed check whose run succeeds (WARN, or ERROR and not blocking) "
    "and every asset whose freshness policy fails to the alert webhook (BOOK_PIPELINE_ALERT_WEBHOOK_URL) or "
    "Slack (BOOK_PIPELINE_SLACK_TOKEN, BOOK_PIPELINE_SLACK_CHANNEL), oldest first, each once; an alert "
    "refused waits, and fails each tick, until it is delivered; silent when no destination is set.",
)
def alert_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Alerts for the events recorded since the cursor (an event-log storage id), oldest first.

    The cursor moves past an event only once its alert was delivered (or none was due), so an alert the
    receiver refuses is sent again next tick, for as long as it refuses, and the alerts after it wait: they
    arrive in order, each once. A tick that delivers nothing while an alert waits raises, so the sensor shows
    failed ticks in the UI until the receiver takes it; a tick that delivered some returns its cursor, and the
    next starts at the refused one. A first tick starts from the newest event: turning the sensor on does not
    replay the instance's history.
    """
    storage = context.instance.event_log_storage
    if context.cursor is None:
        newest = [
            r.storage_id
            for event_type in ALERT_EVENTS
            for r in storage.get_event_records(dg.EventRecordsFilter(event_type=event_type), limit=1, ascending=False)
        ]
        return dg.SensorResult(skip_reason="watching events from now on", cursor=str(max(newest, default=0)))
    cursor = AlertCursor.parse(context.cursor)
    records = sorted(
        (
            record
            for event_type in ALERT_EVENTS
            for record in storage.get_event_records(
                dg.EventRecordsFilter(event_type=event_type, after_cursor=cursor.after),
                limit=ALERT_BATCH,
                ascending=True,
            )
        ),
        key=lambda record: record.storage_id,
    )[:ALERT_BATCH]  # the first of each type's batch: none of a type is passed over
    destinations, webserver, sent = AlertDestinations.from_environment(), load_settings().webserver_url, 0
    for record in records:
        alert = alert_of(context.instance, record, webserver)
        if alert is not None and destinations.configured:
            try:
                send_alert(alert, destinations, delivered=cursor.delivered)
            except AlertNotDelivered as exc:  # the cursor stays before it: sent again next tick
                waiting = AlertCursor(cursor.after, exc.delivered)
                if waiting == AlertCursor.parse(context.cursor):
                    raise
                context.log.error(f"alert not delivered, sent again next tick: {exc}")
                return dg.SensorResult(
                    skip_reason=f"{sent} alert(s) sent; then not delivered: {exc}", cursor=str(waiting)
                )
            sent += 1
        cursor = AlertCursor(record.storage_id)
    return dg.SensorResult(skip_reason=f"{sent} alert(s) sent", cursor=str(cursor))


def alert_of(instance: dg.DagsterInstance, record: dg.EventLogRecord, webserver_url: str) -> Alert | None:
    """The alert an event calls for: a failed run, a failed check whose run succeeds nevertheless (a WARN, or
    an ERROR that does not block), or a freshness policy that now fails; None for anything else (a passed
    check, a failed blocking ERROR check, whose run fails and is alerted, a freshness state other than FAIL)."""
    entry = record.event_log_entry
    event = entry.dagster_event
    data = event.event_specific_data if event is not None else None
    if event is not None and event.event_type == dg.DagsterEventType.RUN_FAILURE:
        run = instance.get_run_by_id(entry.run_id)
        return run_failure_of(instance, run, entry.message or "") if run is not None else None
    if isinstance(data, FreshnessStateChange):
        if data.new_state != FreshnessState.FAIL:
            return None
        asset = data.key.to_user_string()
        return FreshnessAlert(asset, data.previous_state.value, asset_url(webserver_url, asset))
    if not isinstance(data, dg.AssetCheckEvaluation) or data.passed:
        return None
    if data.severity == dg.AssetCheckSeverity.ERROR and data.blocking:
        return None
    return CheckFailureAlert(
        run_id=entry.run_id,
        job_name=entry.job_name or "",
        asset=data.asset_key.to_user_string(),
        check=data.check_name,
        error=(data.description or "").strip().splitlines()[0] if data.description else "",
        severity=data.severity.value.lower(),
        run_url=run_url(webserver_url, entry.run_id),
    )


def drift_judged_by(record: "AssetCheckExecutionRecord | None") -> int | None:
    """The crawl a failed evaluation of ``no_field_drift`` judged (its ``crawl_id``); None when its latest
    evaluation passed, is still running or names no crawl."""
    evaluation = record.evaluation if record is not None else None
    if evaluation is None or evaluation.passed:
        return None
    crawl = evaluation.metadata.get("crawl_id")
    return int(str(crawl.value)) if crawl is not None else None


@dg.sensor(
    name="drift_cleared_sensor",
    job=recheck_drift_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="When the check no_field_drift failed last and its crawl no longer drifts (book-pipeline drift "
    "accept recorded an acceptance, or reextract resolved it), run the check again (recheck_drift_job), once per "
    "failed evaluation: when it passes, the day's snapshot, change feed and archive follow by automation.",
)
def drift_cleared_sensor(context: dg.SensorEvaluationContext, database: DatabaseResource) -> dg.SensorResult:
    """A run of the check for the failed evaluation whose crawl's drift is gone from the database (the acceptances
    and resolutions are its record), keyed by that evaluation's run so that it is requested once."""
    record = context.instance.get_latest_asset_check_evaluation_record(NO_FIELD_DRIFT)
    crawl_id = drift_judged_by(record)
    if record is None or crawl_id is None:
        return dg.SensorResult(skip_reason="no_field_drift did not fail last: nothing is held")
    with database.open(application_name="book-pipeline drift_cleared_sensor") as db:
        drifts = unaccepted_drift(db, crawl_id)
    if drifts:
        fields = ", ".join(sorted({row.field for row in drifts}))
        return dg.SensorResult(skip_reason=f"crawl {crawl_id} still drifts ({fields}): accept it or fix the parser")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=f"drift-cleared-{crawl_id}-{record.run_id}", tags={"book-pipeline/crawl-id": str(crawl_id)}
            )
        ]
    )


@dg.definitions
def sensors() -> dg.Definitions:
    """The sensors of the whole location; each catalogue's ``failed_tasks_sensor`` is its own
    (:mod:`book_assets.defs.crawl.catalogue`). The settings are read, so a bad value fails the load."""
    load_settings()
    return dg.Definitions(sensors=[run_failure_summary, alert_sensor, drift_cleared_sensor])
