"""Every alert of deploy/prometheus/rules.yml links to its own section of docs/runbook.md, which says what it
means, how to check and what to do, as do the sections for the data a crawl held back (field drift, soft
blocks); the recorded series are named level:metric:operation."""

from __future__ import annotations

import re
from typing import Any

import yaml

from book_assets.settings import PROJECT_ROOT

RULES = PROJECT_ROOT / "deploy" / "prometheus" / "rules.yml"
RUNBOOK = PROJECT_ROOT / "docs" / "runbook.md"
SECTION_PARTS = ("**What it means.**", "**How to check.**", "**What to do.**")
#: The sections for what Dagster and the crawl report rather than Prometheus: the data a crawl held back.
HELD_DATA = {"field-drift", "soft-blocks"}


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def runbook_sections() -> dict[str, str]:
    """GitHub's anchor of each ``## `` heading -> the section's text."""
    parts = re.split(r"^## (.+)$", RUNBOOK.read_text(), flags=re.MULTILINE)
    return {
        re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-"): body
        for title, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def test_every_alert_links_to_its_own_runbook_section_with_what_to_check_and_do() -> None:
    alerts = [r for r in rules() if "alert" in r]
    sections = runbook_sections()
    assert len(alerts) >= 7
    for alert in alerts:
        url = alert["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path.endswith("/docs/runbook.md") and anchor == alert["alert"].lower(), url
        assert all(part in sections[anchor] for part in SECTION_PARTS), alert["alert"]
    assert set(sections) == {a["alert"].lower() for a in alerts} | HELD_DATA  # none for an alert that is gone
    assert all(part in sections[anchor] for anchor in HELD_DATA for part in SECTION_PARTS)


def test_every_alert_has_a_severity_and_a_pending_period() -> None:
    for alert in (r for r in rules() if "alert" in r):
        assert alert["labels"]["severity"] in {"page", "ticket"}, alert["alert"]
        assert re.fullmatch(r"\d+[mh]", alert.get("for", "")), alert["alert"]


def test_recorded_series_follow_prometheus_naming() -> None:
    recorded = [r["record"] for r in rules() if "record" in r]
    assert recorded
    for name in recorded:
        assert re.fullmatch(r"book_pipeline:[a-z_]+:[a-z0-9_]+", name), name
