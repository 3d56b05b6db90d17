"""Load benchmark of the sandbox: can it serve normal pages faster than any crawl will ask for them?

Starts the sandbox (by default in its own process, through the CLI, so client and server do not share a
GIL; ``--in-process`` runs it in a thread of this process as the test fixtures do), then hammers it from
loopback with a bounded number of keep-alive connections for a bounded time, cycling through every listing
and book page. Prints one JSON line: ``{"requests_per_s": N, ...}``.

The client is a minimal asyncio HTTP/1.1 client rather than httpx so that the figure measures the server,
not the client's own overhead on a 2-core machine.

    .venv/bin/python benchmarks/sandbox_bench.py [--seconds 5] [--connections 16] [--in-process]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from book_assets.sandbox import Catalogue, SandboxServer

MAX_CONNECTIONS = 64
MAX_SECONDS = 60.0


@contextmanager
def sandbox_process(seed: int) -> Iterator[tuple[str, int]]:
    """Run ``sandbox serve --port 0`` in a child process; yields its host and port, then terminates it."""
    command = [sys.executable, "-m", "book_assets.sandbox.cli", "serve", "--port", "0", "--seed", str(seed)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = re.search(r"http://([\d.]+):(\d+)/", line)
        if not match:
            raise RuntimeError(f"sandbox did not start: {line!r}")
        yield match.group(1), int(match.group(2))
    finally:
        child.terminate()
        child.wait(timeout=10)


async def _client(
    host: str, port: int, paths: list[str], offset: int, deadline: float, latencies: list[float]
) -> tuple[int, int]:
    """One keep-alive connection issuing GETs back to back until the deadline; returns (ok, errors)."""
    reader, writer = await asyncio.open_connection(host, port)
    ok = errors = 0
    i = offset
    try:
        while time.perf_counter() < deadline:
            path = paths[i % len(paths)]
            i += 1
            sent = time.perf_counter()
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - sent)
            if head.startswith(b"HTTP/1.1 200"):
                ok += 1
            else:
                errors += 1
    finally:
        writer.close()
    return ok, errors


async def _hammer(host: str, port: int, paths: list[str], connections: int, seconds: float) -> dict[str, object]:
    # Warm-up: one pass over every page, so the timed run measures serving, not first-time rendering.
    await asyncio.gather(*(_client(host, port, paths[i::4], 0, time.perf_counter() + 1.0, []) for i in range(4)))
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds
    results = await asyncio.gather(
        *(_client(host, port, paths, k * 997, deadline, latencies) for k in range(connections))
    )
    elapsed = time.perf_counter() - started
    ok = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    latencies.sort()
    return {
        "requests_per_s": round((ok + errors) / elapsed, 1),
        "requests": ok + errors,
        "non_200": errors,
        "seconds": round(elapsed, 2),
        "connections": connections,
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 2),
        "latency_ms_p99": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-process", action="store_true", help="run the server in a thread of this process")
    args = parser.parse_args()
    seconds = min(max(args.seconds, 0.5), MAX_SECONDS)
    connections = min(max(args.connections, 1), MAX_CONNECTIONS)

    catalogue = Catalogue(seed=args.seed)
    paths = catalogue.listing_paths() + [book.url_path for book in catalogue]
    if args.in_process:
        with SandboxServer(catalogue) as server:
            result = asyncio.run(_hammer(server.host, server.port, paths, connections, seconds))
    else:
        with sandbox_process(args.seed) as (host, port):
            result = asyncio.run(_hammer(host, port, paths, connections, seconds))
    result["mode"] = "in-process" if args.in_process else "subprocess"
    result["pages"] = len(paths)
    result["cpus"] = os.cpu_count()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
