"""Catalog facts shared by every asset of the code location: who owns it, and how assets are tagged.

The tag ``book-pipeline/layer`` says where an asset sits in the one-way flow site → crawl → publish.
"""

from __future__ import annotations

from typing import Literal

#: Owners shown in the catalog (Dagster accepts e-mail addresses and ``team:`` names).
OWNERS = ["team:book-pipeline"]

Layer = Literal["crawl", "publish"]


def tags_for(layer: Layer) -> dict[str, str]:
    """The catalog tags of an asset of ``layer``."""
    return {"book-pipeline/layer": layer}
