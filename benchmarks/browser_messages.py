"""Where the browser fetcher's time goes: Playwright driver messages per page, by direction and method.

Every Playwright call and every event crosses Python ↔ Node (the driver) as one JSON message, and most
also cross Node ↔ Chromium. This script fetches the sandbox's book pages with :class:`BrowserFetcher`
(the crawl's fetcher, default fetch settings, JavaScript off as ``javascript=auto`` starts) in one
process with no database, counts the messages the Python client sends and receives, and prints one JSON
line: pages/s, messages per page, and the peak PSS of this process tree by kind of process (the worker's
share of a crawl without its database work); then the most frequent ``type.method`` pairs per page.

Usage: python benchmarks/browser_messages.py [--pages 300] [--tabs 8] [--javascript]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from playwright._impl import connection as pw_connection

from book_assets.sandbox.catalogue import Catalogue
from book_assets.sandbox.server import SandboxServer
from book_assets.scraper.fetch_browser import BrowserFetcher
from book_assets.scraper.fetching import FetchSettings

COUNTS: Counter[str] = Counter()
PEAK_PSS: dict[str, float] = {}


def _kind(process: psutil.Process) -> str:
    """ "python", "node", or Chromium's own ``--type`` (renderer, gpu-process, utility...) or "browser"."""
    cmdline = process.cmdline()
    if not cmdline or process.pid == psutil.Process().pid:
        return "python"
    if "node" in cmdline[0]:
        return "node"
    found = next((m.group(1) for arg in cmdline if (m := re.match(r"--type=(\S+)", arg))), "browser")
    return found


def _sample_pss(stop: threading.Event) -> None:
    """Peak total PSS (MB) of this process and its descendants, and each kind's share at that moment."""
    me = psutil.Process()
    while not stop.wait(0.25):
        by_kind: defaultdict[str, float] = defaultdict(float)
        for process in [me, *me.children(recursive=True)]:
            try:
                by_kind[_kind(process)] += process.memory_full_info().pss / 1e6
            except psutil.Error:
                continue
        if sum(by_kind.values()) > PEAK_PSS.get("total", 0):
            PEAK_PSS.clear()
            PEAK_PSS.update({k: round(v, 1) for k, v in by_kind.items()}, total=round(sum(by_kind.values()), 1))


def _count_messages() -> None:
    """Wrap the Python client's send and dispatch so every message is counted."""
    connection = pw_connection.Connection
    send, dispatch = connection.send_message_to_server, connection.dispatch

    def counted_send(self: Any, obj: Any, method: str, params: Any, options: Any) -> Any:
        COUNTS[f"send {obj._type}.{method}"] += 1
        return send(self, obj, method, params, options)

    def counted_dispatch(self: Any, message: dict[str, Any]) -> None:
        if message.get("id"):
            COUNTS["recv reply"] += 1
        else:
            method = message.get("method")
            target = self._objects.get(message.get("guid") or "")
            detail = (message.get("params") or {}).get("method") if method == "event" else None
            name = f"{getattr(target, '_type', '?')}.{method}" + (f"({detail})" if detail else "")
            if method == "__create__":
                name = f"__create__ {message['params']['type']}"
            COUNTS[f"recv {name}"] += 1
        dispatch(self, message)

    connection.send_message_to_server = counted_send  # type: ignore[method-assign,assignment]
    connection.dispatch = counted_dispatch  # type: ignore[method-assign]


async def _run(urls: list[str], tabs: int, javascript: bool) -> float:
    settings = FetchSettings(concurrency=tabs, allowed_domains=frozenset({"127.0.0.1"}))
    async with BrowserFetcher(settings) as fetcher:
        await fetcher.fetch(urls[0], javascript=javascript)  # launch and first tab outside the count
        COUNTS.clear()
        started = time.monotonic()
        await asyncio.gather(*(fetcher.fetch(url, javascript=javascript) for url in urls))
        return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--tabs", type=int, default=8)
    parser.add_argument("--javascript", action="store_true", help="fetch with scripts on")
    args = parser.parse_args()
    _count_messages()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_pss, args=(stop,), daemon=True)
    with SandboxServer() as sandbox:
        paths = sorted(Catalogue().ground_truth())[: args.pages]
        sampler.start()
        elapsed = asyncio.run(_run([sandbox.url_for(p) for p in paths], args.tabs, args.javascript))
        stop.set()
    pages = len(paths)
    total = sum(COUNTS.values())
    top = {name: round(n / pages, 2) for name, n in COUNTS.most_common(25)}
    figures = {"pages_per_s": round(pages / elapsed, 1), "messages_per_page": round(total / pages, 1)}
    print(json.dumps({**figures, "peak_pss_mb": PEAK_PSS}))
    print(json.dumps(top, indent=1))


if __name__ == "__main__":
    main()
