"""book-pipeline: crawl books.toscrape.com through a PostgreSQL task queue, orchestrated by Dagster."""
