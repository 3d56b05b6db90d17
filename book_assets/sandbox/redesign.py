"""A redesign of the replica's markup from a chosen simulated day: the site's data stays, its HTML moves.

A redesign is how a site breaks a scraper without a single error: every URL still answers 200 with a book
page, only the markup a parser keys on has changed. ``Redesign`` says which changes (``Change``) land on
which day; ``Redesign.markup_on`` turns it into the ``Markup`` the pages of one catalogue render with (the
live site's own on every day before the redesign). The changes are the kinds redesigns make:

- ``rating_class``: the rating's ``p.star-rating Three`` becomes ``p.rating-stars Three`` (the rating word
  kept), on book pages and on every listing card, as a renamed CSS class does;
- ``description_id``: the description's ``div#product_description`` becomes ``div#product-description``;
- ``upc_moved``: the UPC leaves the product table for a ``dl.product-identifiers`` under the title, where a
  redesign puts identifiers (the table keeps its other rows);
- ``description_dropped``: the description is absent on every book page of a deterministic share of the
  categories (heading, paragraph and the ``meta`` description), as when a template stops showing a field
  for some product types;
- ``description_teaser``: the paragraph after the description's heading becomes a teaser (its first words and
  "Read more"), the full text moving into a collapsed ``div`` after it, as a "show more" widget does: a parser
  that reads the paragraph still finds a description on every page, a few words long (a value of the wrong
  shape, not a missing one);
- ``rating_widget``: a "rate this book" widget (``p.star-rating One``, the form's one star) above the book's
  own rating, which moves to ``p.rating-stars``: a parser that takes the first ``p.star-rating`` of the
  product reads 1 on every page.

Nothing here touches a URL or a value: the catalogue, and so ``Catalogue.ground_truth()``, is the same with
or without a redesign. ``truth.absent_on_pages`` says which fields a redesigned page no longer shows.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from book_assets.sandbox.catalogue import Book, Catalogue, Category

#: Share of the categories whose book pages lose their description under ``description_dropped``.
DROP_SHARE = 0.2


class Change(enum.Enum):
    """One markup change a redesign can make (see the module docstring)."""

    RATING_CLASS = "rating_class"
    DESCRIPTION_ID = "description_id"
    UPC_MOVED = "upc_moved"
    DESCRIPTION_DROPPED = "description_dropped"
    DESCRIPTION_TEASER = "description_teaser"
    RATING_WIDGET = "rating_widget"


ALL_CHANGES: frozenset[Change] = frozenset(Change)


def parse_changes(value: str | Iterable[str | Change]) -> frozenset[Change]:
    """``"rating_class,upc_moved"`` (or names, or ``Change`` values) as a set of changes; ``"all"`` is every
    change. Raises ``ValueError`` naming the unknown change and the known ones."""
    items = value.split(",") if isinstance(value, str) else list(value)
    changes: set[Change] = set()
    for item in items:
        if isinstance(item, Change):
            changes.add(item)
            continue
        name = item.strip().lower()
        if name == "all":
            changes.update(Change)
            continue
        try:
            changes.add(Change(name))
        except ValueError:
            known = ", ".join(["all", *(c.value for c in Change)])
            raise ValueError(f"unknown redesign change {item.strip()!r}; use one of: {known}") from None
    if not changes:
        raise ValueError("a redesign needs at least one change")
    return frozenset(changes)


@dataclass(frozen=True)
class Markup:
    """What the pages of one day render with; ``TODAY`` is the live site's markup.

    Attributes:
        rating_class: the class before the rating word on ``p.<rating_class> Three``.
        description_id: the id of the description's heading ``div``.
        upc_in_table: whether the UPC is a row of the product table (else it is in a ``dl`` under the title).
        no_description: ids of the categories whose book pages show no description.
        description_teaser: whether the paragraph after the description's heading is a teaser of it (the full
            text in a collapsed ``div`` after the paragraph).
        rating_widget: whether a book page shows a "rate this book" widget of one star above its rating, which
            is then a ``p.rating-stars``.
    """

    rating_class: str = "star-rating"
    description_id: str = "product_description"
    upc_in_table: bool = True
    no_description: frozenset[int] = field(default_factory=frozenset)
    description_teaser: bool = False
    rating_widget: bool = False

    def shows_description(self, book: Book) -> bool:
        """Whether the book's page shows its description (it may have none to show)."""
        return book.description is not None and book.category_id not in self.no_description


TODAY = Markup()


@dataclass(frozen=True)
class Redesign:
    """The markup ``changes`` served from simulated day ``day`` on; days before it render as the live site.

    Attributes:
        day: the first simulated day served redesigned.
        changes: which changes land that day (every one by default).
        drop_share: share of the categories (at least one) whose book pages lose the description under
            ``description_dropped``, chosen by a hash of the category's URL key, so the same catalogue always
            loses it in the same categories.
    """

    day: int
    changes: frozenset[Change] = ALL_CHANGES
    drop_share: float = DROP_SHARE

    def __post_init__(self) -> None:
        if self.day < 0:
            raise ValueError("redesign day must be >= 0")
        if not 0.0 < self.drop_share <= 1.0:
            raise ValueError("drop_share must be in (0, 1]")
        object.__setattr__(self, "changes", parse_changes(self.changes))

    def active_on(self, day: int) -> bool:
        return day >= self.day

    def dropped_categories(self, categories: Sequence[Category]) -> frozenset[int]:
        """Ids of the categories whose book pages lose the description (none without that change)."""
        if Change.DESCRIPTION_DROPPED not in self.changes or not categories:
            return frozenset()
        count = max(1, round(len(categories) * self.drop_share))
        ranked = sorted(categories, key=lambda c: (hashlib.sha256(c.key.encode()).hexdigest(), c.id))
        return frozenset(c.id for c in ranked[:count])

    def markup_on(self, catalogue: Catalogue) -> Markup:
        """The markup the pages of ``catalogue`` (on its day) render with."""
        if not self.active_on(catalogue.day):
            return TODAY
        return Markup(
            rating_class="rating-stars" if Change.RATING_CLASS in self.changes else TODAY.rating_class,
            description_id="product-description" if Change.DESCRIPTION_ID in self.changes else TODAY.description_id,
            upc_in_table=Change.UPC_MOVED not in self.changes,
            no_description=self.dropped_categories(catalogue.categories),
            description_teaser=Change.DESCRIPTION_TEASER in self.changes,
            rating_widget=Change.RATING_WIDGET in self.changes,
        )

    def to_json(self) -> dict[str, object]:
        return {"day": self.day, "changes": sorted(c.value for c in self.changes), "drop_share": self.drop_share}


def markup_on(redesign: Redesign | None, catalogue: Catalogue) -> Markup:
    """The markup of ``catalogue``'s day: the redesign's from its day on, else the live site's."""
    return TODAY if redesign is None else redesign.markup_on(catalogue)
