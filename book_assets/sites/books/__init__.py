"""books.toscrape.com as a site definition (:data:`BOOKS`, :mod:`.site`).

Its pages: listing pages (the root, ``catalogue/page-N.html``, a category's pages) that link to book pages,
further pages of their chain and, on a start page, the categories of its sidebar; and book pages
(``catalogue/<slug>_<id>/index.html``), each one record. The definition delegates to the books' own modules: the
pure parsers (:mod:`book_assets.scraper.parsers`, records in :mod:`book_assets.scraper.models`), the store
(:mod:`book_assets.store.books`, the 304 revalidation in :mod:`book_assets.store.pages`), the categories
(:mod:`book_assets.categories`) and its publishing (:mod:`.publishing`).
"""

from book_assets.sites.books.site import BOOKS, BooksSite, as_listing

__all__ = ["BOOKS", "BooksSite", "as_listing"]
