"""What a crawl's processes import: the crawl, its workers and every site definition, never the publishing side's
heavy libraries (pandas alone is about 0.6 s and 60 MB in each process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import book_assets


def test_a_crawl_and_its_site_definitions_never_import_pandas() -> None:
    script = (
        "import sys\n"
        "import book_assets.crawl.drain, book_assets.crawl.worker\n"
        "from book_assets.sites.registry import known, site_named\n"
        "sites = [site_named(name) for name in known()]\n"
        "assert [s.record for s in sites], 'no site'\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'pandas', 'numpy', 'matplotlib', 'pyarrow'})\n"
        "assert not loaded, f'a crawl imported {loaded[:5]}'\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_crawls_processes_load_the_package_from_bytecode_even_where_none_may_be_written() -> None:
    """The command, the fork server and every Dagster step are fresh interpreters. Where bytecode is not written
    (``PYTHONDONTWRITEBYTECODE``, a package its user cannot write, as in the image) each would compile every module
    of the package from source again (about 0.1 s of CPU before a crawl's first page, in each): the set-up compiles
    it once (``scripts/bootstrap.sh``, the Dockerfile)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    code = "import book_assets.cli, book_assets.crawl.drain, book_assets.crawl.worker"
    proc = subprocess.run([sys.executable, "-v", "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    package = Path(book_assets.__file__).parent
    from_source = [
        line.split("code object from ")[1].strip("'")
        for line in proc.stderr.splitlines()
        if line.startswith("# code object from ") and line.rstrip("'").endswith(".py") and str(package) in line
    ]
    assert not from_source, f"{len(from_source)} modules compiled from source, e.g. {from_source[:3]}: run make setup"
