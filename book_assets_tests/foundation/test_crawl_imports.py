"""What a crawl's processes import: the crawl, its workers and every site definition, never the publishing side's
heavy libraries (pandas alone is about 0.6 s and 60 MB in each process)."""

from __future__ import annotations

import subprocess
import sys


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
