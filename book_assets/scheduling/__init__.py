"""Fair scheduling around the queue: category weights, the reference round-robin, budgets, the snapshot.

Nothing here talks to the queue: :mod:`.weights` turns files, strings and config into validated weights,
:mod:`.wrr` is the reference smooth weighted round-robin the queue's SQL is tested against, :mod:`.quotas`
splits a budget of books over categories, and :mod:`.snapshot` builds the category-balanced snapshot.
"""
