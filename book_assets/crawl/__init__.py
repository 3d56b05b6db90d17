"""The two-pass crawl: seed listing tasks, drain them into detail tasks, store validated books."""
