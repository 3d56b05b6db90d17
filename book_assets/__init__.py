"""book-pipeline: crawl books.toscrape.com through a PostgreSQL task queue, orchestrated by Dagster."""

from importlib.metadata import version

#: The release, declared once (pyproject.toml's ``version``) and read from the installed package's metadata.
__version__ = version("book-pipeline")
