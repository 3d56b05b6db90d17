-- Queue epochs by scope: each crawl opens an epoch of its own scope (the crawl's site), and an enqueue reads the
-- latest epoch of its queue's scope, so a crawl of one catalogue neither ends nor joins the epoch of a crawl of
-- another on the same queue (enqueue_many and prune_seen in book_assets/sql/queue.sql).

ALTER TABLE public.queue_epochs ADD COLUMN scope text DEFAULT ''::text NOT NULL;

COMMENT ON TABLE public.queue_epochs IS 'The epochs of the queue, one per crawl (begin_epoch in book_assets/queue/core.py), each of a scope
(the crawl''s site): the latest of a scope is its current one, and its start ends every earlier one of that scope only.
With no epoch of its scope a queue deduplicates against live tasks only.';
COMMENT ON COLUMN public.queue_epochs.scope IS 'Whose epoch it is: the scope of the queue that began it (QueueContext.epoch_scope, a crawl''s site
name; empty for a queue given none). An enqueue reads only its own scope''s epochs.';

CREATE INDEX idx_queue_epochs_scope ON public.queue_epochs USING btree (scope, id);
