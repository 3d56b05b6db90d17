"""Dagster's PostgreSQL event log storage, with a pool's default limit written in one upsert.

dagster.yaml names :class:`EventLogStorage` as the instance's event log storage. It is
``dagster_postgres.PostgresEventLogStorage`` but for one method: when a step meets a pool whose limit comes
from ``concurrency.pools.default_limit`` and the recorded limit is missing or differs, Dagster 1.13 records it
by INSERT, and on a unique violation UPDATE in the same transaction. On PostgreSQL the violation has already
aborted that transaction, so the step fails: every step of the pool after an operator changes
``default_limit``, and one of two runs whose steps meet a new pool at the same moment (dagster-io/dagster
#33552). Here the limit is written by ``INSERT ... ON CONFLICT DO UPDATE``: the second writer waits for the
first to commit and then sees its row and its slots, so a pool never gets more slots than its limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster._core.storage.event_log.schema import ConcurrencyLimitsTable
from dagster._serdes import ConfigurableClassData
from dagster_postgres.event_log import PostgresEventLogStorage
from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config
from sqlalchemy import select
from sqlalchemy.dialects import postgresql

__all__ = ["EventLogStorage"]


class EventLogStorage(PostgresEventLogStorage):
    """PostgreSQL event log storage whose pool limits from the default are upserts (see the module)."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> EventLogStorage:
        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )

    def initialize_concurrency_limit_to_default(self, concurrency_key: str) -> bool:
        default_limit = self._instance.global_op_concurrency_default_limit if self.has_instance else None
        if default_limit is None or not self.has_default_pool_limit_col:
            return super().initialize_concurrency_limit_to_default(concurrency_key)  # deletes; no insert
        self._reconcile_concurrency_limits_from_slots()  # as Dagster's own does first (an instance from before limits)
        limits = ConcurrencyLimitsTable.c
        with self.index_transaction() as conn:
            # A limit set by hand (the UI, `dagster instance concurrency set`) stays as it is.
            conn.execute(
                postgresql.insert(ConcurrencyLimitsTable)
                .values(concurrency_key=concurrency_key, limit=default_limit, using_default_limit=True)
                .on_conflict_do_update(
                    index_elements=[limits.concurrency_key],
                    set_={"limit": default_limit},
                    where=limits.using_default_limit & (limits.limit != default_limit),
                )
            )
            limit = conn.execute(select(limits.limit).where(limits.concurrency_key == concurrency_key)).scalar_one()
            self._allocate_concurrency_slots(conn, concurrency_key, limit)
        return True
