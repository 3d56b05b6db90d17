"""Parsers read the saved live-site pages to exactly the values those pages show.

Expected values were read off the fixture files by hand (and a throwaway regex), not from the parser.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from book_assets.scraper.charset import decode_html
from book_assets.scraper.errors import NotABookPage, NotAListingPage
from book_assets.scraper.parsers import parse_book, parse_listing

pytestmark = pytest.mark.unit

SITE = "https://books.toscrape.com/"

# slug_id: (title, category, upc, price, rating word, stock, description start, description end, length)
BOOKS: dict[str, tuple[str, str, str, str, str, int, str | None, str | None, int | None]] = {
    "a-light-in-the-attic_1000": (
        "A Light in the Attic",
        "Poetry",
        "a897fe39b1053632",
        "51.77",
        "Three",
        22,
        "It's hard to imagine a world without A Light in the Attic.",
        "never sounded so good. ...more",
        1017,
    ),
    "a-court-of-thorns-and-roses-a-court-of-thorns-and-roses-1_874": (
        "A Court of Thorns and Roses (A Court of Thorns and Roses #1)",
        "Fantasy",
        "01d2001ac1e6f8a3",
        "52.37",
        "One",
        16,
        "A thrilling, seductive new series from New Yo",
        "mpossible to put down! ...more",
        1327,
    ),
    "a-fierce-and-subtle-poison_875": (
        "A Fierce and Subtle Poison",
        "Young Adult",
        "842790dfaa937484",
        "28.13",
        "Four",
        16,
        "Everyone knows the legends about the cursed girl--Isabel, the one the señoras",
        "ing with his own life. ...more",
        1270,
    ),
    "a-murder-in-time_877": (
        "A Murder in Time",
        "Mystery",
        "f733e8c19d40ec2e",
        "16.64",
        "One",
        16,
        "Beautiful and brilliant, Kendra Donovan is a ",
        "mask a cunning madman. ...more",
        1472,
    ),
    "aladdin-and-his-wonderful-lamp_973": (
        "Aladdin and His Wonderful Lamp",
        "Default",
        "904208d6aa64b655",
        "53.13",
        "Three",
        19,
        'Planning on seeing Aladdin the Disney musical? Read the classic story of "Aladdin',
        " The Little Hunchback) ...more",
        2019,
    ),
    "algorithms-to-live-by-the-computer-science-of-human-decisions_880": (
        "Algorithms to Live By: The Computer Science of Human Decisions",
        "Nonfiction",
        "38d45839cb1c83c1",
        "30.81",
        "One",
        16,
        "A fascinating exploration of how insights fro",
        "gies for human living. ...more",
        1680,
    ),
    "birdsong-a-story-in-pictures_975": (
        "Birdsong: A Story in Pictures",
        "Childrens",
        "9528d0948525bf5f",
        "54.64",
        "Three",
        19,
        "Bring the thrilling story of one red bird to life.",
        "ver Junction, Vermont. ...more",
        1174,
    ),
    "the-bridge-to-consciousness-im-writing-the-bridge-between-science-and-our-old-and-new-beliefs_840": (
        "The Bridge to Consciousness: I'm Writing the Bridge Between Science and Our Old and New Beliefs.",
        "Default",
        "efc3768127714ec3",
        "32.00",
        "Three",
        15,
        None,
        None,
        None,
    ),
}
RATINGS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}

ROOT_CARDS = [
    ("a-light-in-the-attic_1000", "A Light in the Attic", "£51.77", "Three"),
    ("tipping-the-velvet_999", "Tipping the Velvet", "£53.74", "One"),
    ("soumission_998", "Soumission", "£50.10", "One"),
    ("sharp-objects_997", "Sharp Objects", "£47.82", "Four"),
    ("sapiens-a-brief-history-of-humankind_996", "Sapiens: A Brief History of Humankind", "£54.23", "Five"),
    ("the-requiem-red_995", "The Requiem Red", "£22.65", "One"),
    (
        "the-dirty-little-secrets-of-getting-your-dream-job_994",
        "The Dirty Little Secrets of Getting Your Dream Job",
        "£33.34",
        "Four",
    ),
    (
        "the-coming-woman-a-novel-based-on-the-life-of-the-infamous-feminist-victoria-woodhull_993",
        "The Coming Woman: A Novel Based on the Life of the Infamous Feminist, Victoria Woodhull",
        "£17.93",
        "Three",
    ),
    (
        "the-boys-in-the-boat-nine-americans-and-their-epic-quest-for-gold-at-the-1936-berlin-olympics_992",
        "The Boys in the Boat: Nine Americans and Their Epic Quest for Gold at the 1936 Berlin Olympics",
        "£22.60",
        "Four",
    ),
    ("the-black-maria_991", "The Black Maria", "£52.15", "One"),
    (
        "starving-hearts-triangular-trade-trilogy-1_990",
        "Starving Hearts (Triangular Trade Trilogy, #1)",
        "£13.99",
        "Two",
    ),
    ("shakespeares-sonnets_989", "Shakespeare's Sonnets", "£20.66", "Four"),
    ("set-me-free_988", "Set Me Free", "£17.46", "Five"),
    (
        "scott-pilgrims-precious-little-life-scott-pilgrim-1_987",
        "Scott Pilgrim's Precious Little Life (Scott Pilgrim #1)",
        "£52.29",
        "Five",
    ),
    ("rip-it-up-and-start-again_986", "Rip it Up and Start Again", "£35.02", "Five"),
    (
        "our-band-could-be-your-life-scenes-from-the-american-indie-underground-1981-1991_985",
        "Our Band Could Be Your Life: Scenes from the American Indie Underground, 1981-1991",
        "£57.25",
        "Three",
    ),
    ("olio_984", "Olio", "£23.88", "One"),
    (
        "mesaerion-the-best-science-fiction-stories-1800-1849_983",
        "Mesaerion: The Best Science Fiction Stories 1800-1849",
        "£37.59",
        "One",
    ),
    ("libertarianism-for-beginners_982", "Libertarianism for Beginners", "£51.33", "Two"),
    ("its-only-the-himalayas_981", "It's Only the Himalayas", "£45.17", "Two"),
]

PAGE2_CARDS = [
    ("in-her-wake_980", "In Her Wake", "£12.84", "One"),
    ("how-music-works_979", "How Music Works", "£37.32", "Two"),
    (
        "foolproof-preserving-a-guide-to-small-batch-jams-jellies-pickles-condiments-and-more-a-foolproof-"
        "guide-to-making-small-batch-jams-jellies-pickles-condiments-and-more_978",
        "Foolproof Preserving: A Guide to Small Batch Jams, Jellies, Pickles, Condiments, and More: A "
        "Foolproof Guide to Making Small Batch Jams, Jellies, Pickles, Condiments, and More",
        "£30.52",
        "Three",
    ),
    ("chase-me-paris-nights-2_977", "Chase Me (Paris Nights #2)", "£25.27", "Five"),
    ("black-dust_976", "Black Dust", "£34.53", "Five"),
    ("birdsong-a-story-in-pictures_975", "Birdsong: A Story in Pictures", "£54.64", "Three"),
    (
        "americas-cradle-of-quarterbacks-western-pennsylvanias-football-factory-from-johnny-unitas-to-joe-montana_974",
        "America's Cradle of Quarterbacks: Western Pennsylvania's Football Factory from Johnny Unitas to Joe Montana",
        "£22.50",
        "Three",
    ),
    ("aladdin-and-his-wonderful-lamp_973", "Aladdin and His Wonderful Lamp", "£53.13", "Three"),
    (
        "worlds-elsewhere-journeys-around-shakespeares-globe_972",
        "Worlds Elsewhere: Journeys Around Shakespeare’s Globe",
        "£40.30",
        "Five",
    ),
    ("wall-and-piece_971", "Wall and Piece", "£44.18", "Four"),
    (
        "the-four-agreements-a-practical-guide-to-personal-freedom_970",
        "The Four Agreements: A Practical Guide to Personal Freedom",
        "£17.66",
        "Five",
    ),
    (
        "the-five-love-languages-how-to-express-heartfelt-commitment-to-your-mate_969",
        "The Five Love Languages: How to Express Heartfelt Commitment to Your Mate",
        "£31.05",
        "Three",
    ),
    ("the-elephant-tree_968", "The Elephant Tree", "£23.82", "Five"),
    ("the-bear-and-the-piano_967", "The Bear and the Piano", "£36.89", "One"),
    ("sophies-world_966", "Sophie's World", "£15.94", "Five"),
    ("penny-maybe_965", "Penny Maybe", "£33.29", "Three"),
    (
        "maude-1883-1993she-grew-up-with-the-country_964",
        "Maude (1883-1993):She Grew Up with the country",
        "£18.02",
        "Two",
    ),
    ("in-a-dark-dark-wood_963", "In a Dark, Dark Wood", "£19.63", "One"),
    ("behind-closed-doors_962", "Behind Closed Doors", "£52.22", "Four"),
    ("you-cant-bury-them-all-poems_961", "You can't bury them all: Poems", "£33.63", "Two"),
]


def _read(real_site: Path, rel: str) -> str:
    return decode_html((real_site / rel).read_bytes(), "text/html")


@pytest.mark.parametrize("slug", sorted(BOOKS))
def test_book_page_parses_to_the_values_it_shows(real_site: Path, slug: str) -> None:
    title, category, upc, price, rating_word, stock, d_start, d_end, d_len = BOOKS[slug]
    url = f"{SITE}catalogue/{slug}/index.html"
    book = parse_book(_read(real_site, f"catalogue/{slug}/index.html"), url)
    assert book.url == url
    assert book.title == title
    assert book.category == category
    assert book.upc == upc
    assert book.product_type == "Books"
    assert book.price == book.price_excl_tax == book.price_incl_tax == Decimal(price)
    assert book.price_text == f"£{price}"
    assert book.tax == Decimal("0.00")
    assert book.availability == f"In stock ({stock} available)"
    assert book.stock == stock
    assert book.num_reviews == 0
    assert book.rating_text == rating_word
    assert book.rating == RATINGS[rating_word]
    if d_start is None:
        assert book.description is None
    else:
        assert book.description is not None and d_end is not None
        assert book.description.startswith(d_start)
        assert book.description.endswith(d_end)
        assert len(book.description) == d_len


def test_light_in_the_attic_description_decodes_entities_and_keeps_apostrophes(real_site: Path) -> None:
    book = parse_book(_read(real_site, "catalogue/a-light-in-the-attic_1000/index.html"), SITE)
    assert book.description is not None
    assert book.description.startswith("It's hard to imagine a world without A Light in the Attic.")
    assert "&#39;" not in book.description and "&amp;" not in book.description


def test_book_title_entity_is_decoded(real_site: Path) -> None:
    slug = "the-bridge-to-consciousness-im-writing-the-bridge-between-science-and-our-old-and-new-beliefs_840"
    book = parse_book(_read(real_site, f"catalogue/{slug}/index.html"), SITE)
    assert "I'm Writing" in book.title


def test_book_rating_comes_from_product_box_not_recently_viewed(real_site: Path) -> None:
    # The _874 page lists "recently viewed" cards rated Two, Three...; the book itself is One.
    slug = "a-court-of-thorns-and-roses-a-court-of-thorns-and-roses-1_874"
    book = parse_book(_read(real_site, f"catalogue/{slug}/index.html"), SITE)
    assert book.rating == 1
    assert book.price_text == "£52.37"


@pytest.mark.parametrize(
    ("rel", "url", "cards", "next_url", "page"),
    [
        ("index.html", SITE + "index.html", ROOT_CARDS, SITE + "catalogue/page-2.html", 1),
        (
            "catalogue/page-2.html",
            SITE + "catalogue/page-2.html",
            PAGE2_CARDS,
            SITE + "catalogue/page-3.html",
            2,
        ),
    ],
)
def test_listing_page_parses_cards_next_link_and_pager(
    real_site: Path, rel: str, url: str, cards: list[tuple[str, str, str, str]], next_url: str, page: int
) -> None:
    listing = parse_listing(_read(real_site, rel), url)
    assert listing.url == url
    assert listing.next_url == next_url
    assert (listing.page_number, listing.page_count) == (page, 50)
    assert listing.result_count == 1000
    assert listing.category is None
    got = [(c.url, c.title, c.price_text, c.price, c.rating) for c in listing.cards]
    want = [
        (f"{SITE}catalogue/{slug}/index.html", title, price, Decimal(price[1:]), RATINGS[word])
        for slug, title, price, word in cards
    ]
    assert got == want


def test_root_listing_resolves_against_bare_site_url(real_site: Path) -> None:
    listing = parse_listing(_read(real_site, "index.html"), SITE)
    assert listing.next_url == SITE + "catalogue/page-2.html"
    assert listing.cards[0].url == SITE + "catalogue/a-light-in-the-attic_1000/index.html"


def test_listing_titles_are_full_not_truncated_link_text(real_site: Path) -> None:
    listing = parse_listing(_read(real_site, "index.html"), SITE)
    assert all("..." not in card.title for card in listing.cards)
    assert listing.cards[0].title == "A Light in the Attic"


def test_book_page_is_not_a_listing(real_site: Path) -> None:
    with pytest.raises(NotAListingPage):
        parse_listing(_read(real_site, "catalogue/a-murder-in-time_877/index.html"), SITE)


@pytest.mark.parametrize("rel", ["index.html", "catalogue/page-2.html"])
def test_listing_page_is_not_a_book(real_site: Path, rel: str) -> None:
    with pytest.raises(NotABookPage):
        parse_book(_read(real_site, rel), SITE + rel)


def test_fixture_bytes_never_decode_to_mojibake(real_site: Path) -> None:
    for path in real_site.rglob("*.html"):
        text = decode_html(path.read_bytes(), "text/html")
        assert "Â£" not in text, path
        assert "£" in text, path
