"""The address policy as pure functions: hosts, ports, IP literals in every spelling, internal ranges."""

from __future__ import annotations

import pytest

from book_assets.scraper.fetch_browser import host_resolver_rules
from book_assets.scraper.targets import (
    ip_literal,
    is_internal,
    parse_allowed,
    target_allowed,
    with_start_port,
)

SANDBOX = frozenset({"127.0.0.1:8800"})


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8800/catalogue/", True),
        ("http://127.0.0.1:8800", True),
        ("http://127.0.0.1:3000/", False),  # the Dagster UI on the same host
        ("http://127.0.0.1/", False),
        ("http://127.0.0.2:8800/", False),
        ("http://127.1:8800/", False),  # another spelling of the allowed address is not the allowed entry
        ("http://localhost:8800/", False),
        ("http://[::1]:8800/", False),
        ("ftp://127.0.0.1:8800/", False),
        ("http://127.0.0.1:99999/", False),
    ],
)
def test_an_entry_with_a_port_allows_that_host_at_that_port_only(url: str, allowed: bool) -> None:
    assert target_allowed(url, SANDBOX) is allowed


def test_default_ports_count_as_one_origin_for_http_and_https() -> None:
    allowed = frozenset({"books.toscrape.com:443"})
    assert target_allowed("https://books.toscrape.com/", allowed)
    assert target_allowed("http://books.toscrape.com/", allowed)
    assert not target_allowed("https://books.toscrape.com:8443/", allowed)


def test_a_bare_host_allows_any_port_of_that_host() -> None:
    assert target_allowed("http://books.toscrape.com:8080/", frozenset({"books.toscrape.com"}))
    assert not target_allowed("http://toscrape.com/", frozenset({"books.toscrape.com"}))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.2/",
        "http://10.0.0.1/",
        "http://192.168.1.1:8080/",
        "http://172.16.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0/",
        "http://[::1]/",
        "http://[fe80::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.0.0.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://localhost/",
        "http://LOCALHOST./",
        "http://api.localhost/",
        "http://8.8.8.8/",  # a public IP literal is still not a name anyone allowed
    ],
)
def test_no_allowed_entries_refuses_ip_literals_and_internal_names(url: str) -> None:
    assert not target_allowed(url, frozenset())


def test_no_allowed_entries_still_allows_public_names() -> None:
    assert target_allowed("https://example.org/", frozenset())
    assert target_allowed("http://1password.example:8080/", frozenset())


def test_unreadable_entries_allow_nothing_rather_than_everything() -> None:
    assert not target_allowed("https://example.org/", frozenset({"bad:port"}))


@pytest.mark.parametrize(
    ("host", "internal"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("169.254.0.5", True),
        ("fd00::1", True),
        ("::", True),
        ("224.0.0.1", True),
        ("8.8.8.8", False),
        ("books.toscrape.com", False),
        ("localhost", True),
    ],
)
def test_internal_addresses_are_recognised(host: str, internal: bool) -> None:
    assert is_internal(host) is internal


def test_ip_literal_reads_every_resolver_spelling() -> None:
    assert str(ip_literal("2130706433")) == "127.0.0.1"
    assert str(ip_literal("0x7f.1")) == "127.0.0.1"
    assert str(ip_literal("[::ffff:10.0.0.1]")) == "10.0.0.1"
    assert ip_literal("books.toscrape.com") is None
    assert ip_literal("1password.com") is None


def test_allowed_entries_parse_host_port_and_ipv6() -> None:
    assert parse_allowed("Books.ToScrape.com.") == parse_allowed("books.toscrape.com")
    entry = parse_allowed("[::1]:8800")
    assert entry is not None and (entry.host, entry.port) == ("::1", 8800)
    assert parse_allowed("host:notaport") is None


def test_start_host_is_pinned_to_the_start_port_other_hosts_stay_as_given() -> None:
    assert with_start_port({"127.0.0.1"}, "http://127.0.0.1:8800/") == {"127.0.0.1:8800"}
    assert with_start_port({"books.toscrape.com", "cdn.example"}, "https://books.toscrape.com/") == {
        "books.toscrape.com:443",
        "cdn.example",
    }
    assert with_start_port({"[::1]"}, "http://[::1]:9000/") == {"[::1]:9000"}


def test_browser_resolver_rules_map_exact_ports_before_refusing_everything() -> None:
    rules = host_resolver_rules(frozenset({"127.0.0.1:8800", "cdn.example"}))
    assert rules == "MAP 127.0.0.1:8800 127.0.0.1:8800, MAP * ~NOTFOUND, EXCLUDE cdn.example"
    both = host_resolver_rules(frozenset({"books.toscrape.com:443"}))
    assert both.startswith("MAP books.toscrape.com:80 books.toscrape.com:80, MAP books.toscrape.com:443 ")
