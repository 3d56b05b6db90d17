"""The WARC archive of each day: its files, records and bytes, indexed."""
