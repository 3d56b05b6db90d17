"""quotes.toscrape.com as a site definition (:data:`~.definition.QUOTES`, :mod:`.definition`): its records
(:mod:`.models`), its pure parsers (:mod:`.parsers`), the writes of its records to its own tables ``quotes``
and ``authors`` with their versions (:mod:`.store`) and what it publishes from them (:mod:`.publishing`).

The site is zytedata/spidyquotes, a Flask application: listing pages ``/``, ``/page/N/`` and ``/tag/<tag>/``
carry the quotes (text, author, tags; ``/js/`` and ``/js/page/N/`` write the same quotes with a script), and
author pages ``/author/<slug>/`` are its detail pages (name, birth date, birth place, description).
"""
