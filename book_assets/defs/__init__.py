"""Dagster definitions by topic: ``crawl/`` (assets, checks, jobs, schedules, sensors), ``snapshot/`` (the
category-balanced snapshot and its check) and ``resources.py``; ``book_assets/definitions.py`` assembles them.
"""
