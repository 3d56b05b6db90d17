-- A queue epoch and the URLs enqueued in it: inside one epoch (a crawl opens one) each URL is enqueued
-- once, whatever became of its task, so a listing that links back to a page already fetched, or repeats
-- books already fetched, adds no task (enqueue_many in book_assets/sql/queue.sql).

CREATE TABLE public.queue_epochs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at timestamp with time zone DEFAULT now() NOT NULL
);

COMMENT ON TABLE public.queue_epochs IS 'The epochs of the queue, one per crawl (begin_epoch in book_assets/queue/core.py): the latest is the
current one, and its start ends every earlier one. With no epoch the queue deduplicates against live tasks only.';

CREATE TABLE public.queue_seen (
    epoch bigint NOT NULL REFERENCES public.queue_epochs(id) ON DELETE CASCADE,
    url text NOT NULL,
    PRIMARY KEY (epoch, url)
);

COMMENT ON TABLE public.queue_seen IS 'Every URL enqueued in an epoch, created as a task or not (a live task already had it): an enqueue
(enqueue_many) creates a task only for a URL it adds here, so each URL gets one task per epoch, retried under its
attempts and requeued as the same row. The rows of an epoch are deleted with the finished tasks, by the retention
prune (prune_seen), once a later epoch started before the cutoff.';
