"""Settings: documented defaults, environment overrides and one-line errors naming the setting."""

from __future__ import annotations

import pytest

from book_assets.settings import ConfigError, Settings, load_settings

pytestmark = pytest.mark.unit


def test_every_setting_has_a_description() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not field.description]
    assert missing == []


def test_environment_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_CONCURRENCY", "7")
    monkeypatch.setenv("BOOK_PIPELINE_FETCH_MODE", "http")
    settings = load_settings()
    assert settings.concurrency == 7
    assert settings.fetch_mode == "http"


def test_explicit_overrides_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_CONCURRENCY", "7")
    assert load_settings(concurrency=3).concurrency == 3


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("DATABASE_URL", "mysql://x@y/z", "DATABASE_URL"),
        ("DATABASE_URL", "postgresql://u@h:99999999/db", "DATABASE_URL"),
        ("DATABASE_URL", "postgresql://u@h:5432", "DATABASE_URL"),
        ("BOOK_PIPELINE_CONCURRENCY", "0", "concurrency"),
        ("BOOK_PIPELINE_MIN_INTERVAL_S", "-1", "min_interval_s"),
        ("BOOK_PIPELINE_FETCH_MODE", "telnet", "fetch_mode"),
        ("BOOK_PIPELINE_BASE_URL", "ftp://books", "base_url"),
    ],
)
def test_bad_setting_gives_one_line_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert needle in message
    assert "\n" not in message
