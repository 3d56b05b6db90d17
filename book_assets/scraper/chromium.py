"""Finding a Chromium executable for Playwright.

``playwright install`` cannot download browsers everywhere this project runs (no internet in CI
sandboxes), so we fall back to the distribution's Chromium. Order: the ``BOOK_PIPELINE_CHROMIUM``
environment variable (an explicit choice must not be silently ignored: it is an error if it does not
exist), Playwright's own bundled Chromium if installed, then system browsers.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from book_assets.scraper.errors import ChromiumNotFound

ENV_VAR = "BOOK_PIPELINE_CHROMIUM"
SYSTEM_CANDIDATES: tuple[str, ...] = (
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chromium",
    "chromium-browser",
)
# Flags for headless Chromium in containers: no sandbox (often unavailable as root/in containers), no GPU,
# /tmp instead of a small /dev/shm, and none of the background traffic a crawler should not generate.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # A crawler's tabs all show one site: one renderer process for the site instead of one per tab.
    "--process-per-site",
)


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _bundled_candidates(env: Mapping[str, str]) -> list[str]:
    """Chromium builds installed by ``playwright install`` (newest revision first)."""
    root = env.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache" / "ms-playwright")
    patterns = ("chromium-*/chrome-linux*/chrome", "chromium_headless_shell-*/chrome-linux*/headless_shell")
    found: list[str] = []
    for pattern in patterns:
        found.extend(sorted(glob.glob(os.path.join(root, pattern)), reverse=True))
    return found


def find_chromium(
    bundled: str | None = None,
    env: Mapping[str, str] | None = None,
    system_candidates: tuple[str, ...] = SYSTEM_CANDIDATES,
) -> str:
    """Path of the Chromium executable to launch.

    Args:
        bundled: Playwright's own idea of its Chromium (``playwright.chromium.executable_path``), checked
            before the browser cache directory and the system browsers.
        env: Environment to read (defaults to ``os.environ``; tests pass their own).
        system_candidates: Absolute paths or command names tried last, in order.

    Raises:
        ChromiumNotFound: ``BOOK_PIPELINE_CHROMIUM`` names a missing file, or no Chromium exists.
    """
    env = os.environ if env is None else env
    explicit = env.get(ENV_VAR)
    if explicit:
        if not _executable(explicit):
            raise ChromiumNotFound(f"{ENV_VAR}={explicit} is not an executable file")
        return explicit
    for candidate in ([bundled] if bundled else []) + _bundled_candidates(env):
        if _executable(candidate):
            return candidate
    for candidate in system_candidates:
        resolved = candidate if os.path.isabs(candidate) else shutil.which(candidate, path=env.get("PATH"))
        if resolved and _executable(resolved):
            return resolved
    raise ChromiumNotFound(f"no Chromium found: set {ENV_VAR}=/path/to/chromium or run `apt-get install -y chromium`")
