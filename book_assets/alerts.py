"""Run-failure alerts: one short message to a webhook or to a Slack channel, or nowhere when none is set.

Where the alert goes is read from the settings when an alert is sent, so the daemon's environment decides
and a token never enters a Dagster run or snapshot:

- ``BOOK_PIPELINE_ALERT_WEBHOOK_URL``: an HTTP(S) URL receiving a JSON POST ``{"text": ..., "run_id": ...}``
  (a Slack incoming webhook accepts it as is);
- ``BOOK_PIPELINE_SLACK_TOKEN`` and ``BOOK_PIPELINE_SLACK_CHANNEL``: ``chat.postMessage`` through
  dagster-slack's client (``BOOK_PIPELINE_SLACK_API_URL`` points it at another Slack-compatible API).

Both may be set; neither set means no alert (and no error).
"""

from __future__ import annotations

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


class AlertNotDelivered(RuntimeError):
    """The receiver refused the alert or could not be reached; the message says which and why."""


@dataclass(frozen=True)
class RunFailureAlert:
    """What went wrong in one run, in the words the message uses."""

    run_id: str
    job_name: str
    steps: list[str]
    error: str
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        where = f" in {', '.join(self.steps)}" if self.steps else ""
        return f"book-pipeline: run {self.run_id[:8]} of {self.job_name} failed{where}: {self.error or 'no message'}"


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


def send_alert(alert: RunFailureAlert, destinations: AlertDestinations) -> list[str]:
    """Post ``alert`` to every configured destination; returns where it went (empty: none configured)."""
    sent = []
    if destinations.webhook_url:
        post_webhook(destinations.webhook_url, alert)
        sent.append("webhook")
    if destinations.slack:
        post_slack(destinations, alert)
        sent.append("slack")
    return sent


def post_webhook(url: str, alert: RunFailureAlert) -> None:
    try:
        response = httpx.post(url, json={"text": alert.text, **asdict(alert)}, timeout=POST_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise AlertNotDelivered(f"alert webhook {httpx.URL(url).host} unreachable: {exc}") from exc
    if response.status_code >= 300:
        raise AlertNotDelivered(f"alert webhook {httpx.URL(url).host} answered HTTP {response.status_code}")


def post_slack(destinations: AlertDestinations, alert: RunFailureAlert) -> None:
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
