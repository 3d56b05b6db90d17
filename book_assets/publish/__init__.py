"""The daily publications built from the stored records: the category-balanced snapshot (:mod:`.snapshot`),
the change feed (:mod:`.changes`) and the exports (:mod:`.export`), each file written whole
(:mod:`.files`); generic over what a site's definition publishes (:mod:`.publishing`)."""
