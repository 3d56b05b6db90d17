"""What the pipeline tells its operators while it runs: traces (:mod:`.tracing`) and metrics."""
