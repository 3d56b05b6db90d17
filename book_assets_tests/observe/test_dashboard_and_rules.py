"""deploy/grafana and deploy/prometheus query only metrics the code exports, and the rules pass promtool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from book_assets.observe.metrics import QUEUE_METRICS, WORKER_METRICS, exported_names
from book_assets.settings import PROJECT_ROOT

DASHBOARD = PROJECT_ROOT / "deploy" / "grafana" / "book-pipeline.json"
RULES = PROJECT_ROOT / "deploy" / "prometheus" / "rules.yml"
RULES_TEST = PROJECT_ROOT / "deploy" / "prometheus" / "rules_test.yml"

#: PromQL words that are not metric names: aggregations, functions (followed by "("), operators, modifiers.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def metric_names(promql: str) -> set[str]:
    """The metric names a PromQL expression selects (a small lexer: enough for the expressions we write)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', promql)  # strings (label values, template text)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\boffset\s+\d+[smhdwy]", "", text)  # offset modifiers
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word, rest = match.group(), text[match.end() :].lstrip()
        if word in KEYWORDS or rest.startswith("(") or re.fullmatch(r"\d+[smhdwy]|Inf|NaN", word):
            continue
        names.add(word)
    return names


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def rule_expressions() -> list[str]:
    import yaml

    groups = yaml.safe_load(RULES.read_text())["groups"]
    found = [r["expr"] for g in groups for r in g["rules"]]
    for text in (a for g in groups for r in g["rules"] for a in r.get("annotations", {}).values()):
        found += [q.replace('\\"', '"') for q in re.findall(r'query "((?:[^"\\]|\\.)*)"', text)]  # templates' queries
    return found


def test_the_lexer_finds_metric_names_and_skips_functions_labels_and_keywords() -> None:
    expr = 'histogram_quantile(0.9, sum by (le, domain) (rate(a_seconds_bucket{x="y z"}[5m]))) > 2 * b and c offset 1m'
    assert metric_names(expr) == {"a_seconds_bucket", "b", "c"}


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_every_metric_the_dashboard_and_rules_query_is_exported(source: str) -> None:
    expressions = dashboard_expressions() if source == "dashboard" else rule_expressions()
    used = set().union(*(metric_names(e) for e in expressions))
    assert used, f"no metric found in the {source}"
    assert used - exported_names() - recorded_names() - {"up"} == set()  # up: Prometheus' own, per target


def recorded_names() -> set[str]:
    """The series the rules record (``book_pipeline:...``), computed from exported ones."""
    import yaml

    return {r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r}


def test_the_dashboard_shows_every_worker_and_queue_family() -> None:
    used = set().union(*(metric_names(e) for e in dashboard_expressions()))
    families = {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_total") for n in used}
    expected = {f"book_pipeline_{n}" for n in (*WORKER_METRICS, *QUEUE_METRICS)}
    missing = expected - families - {"book_pipeline_queue_up", "book_pipeline_queue_scrape_duration_seconds"}
    assert missing == set()


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not found (Debian package prometheus): cannot check the rules")
    return found


def test_promtool_accepts_the_rules_and_their_unit_tests_pass() -> None:
    promtool = _promtool()
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", RULES_TEST.name], capture_output=True, text=True, cwd=RULES_TEST.parent
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
