"""``--site`` on the commands that act on one catalogue, run as a user runs them: as a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.settings import ConfigError, load_settings
from book_assets.sites.books import BOOKS
from book_assets.sites.quotes.definition import QUOTES
from book_assets_tests.conftest import child_env

CLI = [sys.executable, "-m", "book_assets.cli"]
COMMANDS = ["crawl", "status", "export", "changes", "reextract"]
#: The commands that read only the books' tables.
BOOKS_ONLY = [["reextract", "--from-warc"]]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_refuses_an_unknown_site_in_one_line_naming_the_known_ones(command: str) -> None:
    result = subprocess.run(
        [*CLI, command, "--site", "bokos"], capture_output=True, text=True, timeout=120, env=child_env()
    )
    assert result.returncode == 2, result.stdout + result.stderr
    known = "known: books, quotes"
    assert result.stderr == f"error: invalid setting site (BOOK_PIPELINE_SITE): no site named 'bokos'; {known}\n"


@pytest.mark.parametrize("command", BOOKS_ONLY)
def test_a_command_written_for_the_books_tables_refuses_the_quotes_site_in_one_line(command: list[str]) -> None:
    result = subprocess.run(
        [*CLI, *command, "--site", "quotes"], capture_output=True, text=True, timeout=120, env=child_env()
    )
    assert result.returncode == 2, result.stdout + result.stderr
    named = " ".join(command)
    message = f"error: invalid setting site (BOOK_PIPELINE_SITE): {named} supports site books only, not 'quotes'\n"
    assert result.stderr == message


@pytest.mark.parametrize("command", COMMANDS)
def test_every_catalogue_command_documents_the_site_option(command: str) -> None:
    result = subprocess.run([*CLI, command, "--help"], capture_output=True, text=True, timeout=120, env=child_env())
    assert result.returncode == 0, result.stderr
    assert "--site TEXT" in result.stdout


@pytest.mark.unit
def test_the_crawl_runs_on_books_from_its_own_start_page_unless_told_otherwise() -> None:
    config = CrawlConfig.from_settings(load_settings())
    assert config.site is BOOKS and config.base_url == BOOKS.default_base_url
    assert config.task_types == ("listing", "detail") and config.as_dict()["site"] == "books"
    elsewhere = CrawlConfig.from_settings(load_settings(site="books", base_url="http://127.0.0.1:8800/"))
    assert elsewhere.base_url == "http://127.0.0.1:8800/"
    with pytest.raises(ConfigError, match="no site named 'bokos'; known: books, quotes"):
        CrawlConfig.from_settings(load_settings(site="bokos"))


@pytest.mark.unit
def test_a_quotes_crawl_starts_at_quotes_toscrape_com_with_task_types_of_its_own() -> None:
    config = CrawlConfig.from_settings(load_settings(site="quotes"))
    assert config.site is QUOTES and config.base_url == "https://quotes.toscrape.com/"
    assert config.task_types == ("quotes", "quotes_js", "author") and config.detail_kind == "author"
    assert not set(config.task_types) & set(CrawlConfig.from_settings(load_settings()).task_types)


@pytest.mark.unit
def test_a_dagster_run_crawls_its_assets_site_and_a_site_resource_naming_another_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from book_assets.defs.crawl.steps import StepConfig
    from book_assets.defs.resources import FetcherResource, SchedulingResource, SiteResource, crawl_config

    monkeypatch.setenv("BOOK_PIPELINE_SITE", "books")
    quotes_run = StepConfig(site="quotes")
    assert crawl_config(SiteResource(), FetcherResource(), SchedulingResource(), quotes_run).site is QUOTES
    assert crawl_config(SiteResource(site="quotes"), FetcherResource(), SchedulingResource(), quotes_run).site is QUOTES
    message = (
        r"^invalid setting site \(the Dagster site resource\): it names 'books', but this run crawls the assets of "
        r"site 'quotes'; leave it unset \(each catalogue's assets crawl their own site\)$"
    )
    with pytest.raises(ConfigError, match=message):
        crawl_config(SiteResource(site="books"), FetcherResource(), SchedulingResource(), quotes_run)
    # A step run on its own, with no graph to name its site, crawls the resource's site or the setting's.
    assert crawl_config(SiteResource(), FetcherResource(), SchedulingResource()).site is BOOKS
