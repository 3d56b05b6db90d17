"""The autoscaler's decisions (pure): Crawlee's AutoscaledPool rules on CPU, memory and event-loop samples; and the
workers and pages in flight a crawl starts with."""

from __future__ import annotations

import pytest

from book_assets.crawl.autoscale import Autoscaler, LoadSample
from book_assets.crawl.config import CrawlConfig
from book_assets.settings import BROWSER_MIN_CONCURRENCY, BROWSER_WORKERS, WORKERS, load_settings

CALM = LoadSample(cpu=0.5, memory=0.5, loop_lag_s=0.001)
HOT_CPU = LoadSample(cpu=0.99, memory=0.5, loop_lag_s=0.001)
FULL_MEMORY = LoadSample(cpu=0.5, memory=0.95, loop_lag_s=0.001)
LAGGING = LoadSample(cpu=0.5, memory=0.5, loop_lag_s=0.2)


def _interval(scaler: Autoscaler, samples: list[LoadSample], busy: int) -> int:
    for sample in samples:
        scaler.observe(sample)
    return scaler.adjust(busy)


def test_a_busy_calm_pool_scales_up_one_step_at_a_time_to_its_maximum() -> None:
    scaler = Autoscaler(4, 8)
    seen = [_interval(scaler, [CALM] * 10, busy=scaler.desired) for _ in range(8)]
    assert seen == [5, 6, 7, 8, 8, 8, 8, 8]


def test_an_idle_pool_does_not_scale_up() -> None:
    scaler = Autoscaler(4, 16)
    assert _interval(scaler, [CALM] * 10, busy=2) == 4  # under 90% of its concurrency in use


@pytest.mark.parametrize(("hot", "share"), [(HOT_CPU, 5), (FULL_MEMORY, 3), (LAGGING, 7)])
def test_an_overloaded_resource_scales_down_to_the_minimum(hot: LoadSample, share: int) -> None:
    scaler = Autoscaler(2, 16, desired=10)
    samples = [hot] * share + [CALM] * (10 - share)  # over 40% CPU, 20% memory, 60% loop samples
    assert _interval(scaler, samples, busy=10) == 9
    for _ in range(20):
        _interval(scaler, samples, busy=10)
    assert scaler.desired == 2


def test_occasional_load_below_the_shares_is_not_overload() -> None:
    scaler = Autoscaler(2, 16, desired=6)
    samples = [HOT_CPU] * 4 + [FULL_MEMORY] * 2 + [CALM] * 14
    assert _interval(scaler, samples, busy=6) == 7


def test_concurrency_pinned_by_a_number_and_autoscaled_when_unset() -> None:
    pinned = CrawlConfig.from_settings(load_settings(concurrency=3))
    assert (pinned.min_concurrency, pinned.fetch.concurrency) == (3, 3)
    scaled = CrawlConfig.from_settings(load_settings(min_concurrency=2, max_concurrency=12))
    assert (scaled.min_concurrency, scaled.fetch.concurrency) == (2, 12)
    assert Autoscaler(3, 3).pinned and not Autoscaler(2, 12).pinned
    with pytest.raises(ValueError, match="min_concurrency"):
        Autoscaler(5, 4)


def test_an_http_crawl_starts_at_its_ceiling_and_a_browser_crawl_at_a_few_tabs() -> None:
    http = CrawlConfig.from_settings(load_settings(fetch_mode="http", max_concurrency=12))
    assert (http.min_concurrency, http.fetch.concurrency) == (12, 12)
    for mode in ("browser", "adaptive"):
        browser = CrawlConfig.from_settings(load_settings(fetch_mode=mode, max_concurrency=12))
        assert (browser.min_concurrency, browser.fetch.concurrency) == (BROWSER_MIN_CONCURRENCY, 12)
    chosen = CrawlConfig.from_settings(load_settings(fetch_mode="http", min_concurrency=3))
    assert chosen.min_concurrency == 3


def test_a_browser_crawl_runs_one_chromium_and_the_other_modes_a_worker_per_core_unless_workers_is_set() -> None:
    by_mode = {
        mode: CrawlConfig.from_settings(load_settings(fetch_mode=mode)).workers
        for mode in ("browser", "http", "adaptive")
    }
    assert by_mode == {"browser": BROWSER_WORKERS, "http": WORKERS, "adaptive": WORKERS}
    assert (BROWSER_WORKERS, WORKERS) == (1, 2)
    for mode in ("browser", "http"):
        assert CrawlConfig.from_settings(load_settings(fetch_mode=mode, workers=3)).workers == 3
