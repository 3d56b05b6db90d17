"""PostgreSQL: the embedded server, connections and schema migrations."""

from book_assets.db.connection import Database, DatabaseUnavailable, mask_url, resolve_database_url

__all__ = ["Database", "DatabaseUnavailable", "mask_url", "resolve_database_url"]
