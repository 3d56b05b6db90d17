"""The crawl in Dagster: the two crawl assets, their checks, the queue jobs, the daily schedule, the sensors."""
