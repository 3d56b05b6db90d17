"""Which URLs a crawl may request: its allowed origins, and never an internal address by accident.

Why a policy of its own: a crawler follows links and redirects written by the site, so a page
can point it at ``http://127.0.0.1:5432/``, ``http://169.254.169.254/`` (a cloud's metadata service) or
the machine's Dagster UI. Both fetchers ask :func:`target_allowed` before the first request, on every
redirect hop and on a meta refresh, so the rule is written once, here, as pure functions of strings.

The rules:

* An allowed entry is ``host`` or ``host:port`` (IPv6 as ``[::1]:8800``). ``host:port`` allows exactly that
  port; the web's two default ports count as one (``example.com:443`` also allows ``:80``, since
  sites move between http and https on the same host). A bare ``host`` allows it on any port — the crawl's
  own start host is never bare: :func:`with_start_port` pins it to the start URL's port, so the sandbox on
  ``127.0.0.1:8800`` does not open ``127.0.0.1:3000``.
* With no allowed entries every host *by name* may be fetched, but no IP literal (in any spelling a
  resolver accepts: ``127.1``, ``0x7f.0.0.1``, ``2130706433``, ``[::ffff:127.0.0.1]``) and no
  ``localhost`` name: internal targets must be allowed explicitly.
* Names are compared as written (lower-cased, trailing dot dropped), never resolved: a spelling that only
  resolves to an allowed address (``127.1`` for ``127.0.0.1``) is refused, which errs on the safe side.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_WEB_DEFAULT_PORTS = frozenset(DEFAULT_PORTS.values())
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL would connect: scheme, normalised host (IPv6 without brackets) and effective port."""

    scheme: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class AllowedEntry:
    host: str
    port: int | None  # None: any port

    def matches(self, target: Target) -> bool:
        if self.host != target.host:
            return False
        if self.port is None or self.port == target.port:
            return True
        return self.port in _WEB_DEFAULT_PORTS and target.port in _WEB_DEFAULT_PORTS


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


def parse_target(url: str) -> Target | None:
    """The target of an http(s) URL; ``None`` when it has another scheme, no host or an unreadable port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = _normal_host(parts.hostname or "")
    if scheme not in DEFAULT_PORTS or not host:
        return None
    return Target(scheme=scheme, host=host, port=port if port is not None else DEFAULT_PORTS[scheme])


def parse_allowed(entry: str) -> AllowedEntry | None:
    """``host``, ``host:port`` or ``[v6]:port``; ``None`` for an unreadable entry (which then allows nothing)."""
    text = entry.strip()
    try:
        parts = urlsplit(f"http://{text}/")
        port = parts.port
    except ValueError:
        return None
    host = _normal_host(parts.hostname or "")
    return AllowedEntry(host=host, port=port) if host else None


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` spells, in any form a resolver reads as an address, else ``None``.

    ``inet_aton`` accepts the historic IPv4 forms Chromium and glibc still honour (``127.1``, octal,
    hex, a single 32-bit number); an IPv4-mapped IPv6 address is returned as its IPv4 address.
    """
    host = _normal_host(host).strip("[]")
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        if not host or not all(c in "0123456789abcdefx." for c in host) or not host[0].isdigit():
            return None
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_internal(host: str) -> bool:
    """Loopback, private, link-local, unspecified, reserved or multicast address, or a ``localhost`` name."""
    name = _normal_host(host)
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return True
    address = ip_literal(name)
    if address is None:
        return False
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_unspecified
        or address.is_reserved
        or address.is_multicast
    )


@dataclass(frozen=True, slots=True)
class AllowedTargets:
    """A crawl's allowed entries read once and looked up by host: every link of every page is checked against
    them, and a crawl of a thousand sites allows a thousand entries."""

    by_host: Mapping[str, tuple[AllowedEntry, ...]]
    given: bool  # entries were given, readable or not

    def allows(self, target: Target) -> bool:
        """Whether the target may be requested (the module docstring's rules)."""
        if self.by_host:
            return any(entry.matches(target) for entry in self.by_host.get(target.host, ()))
        if self.given:
            return False  # entries were given but none was readable: allow nothing rather than everything
        return ip_literal(target.host) is None and not is_internal(target.host)


@functools.lru_cache(maxsize=64)
def allowed_targets(allowed: frozenset[str]) -> AllowedTargets:
    """The entries of ``allowed`` read and indexed by host (cached: a crawl passes the same set for each URL)."""
    by_host: dict[str, list[AllowedEntry]] = {}
    for entry in filter(None, map(parse_allowed, allowed)):
        by_host.setdefault(entry.host, []).append(entry)
    return AllowedTargets({host: tuple(entries) for host, entries in by_host.items()}, given=bool(allowed))


def target_allowed(url: str, allowed: Iterable[str]) -> bool:
    """Whether ``url`` may be requested under the allowed entries (see the module docstring)."""
    target = parse_target(url)
    return target is not None and allowed_targets(frozenset(allowed)).allows(target)


def with_start_port(allowed: Iterable[str], start_url: str) -> frozenset[str]:
    """``allowed`` with the start URL's host pinned to the start URL's port (added when missing)."""
    start = parse_target(start_url)
    entries = {a.strip().lower() for a in allowed}
    if start is None:
        return frozenset(entries)
    host = f"[{start.host}]" if ":" in start.host else start.host
    pinned = {e for e in entries if (p := parse_allowed(e)) is None or p.host != start.host or p.port is not None}
    return frozenset(pinned | {f"{host}:{start.port}"})
