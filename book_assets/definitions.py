"""The Dagster code location: assembled from the topic modules under ``book_assets/defs``."""

from __future__ import annotations

import dagster as dg

defs = dg.Definitions(assets=[])
