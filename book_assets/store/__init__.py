"""The book store, used by the crawl and the archive alike: books and their versions (:mod:`.books`), every
page's last response (:mod:`.pages`), removed books (:mod:`.removals`) and a crawl's lifecycle
(:mod:`.lifecycle`)."""
