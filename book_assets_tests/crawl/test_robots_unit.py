"""What a robots.txt fetch means (pure): RFC 9309's fetched / unavailable / unreachable, and our Crawl-delay."""

from __future__ import annotations

from book_assets.crawl.robots import (
    HOLD_MARGIN_S,
    MAX_BYTES,
    RobotsState,
    Verdict,
    fetch_outcome,
    origin_of,
    parse_file,
    step_hold_s,
)
from book_assets.scraper.fetching import fetch_error

UA = "book-pipeline/0.1 (open-source crawler of books.toscrape.com; +book-pipeline)"
ORIGIN = "https://books.toscrape.com"


def test_the_origin_keeps_scheme_host_and_port_and_drops_the_rest() -> None:
    assert origin_of("HTTPS://Books.ToScrape.com/catalogue/x.html?y=1") == ORIGIN
    assert origin_of("http://127.0.0.1:8000/a") == "http://127.0.0.1:8000"


def test_rules_for_our_user_agent_apply_and_crawl_delay_is_read() -> None:
    body = "User-agent: book-pipeline\nDisallow: /private/\nCrawl-delay: 2.5\n\nUser-agent: *\nDisallow: /\n"
    robots = parse_file(ORIGIN, body, UA)
    assert robots.verdict(f"{ORIGIN}/private/a.html", UA) is Verdict.DISALLOWED
    assert robots.verdict(f"{ORIGIN}/catalogue/a.html", UA) is Verdict.ALLOWED
    assert robots.crawl_delay_s == 2.5


def test_a_zero_or_missing_crawl_delay_is_none() -> None:
    assert parse_file(ORIGIN, "User-agent: *\nCrawl-delay: 0\n", UA).crawl_delay_s is None
    assert parse_file(ORIGIN, "User-agent: *\nDisallow:\n", UA).crawl_delay_s is None


def test_only_the_first_500_kib_are_parsed() -> None:
    body = "User-agent: *\n" + "#" * MAX_BYTES + "\nDisallow: /\n"
    assert parse_file(ORIGIN, body, UA).verdict(f"{ORIGIN}/a", UA) is Verdict.ALLOWED


def test_a_4xx_means_no_rules_and_a_5xx_or_network_error_means_unreachable() -> None:
    url = f"{ORIGIN}/robots.txt"
    missing = fetch_outcome(ORIGIN, None, fetch_error("http_404", "not found", url=url, status=404), UA)
    assert missing.state is RobotsState.UNAVAILABLE and missing.verdict(f"{ORIGIN}/a", UA) is Verdict.ALLOWED
    for error in (
        fetch_error("http_5xx", "server error 503", url=url, status=503),
        fetch_error("http_429", "too many requests", url=url, status=429),
        fetch_error("connection", "reset", url=url),
    ):
        down = fetch_outcome(ORIGIN, None, error, UA)
        assert down.state is RobotsState.UNREACHABLE and down.verdict(f"{ORIGIN}/a", UA) is Verdict.UNREACHABLE


def test_a_held_fetch_step_lasts_its_wait_one_request_timeout_and_the_margin() -> None:
    assert step_hold_s(30.0) == 30.0 + HOLD_MARGIN_S
    assert step_hold_s(2.0, wait_s=1.5) == 3.5 + HOLD_MARGIN_S
    assert step_hold_s(2.0, wait_s=-0.1) == 2.0 + HOLD_MARGIN_S  # a slot already due waits nothing


def test_a_rule_cut_by_the_500_kib_limit_is_dropped_not_shortened() -> None:
    head = "User-agent: *\nDisallow: /a/\n#"
    body = head + "#" * (MAX_BYTES - len(head) - len("\nDisallow: /pri")) + "\nDisallow: /private/\n"
    file = parse_file(ORIGIN, body, UA)
    assert file.verdict(f"{ORIGIN}/a/1", UA) is Verdict.DISALLOWED
    assert file.verdict(f"{ORIGIN}/prices", UA) is Verdict.ALLOWED  # "Disallow: /pri" would have matched
    assert file.body is not None and len(file.body.encode()) <= MAX_BYTES


def test_a_nul_byte_is_replaced_and_the_rules_around_it_still_apply() -> None:
    file = parse_file(ORIGIN, b"User-agent: *\nDisallow: /a/\n# a \x00 here\nDisallow: /b\x00c\n", UA)
    assert file.body is not None and "\x00" not in file.body
    assert file.verdict(f"{ORIGIN}/a/1", UA) is Verdict.DISALLOWED
    assert file.verdict(f"{ORIGIN}/bc", UA) is Verdict.ALLOWED
    assert parse_file(ORIGIN, file.body, UA).body == file.body  # read back from the stored row: the same
