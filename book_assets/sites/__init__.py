"""The site definitions: the :class:`~book_assets.sites.site.Site` interface through which the crawl engine reaches
everything site-specific (:mod:`.site`), the sites by name (:mod:`.registry`), and one package per site:
books.toscrape.com (:mod:`.books`) and quotes.toscrape.com's records, parsers and store (:mod:`.quotes`), and any
written by ``book-pipeline site new`` (:mod:`.scaffold`, its templates)."""
