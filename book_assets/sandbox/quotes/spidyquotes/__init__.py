"""zytedata/spidyquotes, the application quotes.toscrape.com runs, vendored with its data, templates and static files.

Provenance and the changes made are in ``spidyquotes.py``'s docstring; its licence (BSD 3-clause) is ``LICENSE``.
"""
