"""BrowserFetcher against a real local HTTP server and a real headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

from book_assets.scraper.chromium import (
    CHROMIUM_ARGS,
    ENV_VAR,
    browser_environment,
    chromium_kind,
    find_chromium,
    sandbox_available,
)
from book_assets.scraper.errors import ChromiumNotFound, FetchError
from book_assets.scraper.fetch_browser import BrowserFetcher, host_resolver_rules
from book_assets.scraper.fetching import FetchSettings
from book_assets_tests.scraper.scraper_site import POUND_PAGE, LocalSite

T = TypeVar("T")

try:
    CHROMIUM: str | None = find_chromium()
except ChromiumNotFound:
    CHROMIUM = None


@pytest.fixture
def chromium_installed() -> str:
    """A missing Chromium is a missing install step (``make setup`` installs one), never a skipped test."""
    assert CHROMIUM is not None, "no Chromium found: run `make setup` or set BOOK_PIPELINE_CHROMIUM"
    return CHROMIUM


needs_chromium = pytest.mark.usefixtures("chromium_installed")


def settings(**overrides: object) -> FetchSettings:
    base: dict[str, object] = {"allowed_domains": frozenset({"127.0.0.1"}), "timeout_s": 10.0, "concurrency": 2}
    base.update(overrides)
    return FetchSettings(**base)  # type: ignore[arg-type]


def run_with(fetcher_settings: FetchSettings, action: Callable[[BrowserFetcher], Awaitable[T]]) -> T:
    async def main() -> T:
        async with BrowserFetcher(fetcher_settings) as fetcher:
            return await action(fetcher)

    return asyncio.run(main())


def fetch_error(url: str, **overrides: object) -> FetchError:
    async def action(fetcher: BrowserFetcher) -> None:
        await fetcher.fetch(url)

    with pytest.raises(FetchError) as info:
        run_with(settings(**overrides), action)
    return info.value


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The ppid is the 2nd field after the parenthesised command name.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry.name))
    return kids


def our_processes() -> list[tuple[int, bytes]]:
    """Each process descended from this test process, with its raw command line (NUL-separated arguments;
    Chromium rewrites its helpers' argv into one string)."""
    found: list[tuple[int, bytes]] = []
    stack = [os.getpid()]
    while stack:
        for child in _children(stack.pop()):
            stack.append(child)
            with contextlib.suppress(OSError):
                found.append((child, (Path("/proc") / str(child) / "cmdline").read_bytes()))
    return found


def our_chromium_main_pids() -> list[int]:
    """Browser (not renderer/GPU) processes descended from this test process: the ones we started."""
    return [
        pid for pid, cmdline in our_processes() if b"chrom" in cmdline.split(b"\0")[0] and b"--type=" not in cmdline
    ]


def test_the_browser_environment_keeps_paths_locale_and_time_zone_and_drops_everything_else() -> None:
    parent = {
        "PATH": "/usr/bin",
        "HOME": "/home/crawler",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "DATABASE_URL": "postgresql://scraper:s3cret@db/books",
        "BOOK_PIPELINE_BASE_URL": "https://books.example/",
        "DAGSTER_PG_PASSWORD": "s3cret",
        "AWS_SECRET_ACCESS_KEY": "s3cret",
        "HTTPS_PROXY": "http://user:s3cret@proxy:3128",
        "LD_PRELOAD": "/tmp/evil.so",
        "PATHEXT": ".EXE",
    }
    assert browser_environment(parent) == {
        "PATH": "/usr/bin",
        "HOME": "/home/crawler",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
    }
    assert "--no-sandbox" not in CHROMIUM_ARGS  # Playwright's chromium_sandbox decides (sandbox_available)


def _browser_tree() -> list[psutil.Process]:
    """The Chromium processes this test started: each browser and its helpers (zygote, renderers, GPU)."""
    mains = [psutil.Process(pid) for pid in our_chromium_main_pids()]
    return mains + [child for main in mains for child in main.children(recursive=True)]


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_chromium_sees_no_database_url_or_setting_of_the_crawler(
    local_site: LocalSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://scraper:s3cret@db.internal/books")
    monkeypatch.setenv("BOOK_PIPELINE_SECRET_PROBE", "s3cret")

    async def action(fetcher: BrowserFetcher) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
        await fetcher.fetch(local_site.url("/ok"))  # a renderer is up as well as the browser
        (main,) = our_chromium_main_pids()
        environments = {}
        for process in _browser_tree():
            with contextlib.suppress(psutil.NoSuchProcess):
                environments[process.pid] = process.environ()  # /proc/<pid>/environ
        return environments[main], environments

    browser, environments = run_with(settings(), action)
    assert len(environments) >= 2, environments  # the browser and at least one helper
    for pid, env in environments.items():
        leaked = {k for k, v in env.items() if k == "DATABASE_URL" or k.startswith("BOOK_PIPELINE_") or "s3cret" in v}
        assert leaked == set(), (pid, leaked)
    assert browser["PATH"] == os.environ["PATH"]  # what it needs, it has


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_chromium_runs_sandboxed_unless_root_or_the_platform_forbids_namespaces(local_site: LocalSite) -> None:
    async def action(fetcher: BrowserFetcher) -> list[str]:
        await fetcher.fetch(local_site.url("/ok"))
        (main,) = our_chromium_main_pids()
        return psutil.Process(main).cmdline()

    cmdline = run_with(settings(), action)
    assert ("--no-sandbox" in cmdline) is (not sandbox_available())
    if os.geteuid() == 0:  # Chromium refuses its sandbox as root
        assert not sandbox_available()


def test_host_resolver_rules_exclude_only_allowed_hosts() -> None:
    assert host_resolver_rules(frozenset({"b.example", "a.example"})) == (
        "MAP * ~NOTFOUND, EXCLUDE a.example, EXCLUDE b.example"
    )
    # No allowed hosts: names resolve, internal addresses do not.
    assert "MAP 127.* ~NOTFOUND" in host_resolver_rules(frozenset())
    assert "MAP * ~NOTFOUND" not in host_resolver_rules(frozenset())


def test_env_var_pointing_nowhere_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ChromiumNotFound, match=ENV_VAR):
        find_chromium(env={ENV_VAR: str(tmp_path / "nope")})


def test_no_chromium_anywhere_names_env_var_and_apt(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path)}
    with pytest.raises(ChromiumNotFound) as info:
        find_chromium(env=env, system_candidates=("/nonexistent/chromium", "no-such-chrome"), headless_candidates=())
    assert ENV_VAR in str(info.value) and "apt-get install -y chromium" in str(info.value)


def test_env_var_wins(tmp_path: Path) -> None:
    exe = tmp_path / "my-chromium"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert find_chromium(bundled="/usr/bin/chromium", env={ENV_VAR: str(exe)}) == str(exe)


def test_bundled_chromium_is_preferred_over_system(tmp_path: Path) -> None:
    exe = tmp_path / "chrome"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    env = {"PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "none")}
    found = find_chromium(bundled=str(exe), env=env, system_candidates=("/usr/bin/chromium",), headless_candidates=())
    assert found == str(exe)


def test_a_headless_shell_is_preferred_over_any_full_chromium(tmp_path: Path) -> None:
    full, shell = tmp_path / "chrome", tmp_path / "chromium-headless-shell"
    for exe in (full, shell):
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    env = {"PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "none")}
    found = find_chromium(bundled=str(full), env=env, headless_candidates=(str(shell),))
    assert found == str(shell) and chromium_kind(found) == "headless-shell"
    # Playwright's own headless shell comes before the system's.
    bundled_shell = tmp_path / "pw" / "chromium_headless_shell-1187" / "chrome-headless-shell-linux64"
    bundled_shell.mkdir(parents=True)
    (bundled_shell / "chrome-headless-shell").write_text("#!/bin/sh\n")
    (bundled_shell / "chrome-headless-shell").chmod(0o755)
    env = {"PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "pw")}
    assert find_chromium(env=env, headless_candidates=(str(shell),)) == str(bundled_shell / "chrome-headless-shell")
    assert chromium_kind(str(full)) == "chromium"


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_fetch_returns_served_body_and_blocks_images_and_css(local_site: LocalSite) -> None:
    async def action(fetcher: BrowserFetcher) -> tuple[object, dict[str, int]]:
        return await fetcher.fetch(local_site.url("/ok")), fetcher.stats()

    result, stats = run_with(settings(), action)
    assert result.status == 200  # type: ignore[attr-defined]
    assert result.body == POUND_PAGE  # type: ignore[attr-defined]
    assert "Price £51.77" in result.html  # type: ignore[attr-defined]
    # No charset anywhere on this page: decode_html says UTF-8, Chromium's DOM says windows-1252.
    assert result.rendered_html is not None and "51.77</h1>" in result.rendered_html  # type: ignore[attr-defined]
    assert stats["pages_fetched"] == 1
    assert stats["blocked_requests"] >= 2  # the <img> and the stylesheet
    assert "/img.png" not in local_site.paths_hit()
    assert "/style.css" not in local_site.paths_hit()


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_rendered_html_has_js_built_dom_while_served_html_does_not(local_site: LocalSite) -> None:
    async def action(fetcher: BrowserFetcher) -> object:
        return await fetcher.fetch(local_site.url("/js"))

    result = run_with(settings(), action)
    assert 'id="built-by-js"' in result.rendered_html  # type: ignore[attr-defined]
    assert "Made by script £" in result.rendered_html  # type: ignore[attr-defined]
    assert 'id="built-by-js"' not in result.html  # type: ignore[attr-defined]
    assert "/img2.png" not in local_site.paths_hit()


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_status_errors_are_classified(local_site: LocalSite) -> None:
    async def action(fetcher: BrowserFetcher) -> list[tuple[str, bool, float | None]]:
        out: list[tuple[str, bool, float | None]] = []
        for path in ("/404", "/500", "/429", "/503"):
            with pytest.raises(FetchError) as info:
                await fetcher.fetch(local_site.url(path))
            out.append((info.value.kind, info.value.retryable, info.value.retry_after))
        # The pool page survives HTTP errors and still fetches.
        ok = await fetcher.fetch(local_site.url("/ok"))
        assert ok.body == POUND_PAGE
        return out

    assert run_with(settings(), action) == [
        ("http_404", False, None),
        ("http_5xx", True, None),
        ("http_429", True, 3.0),
        ("http_5xx", True, 7.0),
    ]


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_offsite_redirect_is_refused_without_fetching_target(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/offsite"))
    assert (error.kind, error.retryable) == ("offsite_redirect", False)
    assert "/target" not in local_site.paths_hit()


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_offsite_url_is_never_navigated(local_site: LocalSite) -> None:
    error = fetch_error(f"http://localhost:{local_site.port}/ok")
    assert (error.kind, error.retryable) == ("offsite", False)
    assert local_site.hits == []


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_redirect_loop_is_permanent(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/loop"))
    assert (error.kind, error.retryable) == ("redirect_loop", False)


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", ["/bad-location", "/bad-port-location", "/javascript-location"])
def test_browser_redirect_to_a_location_that_is_no_http_url_fails_for_good_as_bad_redirect(
    local_site: LocalSite, path: str
) -> None:
    error = fetch_error(local_site.url(path))
    assert (error.kind, error.retryable) == ("bad_redirect", False)


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_truncated_body_is_retryable(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/truncated"))
    assert (error.kind, error.retryable) == ("truncated", True)


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_timeout_is_retryable(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/slow"), timeout_s=1.0)
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_browser_too_large_is_permanent(local_site: LocalSite) -> None:
    error = fetch_error(local_site.url("/big"), max_body_bytes=1024 * 1024)
    assert (error.kind, error.retryable) == ("too_large", False)


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_a_decompression_bomb_fails_as_too_large_on_its_decoded_size_before_the_page_loads(
    local_site: LocalSite,
) -> None:
    # 1 MB of gzip, 1 GiB inflated: the limit is on the decoded bytes, so the load is stopped near 10 MB
    # (the timeout is long enough that a fetch waiting for the load would fail as timeout, not too_large).
    error = fetch_error(local_site.url("/bomb"), timeout_s=20.0)
    assert (error.kind, error.retryable) == ("too_large", False), str(error)
    assert "exceeds limit of 10485760" in str(error)


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(180)
def test_chromium_memory_stays_bounded_while_a_decompression_bomb_is_refused(local_site: LocalSite) -> None:
    async def peak_pss(fetcher: BrowserFetcher, path: str, expect: str | None) -> float:
        sampler = _PssSampler(os.getpid())
        async with sampler:
            try:
                await fetcher.fetch(local_site.url(path))
            except FetchError as exc:
                assert exc.kind == expect
            else:
                assert expect is None
        return sampler.peak_mb

    async def action(fetcher: BrowserFetcher) -> tuple[float, float]:
        await fetcher.fetch(local_site.url("/ok"))  # the browser and its tab are up before either is measured
        normal = await peak_pss(fetcher, "/ok", None)
        bomb = await peak_pss(fetcher, "/bomb", "too_large")
        return normal, bomb

    normal, bomb = run_with(settings(timeout_s=20.0, concurrency=1), action)
    assert normal > 0
    assert bomb <= 2 * normal, f"Chromium's peak PSS {bomb:.0f} MB on a bomb vs {normal:.0f} MB on a normal page"


class _PssSampler:
    """The peak PSS (MB) of the Chromium processes under ``root`` (through the Playwright driver), sampled
    on a thread every 10 ms while the block runs."""

    def __init__(self, root: int) -> None:
        self.root = psutil.Process(root)
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> float:
        total = 0
        for process in self.root.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "chrom" in process.name() or "headless" in process.name():
                    total += process.memory_full_info().pss
        return total / 1e6

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self._sample())
            self._stop.wait(0.01)

    async def __aenter__(self) -> None:
        self._thread.start()

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join)
        self.peak_mb = max(self.peak_mb, self._sample())


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(180)
def test_browser_relaunches_after_being_killed(local_site: LocalSite) -> None:
    async def action(fetcher: BrowserFetcher) -> dict[str, int]:
        await fetcher.fetch(local_site.url("/ok"))
        pids = our_chromium_main_pids()
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while fetcher.stats()["crashes"] == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        result = await fetcher.fetch(local_site.url("/ok"))
        assert result.body == POUND_PAGE
        assert our_chromium_main_pids() != pids
        return fetcher.stats()

    stats = run_with(settings(), action)
    assert stats["relaunches"] == 1
    assert stats["crashes"] == 1
    assert stats["pages_fetched"] == 2


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(180)
def test_a_fetch_that_opens_a_tab_on_a_browser_killed_a_moment_ago_fails_as_browser_crashed(
    local_site: LocalSite,
) -> None:
    """The kill is not yet known (no event processed): opening the tab itself meets the dead browser."""

    async def action(fetcher: BrowserFetcher) -> tuple[FetchError, dict[str, int]]:
        await fetcher.fetch(local_site.url("/ok"), javascript=False)
        pids = our_chromium_main_pids()
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGKILL)
        while pids[0] in our_chromium_main_pids():
            time.sleep(0.01)  # blocking on purpose: the event loop must not see the disconnect first
        time.sleep(0.2)  # the driver has seen the pipe close by now
        with pytest.raises(FetchError) as info:
            # Scripts on: a context and a tab the dead browser has to create.
            await fetcher.fetch(local_site.url("/ok"), javascript=True)
        result = await fetcher.fetch(local_site.url("/ok"), javascript=True)
        assert result.body == POUND_PAGE
        return info.value, fetcher.stats()

    error, stats = run_with(settings(), action)
    assert (error.kind, error.retryable) == ("browser_crashed", True), error
    assert (stats["crashes"], stats["relaunches"], stats["pages_fetched"]) == (1, 1, 2), stats


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_the_browser_runs_its_network_service_in_process_not_as_a_utility_process(local_site: LocalSite) -> None:
    def helper_types() -> list[str]:
        args = [cmdline.replace(b"\0", b" ").decode() for _, cmdline in our_processes()]
        return [found for arg in args for found in re.findall(r"--(?:type|utility-sub-type)=(\S+)", arg)]

    async def action(fetcher: BrowserFetcher) -> list[str]:
        result = await fetcher.fetch(local_site.url("/ok"))
        assert result.body == POUND_PAGE
        return helper_types()

    types = run_with(settings(), action)
    assert "renderer" in types, types  # the walk does see the browser's helpers
    assert "network.mojom.NetworkService" not in types, types


def our_renderer_pids() -> set[int]:
    """Renderer processes descended from this test process."""
    return {pid for pid, cmdline in our_processes() if b"--type=renderer" in cmdline}


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_a_recycled_tab_takes_its_renderer_process_and_its_memory_with_it(local_site: LocalSite) -> None:
    """Tabs are recycled to bound the renderers' memory, so a recycled tab's renderer must end with it while the
    crawl's other tabs stay open: a renderer shared by the site's tabs lives as long as any of them and keeps
    what every tab left behind."""

    async def action(fetcher: BrowserFetcher) -> tuple[set[int], set[int]]:
        async def fetch(times: int) -> None:
            results = await asyncio.gather(*(fetcher.fetch(local_site.url("/ok")) for _ in range(times)))
            assert all(r.body == POUND_PAGE for r in results)

        await fetch(2)  # two tabs, one fetch each; both stay open
        both_tabs = our_renderer_pids()
        await fetch(1)  # the first tab's second fetch: it is recycled, the other stays open
        deadline = time.monotonic() + 30
        while our_renderer_pids() == both_tabs and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return both_tabs, our_renderer_pids()

    both_tabs, after = run_with(settings(recycle_page_after=2, recycle_scripted_page_after=2, concurrency=2), action)
    assert len(both_tabs) == 2, f"two open tabs, renderers {both_tabs}"
    assert len(after) == 1 and after < both_tabs, f"renderers {both_tabs} before the recycle, {after} after it"


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_a_tab_that_runs_scripts_is_replaced_sooner_than_one_that_does_not(local_site: LocalSite) -> None:
    """A renderer whose page runs scripts grows faster (the scripts' heap), so its tab has a bound of its own:
    three fetches without scripts share one tab's renderer, three with scripts each get a new one."""

    async def renderers_of(fetcher: BrowserFetcher, javascript: bool, before: set[int]) -> set[int]:
        seen: set[int] = set()
        fetching = asyncio.gather(*(fetcher.fetch(local_site.url("/ok"), javascript=javascript) for _ in range(3)))
        while not fetching.done():
            seen |= our_renderer_pids() - before
            await asyncio.sleep(0.01)
        assert all(r.body == POUND_PAGE for r in await fetching)
        return seen

    async def action(fetcher: BrowserFetcher) -> tuple[set[int], set[int]]:
        plain = await renderers_of(fetcher, False, set())
        return plain, await renderers_of(fetcher, True, plain)

    plain, scripted = run_with(settings(recycle_page_after=4, recycle_scripted_page_after=1, concurrency=1), action)
    assert len(plain) == 1, f"one tab without scripts, renderers {plain}"
    assert len(scripted) == 3, f"a new tab for each scripted fetch, renderers {scripted}"


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(180)
def test_browser_relaunches_after_page_quota_and_concurrent_fetches_succeed(local_site: LocalSite) -> None:
    async def action(fetcher: BrowserFetcher) -> dict[str, int]:
        results = await asyncio.gather(*(fetcher.fetch(local_site.url("/ok")) for _ in range(7)))
        assert all(r.body == POUND_PAGE for r in results)
        return fetcher.stats()

    stats = run_with(settings(relaunch_after_pages=3, concurrency=2), action)
    assert stats["pages_fetched"] == 7
    assert stats["relaunches"] == 2


@pytest.mark.browser
@needs_chromium
@pytest.mark.timeout(120)
def test_close_is_clean_and_idempotent(local_site: LocalSite) -> None:
    async def main() -> None:
        fetcher = BrowserFetcher(settings())
        async with fetcher:
            await fetcher.fetch(local_site.url("/ok"))
            assert len(our_chromium_main_pids()) == 1
        await fetcher.close()
        await fetcher.close()
        with pytest.raises(RuntimeError):
            await fetcher.fetch(local_site.url("/ok"))

    asyncio.run(main())
    deadline = time.monotonic() + 10
    while our_chromium_main_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert our_chromium_main_pids() == []
