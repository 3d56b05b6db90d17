"""The daily change feed asset: books new, changed, removed or returned each day."""
