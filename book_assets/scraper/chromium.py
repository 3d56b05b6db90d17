"""Finding a Chromium executable for Playwright: a headless-shell build first, full Chromium as a fallback.

Why the headless shell: the crawler never shows a window, and the headless shell (Chromium's old headless
mode as its own binary) starts no browser UI and no WebUI renderer. With a bare Playwright loop over
sandbox book pages, everything else equal, it fetches about a quarter more pages per second than the full
``chromium`` (``benchmarks/browser_bench.py``; figures with their date in ``docs/benchmarks.md``).

``playwright install`` cannot download browsers everywhere this project runs (no internet in CI
sandboxes), so we fall back to the distribution's builds. Order: the ``BOOK_PIPELINE_CHROMIUM``
environment variable (an explicit choice must not be silently ignored: it is an error if it does not
exist); a headless shell — Playwright's own, then the system's (Debian ``chromium-headless-shell``); then a
full Chromium — Playwright's own, then the system's. :func:`chromium_kind` names which one a path is.

Chromium renders pages of the open web, so it gets nothing it does not need: :func:`browser_environment`
keeps the few variables a headless browser reads (no database URL, no ``BOOK_PIPELINE_*`` setting, no
proxy credentials), and its sandbox is on wherever the platform allows it (:func:`sandbox_available`).
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from book_assets.scraper.errors import ChromiumNotFound

ENV_VAR = "BOOK_PIPELINE_CHROMIUM"
#: System headless-shell builds. Debian's ``chromium-headless-shell`` package puts the binary in
#: /usr/lib/chromium and a wrapper script in /usr/bin that runs it without ``exec``: launching the binary
#: itself saves a shell process between Playwright and the browser (and signals reach Chromium directly).
HEADLESS_SHELL_CANDIDATES: tuple[str, ...] = (
    "/usr/lib/chromium/chromium-headless-shell",
    "/usr/bin/chromium-headless-shell",
    "chromium-headless-shell",
)
SYSTEM_CANDIDATES: tuple[str, ...] = (
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chromium",
    "chromium-browser",
)
# Flags for headless Chromium in containers: no GPU, /tmp instead of a small /dev/shm, and none of the
# background traffic a crawler should not generate. The sandbox is Playwright's ``chromium_sandbox`` option
# (:func:`sandbox_available`), not a flag here. Each tab keeps a renderer process of its own (Chromium's default;
# no ``--process-per-site``): it ends when the tab is recycled (``recycle_page_after``), which bounds what the
# renderers hold, where one renderer for the whole site kept every tab's heap for the browser's life.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Chromium's memory settings for small devices (smaller caches, earlier purges): a smaller peak PSS of the
    # renderer and of the whole process tree at a throughput within the noise
    # (benchmarks/browser_messages.py; docs/benchmarks.md).
    "--enable-low-end-device-mode",
    # The network service as a thread of the browser process instead of a utility process of its own (as
    # Chrome does on small devices): one process and one IPC hop fewer per request. Less CPU per
    # page in all: the utility process's share goes, the browser's grows by less (benchmarks/browser_cpu.py).
    "--enable-features=NetworkServiceInProcess2",
)


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


#: ``playwright install`` layouts: headless shell (old and new names), then full Chromium.
_BUNDLED_HEADLESS_SHELL = (
    "chromium_headless_shell-*/chrome-headless-shell-linux*/chrome-headless-shell",
    "chromium_headless_shell-*/chrome-linux*/headless_shell",
)
_BUNDLED_FULL = ("chromium-*/chrome-linux*/chrome",)


def _bundled_candidates(env: Mapping[str, str], patterns: tuple[str, ...]) -> list[str]:
    """Builds installed by ``playwright install`` matching ``patterns`` (newest revision first)."""
    root = env.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache" / "ms-playwright")
    found: list[str] = []
    for pattern in patterns:
        found.extend(sorted(glob.glob(os.path.join(root, pattern)), reverse=True))
    return found


def _on_path(candidates: tuple[str, ...], env: Mapping[str, str]) -> list[str]:
    resolved = [c if os.path.isabs(c) else shutil.which(c, path=env.get("PATH")) for c in candidates]
    return [r for r in resolved if r]


def chromium_kind(path: str) -> str:
    """Which kind of build ``path`` is, judged by its file name: "headless-shell" or "chromium"."""
    name = os.path.basename(os.path.realpath(path))
    return "headless-shell" if "headless" in name else "chromium"


def find_chromium(
    bundled: str | None = None,
    env: Mapping[str, str] | None = None,
    system_candidates: tuple[str, ...] = SYSTEM_CANDIDATES,
    headless_candidates: tuple[str, ...] = HEADLESS_SHELL_CANDIDATES,
) -> str:
    """Path of the Chromium executable to launch: a headless shell where one exists (see the module doc).

    Args:
        bundled: Playwright's own idea of its full Chromium (``playwright.chromium.executable_path``),
            checked first among the full builds.
        env: Environment to read (defaults to ``os.environ``; tests pass their own).
        system_candidates: Full-Chromium absolute paths or command names tried last, in order.
        headless_candidates: System headless-shell paths or command names, tried after Playwright's own
            headless shell and before any full Chromium.

    Raises:
        ChromiumNotFound: ``BOOK_PIPELINE_CHROMIUM`` names a missing file, or no Chromium exists.
    """
    env = os.environ if env is None else env
    explicit = env.get(ENV_VAR)
    if explicit:
        if not _executable(explicit):
            raise ChromiumNotFound(f"{ENV_VAR}={explicit} is not an executable file")
        return explicit
    ordered = [
        *_bundled_candidates(env, _BUNDLED_HEADLESS_SHELL),
        *_on_path(headless_candidates, env),
        *([bundled] if bundled else []),
        *_bundled_candidates(env, _BUNDLED_FULL),
        *_on_path(system_candidates, env),
    ]
    for candidate in ordered:
        if _executable(candidate):
            return candidate
    raise ChromiumNotFound(
        f"no Chromium found: set {ENV_VAR}=/path/to/chromium or run `apt-get install -y chromium-headless-shell`"
    )


#: What Chromium may see of the parent's environment: where programs and fonts are, its home and temporary
#: directories, the locale and the time zone. Anything else (DATABASE_URL, the BOOK_PIPELINE_* settings,
#: cloud credentials, proxies with passwords in them) stays with the crawler.
BROWSER_ENV: re.Pattern[str] = re.compile(r"PATH|HOME|TMPDIR|TZ|LANG|LANGUAGE|LC_[A-Z]+|FONTCONFIG_[A-Z]+|XDG_[A-Z_]+")


def browser_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment to launch Chromium with: the variables of ``env`` (default ``os.environ``) that
    :data:`BROWSER_ENV` names, nothing else."""
    env = os.environ if env is None else env
    return {name: value for name, value in env.items() if BROWSER_ENV.fullmatch(name)}


#: unshare(2) flags of the namespaces Chromium's sandbox makes for its renderers (linux/sched.h).
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_PROBE = (
    "import ctypes, sys; "
    f"sys.exit(0 if ctypes.CDLL(None, use_errno=True).unshare({_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNET}) == 0"
    " else 1)"
)


@functools.cache
def sandbox_available() -> bool:
    """Whether Chromium's sandbox can run here: not as root (Chromium refuses it), and only where an
    unprivileged process may create the user, PID and network namespaces its renderers run in. A seccomp
    profile that forbids them (Docker's and Kubernetes' RuntimeDefault without CAP_SYS_ADMIN), a sysctl
    (``user.max_user_namespaces=0``) or an AppArmor rule (Ubuntu's
    ``kernel.apparmor_restrict_unprivileged_userns``) all make the probe fail: it tries, in a child process,
    what Chromium would. Without it the browser runs with ``--no-sandbox``, confined by the process's own
    limits (an unprivileged user, no capabilities, the container's seccomp profile)."""
    if os.geteuid() == 0:
        return False
    probe = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0
