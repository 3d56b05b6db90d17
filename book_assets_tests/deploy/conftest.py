"""Markers of the deploy tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "compose: brings the compose stack up on a Docker engine of its own (scripts/compose_e2e.py)"
    )
