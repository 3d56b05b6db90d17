"""``--site`` on the commands that act on one catalogue, run as a user runs them: as a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

from book_assets.crawl.config import CrawlConfig
from book_assets.settings import ConfigError, load_settings
from book_assets.sites.books import BOOKS
from book_assets_tests.conftest import child_env

CLI = [sys.executable, "-m", "book_assets.cli"]
COMMANDS = ["crawl", "status", "export", "changes", "reextract"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_refuses_an_unknown_site_in_one_line_naming_the_known_ones(command: str) -> None:
    result = subprocess.run(
        [*CLI, command, "--site", "quotes"], capture_output=True, text=True, timeout=120, env=child_env()
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == "error: invalid setting site (BOOK_PIPELINE_SITE): no site named 'quotes'; known: books\n"


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
    with pytest.raises(ConfigError, match="no site named 'quotes'; known: books"):
        CrawlConfig.from_settings(load_settings(site="quotes"))
