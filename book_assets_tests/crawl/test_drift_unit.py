"""The arithmetic of field drift: which fields a contract failure names, the judgement of fill rates and value
shapes against the last good crawl's, and the lines a reader is shown."""

from __future__ import annotations

from book_assets.settings import Settings
from book_assets.store.drift import Coverage, DriftLimits, Measure, fields_named, headline, judged, percent

_DEFAULTS = Settings()
LIMITS = DriftLimits(
    _DEFAULTS.drift_threshold, _DEFAULTS.drift_min_pages, _DEFAULTS.drift_length_ratio, _DEFAULTS.drift_top_share
)


def test_a_contract_failure_names_its_fields_and_not_the_words_of_its_url() -> None:
    error = "missing_field: missing rating, description (http://x.test/catalogue/rating-price-tax_7/index.html)"
    assert fields_named(error) == {"rating", "description"}
    assert fields_named("bad_value: price_excl_tax (negative: -1.00)") == {"price_excl_tax"}


def test_percentages_show_a_decimal_only_when_there_is_one() -> None:
    assert (percent(1.0), percent(0.0), percent(0.995)) == ("100 %", "0 %", "99.5 %")


def _base(pages: int, filled: int, category: str = "") -> dict[tuple[str, str], Coverage]:
    return {(category, "description"): Coverage(category, "description", pages, filled)}


def test_a_fall_past_the_threshold_is_drift_and_one_within_it_is_not() -> None:
    fell = judged([Coverage("", "description", 100, 0)], _base(100, 99), limits=LIMITS, base_crawl_id=4)
    assert fell[0].drifted
    assert fell[0].line() == "description: 99 % -> 0 % of pages (99 of 100 in crawl 4 -> 0 of 100)"
    within = judged([Coverage("", "description", 100, 80)], _base(100, 99), limits=LIMITS, base_crawl_id=4)
    assert not within[0].drifted


def test_too_few_pages_on_either_side_are_never_drift() -> None:
    few = judged([Coverage("", "description", 10, 0)], _base(100, 100), limits=LIMITS, base_crawl_id=1)
    assert not few[0].drifted
    new = judged([Coverage("", "stock", 100, 0)], _base(100, 100), limits=LIMITS, base_crawl_id=1)
    assert not new[0].drifted and new[0].base_pages is None


def test_a_field_drifted_in_the_whole_crawl_is_shown_once_and_a_category_drift_alone_by_category() -> None:
    rows = [
        Coverage("", "description", 100, 0, drifted=True),
        Coverage("Poetry", "description", 30, 0, drifted=True),
        Coverage("Travel", "stock", 30, 0, drifted=True),
        Coverage("", "stock", 100, 70),
    ]
    assert [(r.category, r.field) for r in headline(rows)] == [("", "description"), ("Travel", "stock")]


def _shaped(
    pages: int, measured: int, top: int, median: int | None, *, field: str = "description", category: str = ""
) -> Coverage:
    return Coverage(
        category, field, pages, measured, measured=measured, top_count=top, top_value="x", median_length=median
    )


def test_a_median_length_cut_past_the_ratio_is_drift_on_length_and_a_normal_spread_is_not() -> None:
    base = {("", "description"): _shaped(100, 99, 1, 812)}
    short = judged([_shaped(100, 99, 1, 14)], base, limits=LIMITS, base_crawl_id=4)
    assert short[0].drifted and short[0].drifted_on == Measure.LENGTH
    assert short[0].line() == "description: median length 812 -> 14 chars (99 values in crawl 4 -> 99)"
    longer = judged([_shaped(100, 99, 1, 2000)], base, limits=LIMITS, base_crawl_id=4)
    assert longer[0].drifted_on == Measure.LENGTH
    assert not judged([_shaped(100, 99, 1, 600)], base, limits=LIMITS, base_crawl_id=4)[0].drifted


def test_one_value_on_every_page_is_drift_on_the_top_share_and_a_few_more_of_it_are_not() -> None:
    base = {("", "rating"): _shaped(100, 100, 24, None, field="rating")}
    constant = judged([_shaped(100, 100, 100, None, field="rating")], base, limits=LIMITS, base_crawl_id=4)
    assert constant[0].drifted and constant[0].drifted_on == Measure.TOP
    assert constant[0].line() == (
        "rating: most common value on 24 % -> 100 % of values (24 of 100 in crawl 4 -> 100 of 100: 'x')"
    )
    assert not judged([_shaped(100, 100, 40, None, field="rating")], base, limits=LIMITS, base_crawl_id=4)[0].drifted


def test_a_shape_measured_on_too_few_values_on_either_side_is_never_drift() -> None:
    base = {("", "description"): _shaped(100, 10, 1, 812)}
    assert not judged([_shaped(100, 99, 99, 14)], base, limits=LIMITS, base_crawl_id=4)[0].drifted
    base = {("", "description"): _shaped(100, 99, 1, 812)}
    assert not judged([_shaped(15, 10, 10, 14)], base, limits=LIMITS, base_crawl_id=4)[0].drifted


def test_a_fill_rate_fall_is_named_before_a_shape_change_of_the_same_field() -> None:
    base = {("", "description"): _shaped(100, 99, 1, 812)}
    both = judged([_shaped(100, 50, 50, 14)], base, limits=LIMITS, base_crawl_id=4)
    assert both[0].drifted_on == Measure.FILL
