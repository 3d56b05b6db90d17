"""Category weights: how much of the crawl (and of the snapshot) each category gets.

Weights come from a file (``--weights FILE`` / ``weights_file``: JSON or YAML), an inline string
(``BOOK_PIPELINE_WEIGHTS`` or the ``weights`` setting: ``"Travel=3,Mystery=2,*=1"``) or a mapping (Dagster
config). :func:`resolve_weights` combines file and inline, the inline entries winning, so a one-off override
does not require editing the file.

Rules, the same for every source:

* a weight is a finite number ``>= 0``; 0 means "skip this category"; ``"*"`` sets the default for every
  category not listed (default 1);
* negative, non-numeric, NaN/infinite and boolean values are refused with :class:`WeightsError`, whose
  one-line message names the category and the source (YAML's ``yes`` is a boolean, not 1);
* a key matches a category by its name exactly as the site shows it (``"Sequential Art"``) or by its slug
  as in the site's URLs (``"sequential-art"``), so both can be copied from the site. Other spellings
  (``"sequential art"``, ``"SEQUENTIAL ART"``) match nothing and are reported by :func:`warn_unknown`:
  guessing would let a typo silently fall back to the default weight.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from book_assets.categories import slugify
from book_assets.settings import ConfigError, Settings

log = logging.getLogger(__name__)

DEFAULT_KEY = "*"
#: Environment variable of the inline form (the ``weights`` setting).
ENV_VAR = "BOOK_PIPELINE_WEIGHTS"


class WeightsError(ConfigError):
    """Category weights that cannot be used; the one-line message names the category and the source."""


@dataclass(frozen=True)
class CategoryWeights:
    """Weights of categories by name or slug, with a default for the rest. Immutable.

    Build it with the loaders below rather than directly; the constructor does not validate.
    """

    weights: Mapping[str, float] = field(default_factory=dict)
    default: float = 1
    source: str = "defaults"
    #: Whether ``default`` was given (``"*"``) rather than assumed: only then does it override in :meth:`merged`.
    explicit_default: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))

    def __reduce__(self) -> tuple[Any, ...]:
        # A read-only mapping cannot be pickled; worker processes get the weights as a plain dict.
        return (CategoryWeights, (dict(self.weights), self.default, self.source, self.explicit_default))

    def weight(self, category: str) -> float:
        """The weight of ``category`` (a name as the site shows it); the default when not listed."""
        if category in self.weights:
            return self.weights[category]
        return self.weights.get(slugify(category), self.default)

    def active(self, categories: Iterable[str]) -> list[str]:
        """``categories`` whose weight is positive, in the given order (weight 0 means skip)."""
        return [c for c in categories if self.weight(c) > 0]

    def for_categories(self, categories: Iterable[str]) -> dict[str, float]:
        """Each category name -> its weight: the form ``TaskQueue.set_group_weights`` takes (groups by name)."""
        return {c: self.weight(c) for c in categories}

    def as_dict(self) -> dict[str, float]:
        """The entries as given plus ``"*"``: JSON-ready, and loadable again with :func:`weights_from_mapping`."""
        return {**self.weights, DEFAULT_KEY: self.default}

    def merged(self, override: CategoryWeights) -> CategoryWeights:
        """These weights with ``override``'s entries (and its default, if it set one) taking precedence."""
        entries = dict(self.weights)
        for key, value in override.weights.items():
            # drop the other spelling (name vs slug) of the same category, so the override really wins
            for old in [k for k in entries if slugify(k) == slugify(key)]:
                del entries[old]
            entries[key] = value
        default = override.default if override.explicit_default else self.default
        explicit = self.explicit_default or override.explicit_default
        return CategoryWeights(entries, default, f"{self.source} + {override.source}", explicit)


def _number(value: object, category: str, source: str) -> float:
    where = "the default weight ('*')" if category == DEFAULT_KEY else f"the weight of category {category!r}"
    if isinstance(value, bool):
        raise WeightsError(f"{where} in {source} must be a number, not the boolean {value!r}")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise WeightsError(f"{where} in {source} must be a number, got {text!r}") from None
    if not isinstance(value, int | float):
        raise WeightsError(f"{where} in {source} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise WeightsError(f"{where} in {source} must be a finite number, got {value!r}")
    if value < 0:
        raise WeightsError(f"{where} in {source} must be >= 0 (0 skips the category), got {value!r}")
    return int(value) if float(value).is_integer() else float(value)


def weights_from_mapping(mapping: Mapping[str, Any], source: str = "config") -> CategoryWeights:
    """Validated weights from a mapping of category -> weight (``"*"``: default), e.g. Dagster config."""
    if not isinstance(mapping, Mapping):
        raise WeightsError(f"weights in {source} must be a mapping of category to weight, got {type(mapping).__name__}")
    entries: dict[str, float] = {}
    by_slug: dict[str, str] = {}
    default: float = 1
    sets_default = False
    for raw_key, raw_value in mapping.items():
        if not isinstance(raw_key, str) or not raw_key.strip():
            raise WeightsError(f"weights in {source}: category names must be non-empty text, got {raw_key!r}")
        key = raw_key.strip()
        value = _number(raw_value, key, source)
        if key == DEFAULT_KEY:
            default, sets_default = value, True
            continue
        slug = slugify(key)
        if slug in by_slug and entries[by_slug[slug]] != value:
            raise WeightsError(
                f"weights in {source} give category {key!r} twice ({by_slug[slug]!r}) with different weights"
            )
        by_slug[slug] = key
        entries[key] = value
    return CategoryWeights(entries, default, source, sets_default)


def parse_weights(text: str, source: str = ENV_VAR) -> CategoryWeights:
    """Weights from the inline form ``"Travel=3,Sequential Art=2,*=1"`` (spaces around items are ignored)."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise WeightsError(f"weights in {source}: {item.strip()!r} is not of the form Category=weight")
        if name.strip() in pairs:
            raise WeightsError(f"weights in {source} give category {name.strip()!r} twice")
        pairs[name.strip()] = value
    return weights_from_mapping(pairs, source)


def load_weights_file(path: str | Path) -> CategoryWeights:
    """Weights from a JSON (``.json``) or YAML (anything else) file mapping categories to weights."""
    path = Path(path)
    source = f"weights file {str(path)!r}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WeightsError(f"{source} does not exist") from None
    except OSError as exc:
        raise WeightsError(f"{source} cannot be read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsError(
            f"{source} is not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {first}"
        ) from None
    if data is None:
        raise WeightsError(f"{source} is empty; expected a mapping such as {{Travel: 3, '*': 1}}")
    return weights_from_mapping(data, source)


def resolve_weights(
    settings: Settings | None = None,
    *,
    weights_file: str | Path | None = None,
    weights: str | Mapping[str, Any] | None = None,
) -> CategoryWeights:
    """The run's weights: the file's entries, overridden by the inline ones (string or mapping).

    Explicit arguments replace the corresponding ``settings`` fields (``weights_file``, ``weights``). With
    neither, every category weighs 1.
    """
    file = weights_file if weights_file is not None else (settings.weights_file if settings else None)
    inline = weights if weights is not None else (settings.weights if settings else None)
    result = CategoryWeights()
    if file is not None:
        result = load_weights_file(file)
    if inline is not None:
        override = parse_weights(inline) if isinstance(inline, str) else weights_from_mapping(inline, "config")
        result = override if file is None else result.merged(override)
    return result


def warn_unknown(weights: CategoryWeights, known_categories: Iterable[str]) -> list[str]:
    """Keys of ``weights`` that match no known category by name or slug (sorted), each logged as a warning.

    A typo would otherwise silently leave the intended category at the default weight.
    """
    known = set(known_categories)
    known_slugs = {slugify(c) for c in known}
    unknown = sorted(k for k in weights.weights if k not in known and k not in known_slugs)
    for key in unknown:
        log.warning("category weight for %r (%s) matches no known category; check the spelling", key, weights.source)
    return unknown
