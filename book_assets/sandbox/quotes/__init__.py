"""The stand-in for quotes.toscrape.com: its own application, zytedata/spidyquotes, served locally.

The sandbox (``book_assets.sandbox``) replicates books.toscrape.com; quotes.toscrape.com is Zyte's open-source
Flask app, so its stand-in is that app itself, vendored in ``spidyquotes/`` with the live site's data files,
templates, stylesheets and the jQuery its ``/js/`` pages load. Public surface::

    from book_assets.sandbox.quotes import truth
    from book_assets.sandbox.quotes.server import QuotesServer

    with QuotesServer() as server:
        ...  # crawl server.url, then compare with truth.quote_differences(...), truth.author_differences(...)

Run it by hand with ``book-pipeline sandbox quotes --port 8801``; in tests, the ``quotes_site`` fixture. The
package imports nothing itself, so the CLI can name its command without loading Flask.
"""
