"""Fair scheduling around the queue: category weights and budgets.

Nothing here talks to the queue: :mod:`.weights` turns files, strings and config into validated weights and
:mod:`.quotas` splits a budget of books over categories. The reference round-robin the queue's SQL is tested
against is a test oracle (``book_assets_tests/queue/wrr.py``).
"""
