"""Writing a published file whole or not at all.

Every file a reader may open while it is rewritten (the snapshot's Parquet, CSV and chart, the change feed,
the archive's CDXJ index) is written under a temporary name beside it and renamed into place: a reader
sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Run ``write`` on a temporary file beside ``path``, then rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write` of a UTF-8 text."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
