"""Watching a crawl from outside: Prometheus metrics (``metrics.py``) and OpenTelemetry traces (``tracing.py``).

Nothing here changes what a crawl does; with every setting of it off, it costs a worker nothing but a few
method calls on an object that records nothing. ``docs/observability.md`` is the operator's guide.
"""
