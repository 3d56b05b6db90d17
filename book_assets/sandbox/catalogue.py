"""A deterministic catalogue shaped like books.toscrape.com, and the ground truth a crawl is judged against.

The live site has 1000 books (ids 1..1000) in 50 categories whose names, slugs, ids and sizes are fixed; the
replica copies those exactly and invents the rest (titles, prices, ratings, UPCs, stock, descriptions) from a
seeded RNG, so the same seed always yields the same site and tests can compare every stored field with what
was served. The ``day`` parameter replays a deterministic history of small changes (prices and stock move,
a few books appear and disappear) so incremental crawls have something to detect.

``books`` and ``categories`` size the catalogue for growth benchmarks: any other size keeps the markup, the
URL scheme, pagination and the simulated days, names the categories past the live site's 50 after them
("Travel 2", ...) and spreads the books in the live site's proportions. The default is the replica itself.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any

from book_assets.categories import slugify

#: The live site's categories in sidebar order (ids 2..51) with their book counts; they sum to 1000.
CATEGORY_SIZES: tuple[tuple[str, int], ...] = (
    ("Travel", 11), ("Mystery", 32), ("Historical Fiction", 26), ("Sequential Art", 75), ("Classics", 19),
    ("Philosophy", 11), ("Romance", 35), ("Womens Fiction", 17), ("Fiction", 65), ("Childrens", 29),
    ("Religion", 7), ("Nonfiction", 110), ("Music", 13), ("Default", 152), ("Science Fiction", 16),
    ("Sports and Games", 5), ("Add a comment", 67), ("Fantasy", 48), ("New Adult", 6), ("Young Adult", 54),
    ("Science", 14), ("Poetry", 19), ("Paranormal", 1), ("Art", 8), ("Psychology", 7), ("Autobiography", 9),
    ("Parenting", 1), ("Adult Fiction", 1), ("Humor", 10), ("Horror", 17), ("History", 18),
    ("Food and Drink", 30), ("Christian Fiction", 6), ("Business", 12), ("Biography", 5), ("Thriller", 11),
    ("Contemporary", 3), ("Spirituality", 6), ("Academic", 1), ("Self Help", 5), ("Historical", 2),
    ("Christian", 3), ("Suspense", 1), ("Short Stories", 1), ("Novels", 1), ("Health", 4), ("Politics", 3),
    ("Cultural", 1), ("Erotica", 1), ("Crime", 1),
)  # fmt: skip

BOOK_COUNT = 1000
CATEGORY_COUNT = len(CATEGORY_SIZES)
PAGE_SIZE = 20
RATING_WORDS = ("One", "Two", "Three", "Four", "Five")

#: Share of books whose price and stock move each simulated day, and how many books come and go per day in
#: each 1,000 books (a larger catalogue sees proportionally more).
DAILY_CHANGE_FRACTION = 0.05
DAILY_ADDED = (2, 3)
DAILY_REMOVED = (2, 3)
#: Books without a description per 1,000, like the live site's book 840.
BARE_PER_THOUSAND = 6


def category_plan(books: int, categories: int) -> list[tuple[str, int]]:
    """The ``(name, size)`` of each category of a catalogue of ``books`` books in ``categories`` categories.

    The live site's own list for its own size; otherwise names cycle through the live ones with a number
    after the first round ("Travel", ..., "Crime", "Travel 2", ...), and sizes follow the live sizes of those
    names scaled to ``books`` by largest remainder, so they sum to ``books`` exactly, each category keeping
    at least one book while there are books enough.
    """
    if books < 1 or categories < 1:
        raise ValueError("a catalogue needs at least one book and one category")
    if (books, categories) == (BOOK_COUNT, CATEGORY_COUNT):
        return list(CATEGORY_SIZES)
    names = [
        CATEGORY_SIZES[i % CATEGORY_COUNT][0] + (f" {i // CATEGORY_COUNT + 1}" if i >= CATEGORY_COUNT else "")
        for i in range(categories)
    ]
    weights = [CATEGORY_SIZES[i % CATEGORY_COUNT][1] for i in range(categories)]
    total = sum(weights)
    exact = [books * w / total for w in weights]
    sizes = [int(x) for x in exact]
    by_remainder = sorted(range(categories), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[: books - sum(sizes)]:
        sizes[i] += 1
    for i in range(categories):  # an empty category borrows from the largest while there are books enough
        if sizes[i] == 0 and books >= categories:
            largest = max(range(categories), key=lambda j: (sizes[j], -j))
            sizes[largest] -= 1
            sizes[i] = 1
    return list(zip(names, sizes, strict=True))


@dataclass(frozen=True, slots=True)
class Category:
    """One sidebar category: ``name`` as displayed, ``slug`` and ``id`` as in its URL, ``size`` in books."""

    name: str
    slug: str
    id: int
    size: int

    @property
    def key(self) -> str:
        """The ``<slug>_<id>`` segment used in the category's URL."""
        return f"{self.slug}_{self.id}"

    @property
    def url_path(self) -> str:
        return f"/catalogue/category/books/{self.key}/index.html"


@dataclass(frozen=True, slots=True)
class Book:
    """The expected record of one book: exactly what its page shows, typed.

    Every field a crawler stores has a twin here, so a crawl test can compare field by field; prices are
    ``Decimal`` because the page shows exact pence.
    """

    id: int
    slug: str
    url_path: str
    title: str
    category: str
    category_id: int
    price: Decimal
    price_excl_tax: Decimal
    price_incl_tax: Decimal
    tax: Decimal
    rating: int
    upc: str
    product_type: str
    availability: str
    stock: int
    num_reviews: int
    description: str | None
    image_path: str

    @property
    def key(self) -> str:
        """The ``<slug>_<id>`` segment used in the book's URL."""
        return f"{self.slug}_{self.id}"

    @property
    def rating_word(self) -> str:
        return RATING_WORDS[self.rating - 1]

    def to_record(self) -> dict[str, Any]:
        """The record as a plain dict (Decimals kept), for comparisons against stored rows."""
        return asdict(self)


def _make_book(
    book_id: int,
    title: str,
    category: Category,
    price: Decimal,
    rating: int,
    upc: str,
    stock: int,
    description: str | None,
    seed: int,
) -> Book:
    slug = slugify(title) or "book"
    digest = hashlib.md5(f"{seed}:{book_id}:image".encode()).hexdigest()
    return Book(
        id=book_id,
        slug=slug,
        url_path=f"/catalogue/{slug}_{book_id}/index.html",
        title=title,
        category=category.name,
        category_id=category.id,
        price=price,
        price_excl_tax=price,
        price_incl_tax=price,
        tax=Decimal("0.00"),
        rating=rating,
        upc=upc,
        product_type="Books",
        availability=f"In stock ({stock} available)",
        stock=stock,
        num_reviews=0,
        description=description,
        image_path=f"/media/cache/{digest[:2]}/{digest[2:4]}/{digest}.jpg",
    )


def _with_stock(book: Book, stock: int) -> Book:
    return replace(book, stock=stock, availability=f"In stock ({stock} available)")


def _with_price(book: Book, price: Decimal) -> Book:
    return replace(book, price=price, price_excl_tax=price, price_incl_tax=price)


# --- invented text -----------------------------------------------------------------------------------------
# Titles deliberately include what trips scrapers: quotes, colons, '#', '&', parentheses, accents and
# non-Latin scripts (dropped from slugs), and long titles that the listing truncates.

_ADJECTIVES = (
    "Silent", "Crimson", "Hidden", "Last", "Golden", "Broken", "Secret", "Wild", "Forgotten", "Little",
    "Midnight", "Dark", "Brave", "Strange", "Lost", "Endless", "Quiet", "Burning", "Frozen", "Curious",
    "Naïve", "Über", "Déjà Vu",
)  # fmt: skip
_NOUNS = (
    "Garden", "River", "House", "Kingdom", "Heart", "Road", "Shadow", "Mirror", "Song", "Winter", "City",
    "Island", "Letter", "Map", "Storm", "Orchard", "Lighthouse", "Clockmaker", "Library", "Bridge", "Café",
    "Crème Brûlée", "Fjord", "Ångström", "Piñata",
)  # fmt: skip
_NAMES = (
    "Eleanor", "Zoë", "Heathcliff", "Señor Martínez", "Anaïs", "Björk", "Margaret", "Theo", "O'Brien",
    "Dr. Watson", "Mrs. Dalloway", "Émile", "Captain Nemo", "Søren", "Jane", "Kafka",
)  # fmt: skip
_NON_LATIN = ("東京", "Москва", "Αθήνα", "café 日本")
_TOPICS = (
    "Human Decisions", "the Modern World", "Everyday Life", "Cooking at Home", "Happiness", "the Brain",
    "Money & Power", "Love and Loss", "the Universe", "Leadership", "Raising Children", "Mindfulness",
)  # fmt: skip


def _title(rng: random.Random) -> str:
    adj, noun, noun2 = rng.choice(_ADJECTIVES), rng.choice(_NOUNS), rng.choice(_NOUNS)
    name = rng.choice(_NAMES)
    pattern = rng.randrange(12)
    if pattern == 0:
        return f"The {adj} {noun}"
    if pattern == 1:
        return f"{name}'s {noun}"
    if pattern == 2:
        return f"{noun}: A {adj} {noun2}"
    if pattern == 3:
        return f"The {noun} of {name} ({adj} {noun2} #{rng.randint(1, 12)})"
    if pattern == 4:
        return f"{noun} & {noun2}"
    if pattern == 5:
        return f'"{adj} {noun}" and Other Stories'
    if pattern == 6:
        return f"{noun}s to Live By: The Science of {rng.choice(_TOPICS)}"
    if pattern == 7:
        return f"{adj} {noun}, Vol. {rng.randint(1, 9)}: {name} and the {noun2}"
    if pattern == 8:
        return f"{noun} {rng.choice(_NON_LATIN)}"
    if pattern == 9:
        return f"A {adj} Guide to {rng.choice(_TOPICS)}"
    if pattern == 10:
        return f"{adj} {noun}"
    return f"The {noun} Who Wasn't There: {name}, {noun2}, and Everything After"


def _description(rng: random.Random, title: str) -> str:
    openers = (
        f"It's hard to imagine a world without {title}.",
        f"In {title}, nothing is quite what it seems.",
        f"{title} is the book everyone will be talking about this year.",
        f"From the author of {rng.choice(_NOUNS)} & {rng.choice(_NOUNS)} comes {title}.",
    )
    middles = (
        "A sweeping story of love, loss and the long road home.",
        "Part memoir, part field guide, it asks what we owe each other.",
        "Told in alternating voices, it spans three generations and two continents.",
        f"When {rng.choice(_NAMES)} finds a {rng.choice(_NOUNS).lower()} in the attic, everything changes.",
        'Witty, wise and "impossible to put down" — a modern classic.',
        "Includes recipes, maps & a glossary of 1,000 terms.",
        f"Set between {rng.choice(_NON_LATIN)} and the sea, it is a meditation on belonging.",
        "It won the prize for best débutante novel in 2014.",
    )
    sentences = [rng.choice(openers), *rng.sample(middles, rng.randint(2, 5))]
    return " ".join(sentences) + " ...more"


def _price(rng: random.Random) -> Decimal:
    return Decimal(rng.randint(1000, 5999)).scaleb(-2)


# --- the catalogue -----------------------------------------------------------------------------------------


class Catalogue:
    """Every book and category of the replica for one ``(seed, day)``; pure data, no HTML.

    Books are listed newest first (highest id first), as on the live site, so day-to-day additions appear at
    the top of the first listing page. ``books`` and ``categories`` give day 0's size (see
    :func:`category_plan`); the defaults are the live site's.
    """

    def __init__(
        self, seed: int = 0, day: int = 0, *, books: int = BOOK_COUNT, categories: int = CATEGORY_COUNT
    ) -> None:
        if day < 0:
            raise ValueError("day must be >= 0")
        self.seed = seed
        self.day = day
        self.size = books
        self.category_count = categories
        base_categories = [
            Category(name=name, slug=slugify(name), id=index + 2, size=size)
            for index, (name, size) in enumerate(category_plan(books, categories))
        ]
        states = [self._generate(base_categories)]
        if day:
            self._replay_days(states, base_categories)
        self._settle(states, base_categories)

    def _settle(self, states: list[dict[int, Book]], base_categories: list[Category]) -> None:
        """Index the last of ``states`` (one ``{id: Book}`` per day from day 0, unchanged books shared)."""
        #: Every day's books up to this one: an unchanged book is the same object on each day, which makes
        #: the day before (``day_before``) a view rather than a second catalogue, and a book's last change
        #: the first day of its run of identical objects.
        self._states = states
        self._base_categories = base_categories
        books, day0 = states[-1], states[0]
        self.added_ids: frozenset[int] = frozenset(books.keys() - day0.keys())
        self.removed_ids: frozenset[int] = frozenset(day0.keys() - books.keys())
        self.changed_ids: frozenset[int] = frozenset(i for i in books.keys() & day0.keys() if books[i] is not day0[i])
        self.books: list[Book] = sorted(books.values(), key=lambda b: b.id, reverse=True)
        self._by_path = {b.url_path: b for b in self.books}
        self._by_id = books
        sizes: dict[int, int] = {}
        for book in self.books:
            sizes[book.category_id] = sizes.get(book.category_id, 0) + 1
        self.categories: list[Category] = [replace(c, size=sizes.get(c.id, 0)) for c in base_categories]
        self._categories_by_id = {c.id: c for c in self.categories}
        self._by_category: dict[int, list[Book]] = {c.id: [] for c in self.categories}
        for book in self.books:
            self._by_category[book.category_id].append(book)

    def day_before(self) -> Catalogue:
        """The same catalogue one simulated day earlier, sharing this one's unchanged books."""
        if self.day == 0:
            raise ValueError("day 0 has no day before")
        previous = object.__new__(Catalogue)
        previous.seed, previous.day = self.seed, self.day - 1
        previous.size, previous.category_count = self.size, self.category_count
        previous._settle(self._states[:-1], self._base_categories)
        return previous

    def _generate(self, categories: list[Category]) -> dict[int, Book]:
        rng = random.Random(f"book-pipeline-sandbox:{self.seed}")
        assignment = [c for c in categories for _ in range(c.size)]
        rng.shuffle(assignment)
        bare = min(self.size, max(1, round(BARE_PER_THOUSAND * self.size / 1000)))
        no_description = set(rng.sample(range(1, self.size + 1), bare))
        books: dict[int, Book] = {}
        for book_id in range(1, self.size + 1):
            books[book_id] = self._new_book(rng, book_id, assignment[book_id - 1], book_id in no_description)
        return books

    def _new_book(self, rng: random.Random, book_id: int, category: Category, bare: bool) -> Book:
        title = _title(rng)
        return _make_book(
            book_id=book_id,
            title=title,
            category=category,
            price=_price(rng),
            rating=rng.randint(1, 5),
            upc=f"{rng.getrandbits(64):016x}",
            stock=rng.randint(1, 22),
            description=None if bare else _description(rng, title),
            seed=self.seed,
        )

    def _replay_days(self, states: list[dict[int, Book]], categories: list[Category]) -> None:
        """Append days 1..``self.day`` to ``states`` in order, each from its own seeded RNG, so day N is
        reproducible; a day copies the day before's dict and replaces only the books that change."""
        next_id = self.size + 1
        per_thousand = max(1, round(self.size / 1000))
        added, removed = [n * per_thousand for n in DAILY_ADDED], [n * per_thousand for n in DAILY_REMOVED]
        for day in range(1, self.day + 1):
            books = dict(states[-1])
            rng = random.Random(f"book-pipeline-sandbox:{self.seed}:day:{day}")
            alive = sorted(books)
            for book_id in rng.sample(alive, max(1, round(len(alive) * DAILY_CHANGE_FRACTION))):
                book = books[book_id]
                price = _price(rng)
                while price == book.price:
                    price = _price(rng)
                stock = rng.randint(1, 22)
                while stock == book.stock:
                    stock = rng.randint(1, 22)
                books[book_id] = _with_stock(_with_price(book, price), stock)
            for book_id in rng.sample(alive, min(rng.randint(*removed), len(alive) - 1)):
                del books[book_id]
            for _ in range(rng.randint(*added)):
                books[next_id] = self._new_book(rng, next_id, rng.choice(categories), bare=False)
                next_id += 1
            states.append(books)

    # --- lookups -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.books)

    def __iter__(self) -> Iterator[Book]:
        return iter(self.books)

    def book_by_path(self, path: str) -> Book | None:
        """The book served at a URL path (``/catalogue/<slug>_<id>/index.html``) or a full URL, if any."""
        if "://" in path:
            path = "/" + path.split("://", 1)[1].split("/", 1)[-1]
        return self._by_path.get(path)

    def book_by_id(self, book_id: int) -> Book | None:
        return self._by_id.get(book_id)

    def book_changed_on(self, book: Book) -> int:
        """The simulated day the book's record last changed: the day it was added or its price and stock
        last moved, 0 for a book unchanged since day 0."""
        day = self.day
        while day > 0 and self._states[day - 1].get(book.id) is book:
            day -= 1
        return day

    def category_by_id(self, category_id: int) -> Category:
        return self._categories_by_id[category_id]

    def category_of(self, book: Book) -> Category:
        return self._categories_by_id[book.category_id]

    def books_in(self, category: Category) -> list[Book]:
        """The category's books in listing order (newest first)."""
        return self._by_category[category.id]

    @property
    def page_count(self) -> int:
        """Pages of the main listing (``catalogue/page-N.html``): 50 on day 0."""
        return max(1, -(-len(self.books) // PAGE_SIZE))

    def ground_truth(self) -> dict[str, Book]:
        """Every served book keyed by URL path: the expected record of a complete crawl."""
        return dict(self._by_path)

    def listing_paths(self) -> list[str]:
        """Every listing page a full crawl should visit: root, ``page-N``, ``books_1`` and category pages."""
        paths = ["/index.html"]
        paths += [f"/catalogue/page-{n}.html" for n in range(1, self.page_count + 1)]
        all_pages = self.page_count
        paths.append("/catalogue/category/books_1/index.html")
        paths += [f"/catalogue/category/books_1/page-{n}.html" for n in range(2, all_pages + 1)]
        for category in self.categories:
            paths.append(category.url_path)
            pages = -(-category.size // PAGE_SIZE)
            base = category.url_path.rsplit("/", 1)[0]
            paths += [f"{base}/page-{n}.html" for n in range(2, pages + 1)]
        return paths
