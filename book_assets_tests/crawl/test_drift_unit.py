"""The arithmetic of field drift: which fields a contract failure names, the judgement of fill rates against the
last good crawl's, and the lines a reader is shown."""

from __future__ import annotations

from book_assets.store.drift import Coverage, fields_named, headline, judged, percent


def test_a_contract_failure_names_its_fields_and_not_the_words_of_its_url() -> None:
    error = "missing_field: missing rating, description (http://x.test/catalogue/rating-price-tax_7/index.html)"
    assert fields_named(error) == {"rating", "description"}
    assert fields_named("bad_value: price_excl_tax (negative: -1.00)") == {"price_excl_tax"}


def test_percentages_show_a_decimal_only_when_there_is_one() -> None:
    assert (percent(1.0), percent(0.0), percent(0.995)) == ("100 %", "0 %", "99.5 %")


def _base(pages: int, filled: int, category: str = "") -> dict[tuple[str, str], Coverage]:
    return {(category, "description"): Coverage(category, "description", pages, filled)}


def test_a_fall_past_the_threshold_is_drift_and_one_within_it_is_not() -> None:
    fell = judged([Coverage("", "description", 100, 0)], _base(100, 99), threshold=0.2, min_pages=20, base_crawl_id=4)
    assert fell[0].drifted
    assert fell[0].line() == "description: 99 % -> 0 % of pages (99 of 100 in crawl 4 -> 0 of 100)"
    within = judged(
        [Coverage("", "description", 100, 80)], _base(100, 99), threshold=0.2, min_pages=20, base_crawl_id=4
    )
    assert not within[0].drifted


def test_too_few_pages_on_either_side_are_never_drift() -> None:
    few = judged([Coverage("", "description", 10, 0)], _base(100, 100), threshold=0.2, min_pages=20, base_crawl_id=1)
    assert not few[0].drifted
    new = judged([Coverage("", "stock", 100, 0)], _base(100, 100), threshold=0.2, min_pages=20, base_crawl_id=1)
    assert not new[0].drifted and new[0].base_pages is None


def test_a_field_drifted_in_the_whole_crawl_is_shown_once_and_a_category_drift_alone_by_category() -> None:
    rows = [
        Coverage("", "description", 100, 0, drifted=True),
        Coverage("Poetry", "description", 30, 0, drifted=True),
        Coverage("Travel", "stock", 30, 0, drifted=True),
        Coverage("", "stock", 100, 70),
    ]
    assert [(r.category, r.field) for r in headline(rows)] == [("", "description"), ("Travel", "stock")]
