"""The generic record store: a catalogue's detail records kept with no table of its own (``site_records``), its
store hooks and data checks (:mod:`.store`), and its export and re-extraction (:mod:`.publishing`). What
``book-pipeline site new`` writes uses it; a site may keep its own tables instead, as the quotes do."""

from book_assets.sites.generic.publishing import RecordsPublishing
from book_assets.sites.generic.store import RecordStore

__all__ = ["RecordStore", "RecordsPublishing"]
