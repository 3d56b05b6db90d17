"""Category weights: loading from files, strings and config, precedence, validation, name matching."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from book_assets.sandbox.catalogue import CATEGORY_SIZES
from book_assets.scheduling.weights import (
    CategoryWeights,
    WeightsError,
    load_weights_file,
    parse_weights,
    resolve_weights,
    warn_unknown,
    weights_from_mapping,
)
from book_assets.settings import ConfigError, load_settings

pytestmark = pytest.mark.unit

SITE_CATEGORIES = [name for name, _ in CATEGORY_SIZES]


def test_inline_string_sets_weights_and_default() -> None:
    weights = parse_weights("Travel=3, Mystery=2 ,*=0.5")
    assert (weights.weight("Travel"), weights.weight("Mystery"), weights.weight("Crime")) == (3, 2, 0.5)
    assert weights.as_dict() == {"Travel": 3, "Mystery": 2, "*": 0.5}


def test_unlisted_categories_weigh_one_by_default() -> None:
    assert parse_weights("Travel=3").weight("Poetry") == 1
    assert CategoryWeights().weight("Poetry") == 1


def test_slug_matches_the_category_name_but_other_spellings_do_not() -> None:
    weights = parse_weights("sequential-art=4,historical fiction=2")
    assert weights.weight("Sequential Art") == 4
    assert weights.weight("Historical Fiction") == 1  # neither the name nor the slug
    assert warn_unknown(weights, SITE_CATEGORIES) == ["historical fiction"]


def test_zero_weight_categories_are_inactive() -> None:
    weights = parse_weights("Travel=0,*=1")
    assert weights.active(["Travel", "Mystery", "Crime"]) == ["Mystery", "Crime"]


def test_json_and_yaml_files_load_the_same_weights(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text('{"Travel": 3, "Mystery": 2, "*": 1}')
    (tmp_path / "w.yaml").write_text("Travel: 3\nMystery: 2\n'*': 1\n")
    assert load_weights_file(tmp_path / "w.json").as_dict() == load_weights_file(tmp_path / "w.yaml").as_dict()


def test_inline_weights_override_the_file_including_the_default(tmp_path: Path) -> None:
    file = tmp_path / "weights.yaml"
    file.write_text("Travel: 3\nsequential-art: 2\nMystery: 5\n'*': 0\n")
    weights = resolve_weights(weights_file=file, weights="Sequential Art=7,*=1")
    assert weights.as_dict() == {"Travel": 3, "Mystery": 5, "Sequential Art": 7, "*": 1}


def test_inline_weights_without_a_default_keep_the_files_default(tmp_path: Path) -> None:
    file = tmp_path / "weights.json"
    file.write_text('{"*": 0}')
    assert resolve_weights(weights_file=file, weights="Travel=2").weight("Crime") == 0


def test_resolve_reads_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOK_PIPELINE_WEIGHTS", "Travel=3")
    assert resolve_weights(load_settings()).weight("Travel") == 3
    assert resolve_weights(load_settings(), weights={"Travel": 5}).weight("Travel") == 5  # Dagster config


def test_no_weights_anywhere_means_equal_weights() -> None:
    assert resolve_weights().as_dict() == {"*": 1}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Travel=-1", "'Travel' in BOOK_PIPELINE_WEIGHTS must be >= 0"),
        ("Travel=abc", "'Travel' in BOOK_PIPELINE_WEIGHTS must be a number, got 'abc'"),
        ("Travel=nan", "'Travel' in BOOK_PIPELINE_WEIGHTS must be a finite number"),
        ("Mystery=2,Travel=inf", "'Travel' in BOOK_PIPELINE_WEIGHTS must be a finite number"),
        ("*=-2", "default weight ('*') in BOOK_PIPELINE_WEIGHTS"),
        ("Travel", "'Travel' is not of the form Category=weight"),
        ("Travel=1,Travel=2", "category 'Travel' twice"),
    ],
)
def test_bad_inline_weight_names_the_culprit(text: str, fragment: str) -> None:
    with pytest.raises(WeightsError) as info:
        parse_weights(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_boolean_weight_is_refused_even_from_yaml(tmp_path: Path) -> None:
    file = tmp_path / "w.yaml"
    file.write_text("Travel: yes\n")
    with pytest.raises(WeightsError, match=r"'Travel' in weights file '.*w\.yaml' must be a number, not the boolean"):
        load_weights_file(file)
    with pytest.raises(WeightsError, match="'Mystery' in config must be a number, not the boolean False"):
        weights_from_mapping({"Mystery": False})


def test_name_and_slug_of_one_category_with_different_weights_is_refused() -> None:
    with pytest.raises(WeightsError, match="'sequential-art' twice"):
        weights_from_mapping({"Sequential Art": 1, "sequential-art": 2})


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("w.yaml", "Travel: [3\n", "is not valid YAML"),
        ("w.json", '{"Travel": 3,}', "is not valid JSON"),
        ("w.yaml", "- Travel\n- Mystery\n", "must be a mapping of category to weight, got list"),
        ("w.yaml", "", "is empty"),
        ("w.yaml", "Travel: three\n", "'Travel' in weights file"),
    ],
)
def test_malformed_file_is_refused_with_its_path(tmp_path: Path, name: str, content: str, fragment: str) -> None:
    file = tmp_path / name
    file.write_text(content)
    with pytest.raises(WeightsError) as info:
        load_weights_file(file)
    assert fragment in str(info.value) and name in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match=r"nowhere\.yaml' does not exist"):
        resolve_weights(weights_file=tmp_path / "nowhere.yaml")


def test_weights_error_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        parse_weights("Travel=-1")


def test_unknown_categories_are_returned_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    weights = parse_weights("Travel=2,Travle=3,sequential-art=1,*=1")
    with caplog.at_level(logging.WARNING, logger="book_assets.scheduling.weights"):
        assert warn_unknown(weights, SITE_CATEGORIES) == ["Travle"]
    assert "'Travle'" in caplog.text


def test_weights_are_immutable() -> None:
    weights = parse_weights("Travel=3")
    with pytest.raises(TypeError):
        weights.weights["Travel"] = 1  # type: ignore[index]
