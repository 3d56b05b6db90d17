"""Alerts of failed runs, failed checks and overdue assets: one short message to a webhook or to a Slack
channel, or nowhere.

Where the alert goes is read from the settings when an alert is sent, so the daemon's environment decides
and a token never enters a Dagster run or snapshot:

- ``BOOK_PIPELINE_ALERT_WEBHOOK_URL``: an HTTP(S) URL receiving a JSON POST ``{"text": ..., "run_id": ...}``
  (a Slack incoming webhook accepts it as is);
- ``BOOK_PIPELINE_SLACK_TOKEN`` and ``BOOK_PIPELINE_SLACK_CHANNEL``: ``chat.postMessage`` through
  dagster-slack's client (``BOOK_PIPELINE_SLACK_API_URL`` points it at another Slack-compatible API).

Both may be set; neither set means no alert (and no error).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import httpx

from book_assets.settings import load_settings

#: The settings' variables (see :mod:`book_assets.settings`).
WEBHOOK_ENV = "BOOK_PIPELINE_ALERT_WEBHOOK_URL"
SLACK_TOKEN_ENV = "BOOK_PIPELINE_SLACK_TOKEN"
SLACK_CHANNEL_ENV = "BOOK_PIPELINE_SLACK_CHANNEL"
SLACK_API_ENV = "BOOK_PIPELINE_SLACK_API_URL"
#: Seconds to wait for the receiver; a slow receiver must not hold the daemon's sensor thread for long.
POST_TIMEOUT_S = 10.0
#: Deliveries tried per destination within one sensor tick, the n-th retry ``RETRY_BACKOFF_S * 2 ** n`` after
#: the one before (0.5, 1, 2 s): a receiver that refuses for a moment gets the alert within the tick, and the
#: tick stays well inside Dagster's sensor timeout. An alert still refused waits for the next tick
#: (``alert_sensor``'s cursor stays before it), for as long as the receiver refuses.
DELIVERY_ATTEMPTS = 4
RETRY_BACKOFF_S = 0.5


class AlertNotDelivered(RuntimeError):
    """The receiver refused the alert or could not be reached; the message says which and why."""

    def __init__(self, message: str, *, retryable: bool = True, delivered: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: Whether trying again can succeed (unreachable, 5xx, 408, 429), or the refusal is final (other 4xx).
        self.retryable = retryable
        #: The destinations that took the alert before this one refused it (not to be sent it again).
        self.delivered = delivered


@dataclass(frozen=True)
class RunFailureAlert:
    """What went wrong in one run, in the words the message uses."""

    run_id: str
    job_name: str
    steps: list[str]
    error: str
    tags: dict[str, str] = field(default_factory=dict)
    #: The run's page in the Dagster UI (``webserver_url``/runs/<id>).
    run_url: str | None = None

    @property
    def severity(self) -> str:
        return "error"

    @property
    def text(self) -> str:
        where = f" in {', '.join(self.steps)}" if self.steps else ""
        link = f" ({self.run_url})" if self.run_url else ""
        return (
            f"book-pipeline: run {self.run_id[:8]} of {self.job_name} failed{where}: {self.error or 'no message'}{link}"
        )


@dataclass(frozen=True)
class CheckFailureAlert:
    """A failed asset check whose run succeeds, so no run alert reports it: a WARN check, or an ERROR check
    that does not block."""

    run_id: str
    job_name: str
    asset: str
    check: str
    error: str
    #: The check's severity: ``warn`` or ``error``.
    severity: str
    run_url: str | None = None

    @property
    def text(self) -> str:
        link = f" ({self.run_url})" if self.run_url else ""
        return (
            f"book-pipeline: check {self.check} on {self.asset} failed ({self.severity}) in run {self.run_id[:8]} "
            f"of {self.job_name}: {self.error or 'no description'}{link}"
        )


@dataclass(frozen=True)
class FreshnessAlert:
    """An asset whose freshness policy failed: it was not materialized within the policy's window."""

    asset: str
    previous_state: str
    asset_url: str | None = None

    @property
    def severity(self) -> str:
        return "error"

    @property
    def text(self) -> str:
        link = f" ({self.asset_url})" if self.asset_url else ""
        return f"book-pipeline: {self.asset} is overdue: its freshness policy failed (was {self.previous_state}){link}"


#: What an alert says; each kind has its ``text``, its ``severity`` (``warn`` or ``error``) and its fields, all
#: of which a webhook receives.
Alert = RunFailureAlert | CheckFailureAlert | FreshnessAlert


@dataclass(frozen=True)
class AlertDestinations:
    """Where alerts go; empty when nothing is configured."""

    webhook_url: str | None = None
    slack_token: str | None = None
    slack_channel: str | None = None
    slack_api_url: str | None = None

    @classmethod
    def from_environment(cls) -> AlertDestinations:
        """The destinations the settings name now (environment, ``.env``)."""
        settings = load_settings()
        return cls(
            webhook_url=settings.alert_webhook_url or None,
            slack_token=settings.slack_token or None,
            slack_channel=settings.slack_channel or None,
            slack_api_url=settings.slack_api_url or None,
        )

    @property
    def slack(self) -> bool:
        return bool(self.slack_token and self.slack_channel)

    @property
    def configured(self) -> bool:
        return bool(self.webhook_url) or self.slack

    def describe(self) -> str:
        """Where alerts go, without the token or the webhook's path (which is often its secret)."""
        found = []
        if self.webhook_url:
            found.append(f"webhook {httpx.URL(self.webhook_url).host}")
        if self.slack:
            found.append(f"Slack channel {self.slack_channel}")
        return ", ".join(found) or "nowhere (no alert destination configured)"


def run_url(webserver_url: str, run_id: str) -> str:
    """The run's page in the Dagster UI."""
    return f"{webserver_url.rstrip('/')}/runs/{run_id}"


def asset_url(webserver_url: str, asset: str) -> str:
    """The asset's page in the Dagster UI (``asset``: its key as a user string, ``a/b``)."""
    return f"{webserver_url.rstrip('/')}/assets/{asset}"


def send_alert(
    alert: Alert,
    destinations: AlertDestinations,
    *,
    delivered: tuple[str, ...] = (),
    backoff_s: float = RETRY_BACKOFF_S,
) -> list[str]:
    """Post ``alert`` to every configured destination not in ``delivered`` (those that took it already), each
    retried (:data:`DELIVERY_ATTEMPTS`); returns where it went now (empty: none configured). Raises
    :class:`AlertNotDelivered` when a destination never took it, naming those that did."""
    posts: list[tuple[str, Callable[[], None]]] = []
    if destinations.webhook_url:
        url = destinations.webhook_url
        posts.append(("webhook", lambda: post_webhook(url, alert)))
    if destinations.slack:
        posts.append(("slack", lambda: post_slack(destinations, alert)))
    sent: list[str] = []
    for name, post in posts:
        if name in delivered:
            continue
        try:
            _deliver(post, backoff_s)
        except AlertNotDelivered as exc:
            raise AlertNotDelivered(str(exc), retryable=exc.retryable, delivered=(*delivered, *sent)) from exc
        sent.append(name)
    return sent


def _deliver(post: Callable[[], None], backoff_s: float) -> None:
    """``post`` until it succeeds, :data:`DELIVERY_ATTEMPTS` times at most; a refusal that no retry changes
    (a 4xx other than 408 and 429: a wrong URL or token) is not retried."""
    for attempt in range(DELIVERY_ATTEMPTS):
        try:
            post()
            return
        except AlertNotDelivered as exc:
            if not exc.retryable or attempt == DELIVERY_ATTEMPTS - 1:
                raise
        time.sleep(backoff_s * 2**attempt)


def post_webhook(url: str, alert: Alert) -> None:
    try:
        response = httpx.post(
            url, json={"text": alert.text, "severity": alert.severity, **asdict(alert)}, timeout=POST_TIMEOUT_S
        )
    except httpx.HTTPError as exc:
        raise AlertNotDelivered(f"alert webhook {httpx.URL(url).host} unreachable: {exc}") from exc
    status = response.status_code
    if status >= 300:
        retryable = status >= 500 or status in (408, 429)
        raise AlertNotDelivered(f"alert webhook {httpx.URL(url).host} answered HTTP {status}", retryable=retryable)


def post_slack(destinations: AlertDestinations, alert: Alert) -> None:
    from dagster_slack import SlackResource
    from slack_sdk.errors import SlackApiError

    client = SlackResource(token=destinations.slack_token or "").get_client()
    if destinations.slack_api_url:
        client.base_url = destinations.slack_api_url
    client.timeout = int(POST_TIMEOUT_S)
    try:
        client.chat_postMessage(channel=destinations.slack_channel or "", text=alert.text)
    except (SlackApiError, OSError) as exc:
        raise AlertNotDelivered(f"Slack alert to {destinations.slack_channel} not delivered: {exc}") from exc
