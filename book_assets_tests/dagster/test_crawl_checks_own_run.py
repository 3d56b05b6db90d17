"""The crawl checks judge their own run: a check of a run reads that run's materialization, even when another
run materialized the asset after it (two crawl runs overlapping), and a run of the checks alone judges the
latest materialization.

The crawl asset is stood in for by a multi-asset with the same keys that records a crawl's metadata: the
first run records a partial crawl that found nothing; before its checks run, a second run records a complete
crawl that found books. The checks are the location's own.
"""

from collections.abc import Iterator

import dagster as dg
import pytest

from book_assets.defs.crawl.checks import BOOK_DETAILS, LISTING_DISCOVERY, crawl_complete, found_books
from book_assets.defs.resources import DatabaseResource

pytestmark = pytest.mark.slow

SPECS = [dg.AssetSpec(LISTING_DISCOVERY), dg.AssetSpec(BOOK_DETAILS, deps=[LISTING_DISCOVERY])]


def crawl_metadata(*, books_found: int, failed_drain_steps: int) -> list[dg.MaterializeResult[None]]:
    """What a crawl's report records for the two assets."""
    return [
        dg.MaterializeResult(asset_key=LISTING_DISCOVERY, metadata={"books_found": books_found}),
        dg.MaterializeResult(
            asset_key=BOOK_DETAILS, metadata={"failed_drain_steps": failed_drain_steps, "drain_steps": 2}
        ),
    ]


@dg.multi_asset(specs=SPECS, name="complete_crawl")
def complete_crawl() -> Iterator[dg.MaterializeResult[None]]:
    yield from crawl_metadata(books_found=5, failed_drain_steps=0)


@dg.multi_asset(specs=SPECS, name="overtaken_crawl")
def overtaken_crawl(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult[None]]:
    """A partial crawl that found nothing; another crawl run ends after its report, before its checks."""
    yield from crawl_metadata(books_found=0, failed_drain_steps=1)
    assert dg.materialize([complete_crawl], instance=context.instance).success


def checks_of(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_the_checks_of_a_run_judge_its_own_crawl_when_another_run_materialized_after_it(database_url: str) -> None:
    resources = {"database": DatabaseResource(url=database_url)}
    with dg.DagsterInstance.ephemeral() as instance:
        first = dg.materialize(
            [overtaken_crawl, crawl_complete, found_books], instance=instance, resources=resources, raise_on_error=False
        )
        latest = instance.get_latest_materialization_event(BOOK_DETAILS)
        assert latest is not None and latest.run_id != first.run_id  # the second run's is the latest
        checks = checks_of(first)
        assert not checks["crawl_complete"].passed, "judged the second run's complete crawl"
        assert checks["crawl_complete"].metadata["failed_drain_steps"].value == 1
        assert not checks["found_books"].passed, "judged the second run's books"
        assert checks["found_books"].metadata["books_found"].value == 0

        # The checks run alone (after an operator's fix): they judge the latest materialization, the second run's.
        alone = dg.materialize(
            [complete_crawl, crawl_complete, found_books],
            selection=dg.AssetSelection.checks(crawl_complete, found_books),
            instance=instance,
            resources=resources,
        )
        checks = checks_of(alone)
        assert checks["crawl_complete"].passed and checks["found_books"].passed
        assert checks["crawl_complete"].metadata["judged_run"].value == latest.run_id
