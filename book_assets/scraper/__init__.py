"""Fetching and parsing books.toscrape.com pages.

Parsers (``parsers``) are pure functions of HTML and URL; fetchers (``fetch_http``, ``fetch_browser``) turn a
URL into a ``fetching.FetchResult`` or a classified ``errors.FetchError``.
"""
