"""Blocking reads of the worker's retained topics with kafka-python (run them in an executor):
the society message a checkpoint is anchored to, an events partition replayed into a fresh
:class:`~streams.partition.PartitionState` and an agents partition into a fresh
:class:`~streams.agent_stage.AgentPartition` when a worker is handed the partition."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kafka import KafkaConsumer
from kafka import TopicPartition as TP

from streams.agent_stage import AgentPartition
from streams.messages import decode_acts
from streams.partition import PartitionState

log = logging.getLogger(__name__)


class KafkaTopicReader:
    def __init__(self, bootstrap: str, topic_prefix: str) -> None:
        self.bootstrap = bootstrap
        self.prefix = topic_prefix

    @contextmanager
    def _reader(self, topic: str, partition: int) -> Iterator[tuple[KafkaConsumer, TP]]:
        """A group-less consumer assigned to one partition of one of our topics, closed after."""
        tp = TP(f"{self.prefix}-{topic}", partition)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                 group_id=None)
        try:
            consumer.assign([tp])
            yield consumer, tp
        finally:
            consumer.close()

    def society_message(self, offset: int) -> bytes | None:
        """The raw society-topic message at ``offset`` (None if the topic does not hold it)."""
        if offset < 0:
            return None
        with self._reader("society", 0) as (consumer, tp):
            if offset >= consumer.end_offsets([tp])[tp]:  # e.g. a recreated, shorter topic
                return None
            consumer.seek(tp, offset)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=1000, max_records=1).values():
                    return next((r.value for r in records if r.offset == offset), None)
            return None

    def restore_partition(self, partition: int, until: int,
                          part: PartitionState) -> PartitionState:
        """Replay one events partition from its start up to ``until`` (exclusive) into
        ``part``: a worker handed a partition (a rebalance, a restart) then holds the de-dup
        memory and thread state the partition's earlier records built, and reports the whole
        history. Costs one read of the partition's retained records; logs progress."""
        if until == 0:  # handed from the start: nothing before it
            return part
        with self._reader("events", partition) as (consumer, tp):
            consumer.seek_to_beginning(tp)
            start = consumer.position(tp)
            if start >= until:
                return part
            log.info("partition %d: restoring records %d..%d", partition, start, until)
            reported = time.monotonic()
            while consumer.position(tp) < until:
                for records in consumer.poll(timeout_ms=1000, max_records=5000).values():
                    for r in records:
                        if r.offset >= until:
                            break
                        part.restore(r.value, r.offset)
                if time.monotonic() - reported > 5:
                    reported = time.monotonic()
                    log.info("partition %d: restored %d of %d records", partition,
                             part.next_offset - start, until - start)
            log.info("partition %d: restored %d records, %d threads live", partition,
                     until - start, len(part.threads))
            return part

    def restore_agents(self, partition: int, until: int, part: AgentPartition) -> AgentPartition:
        """Replay one agents partition from its start up to ``until`` (exclusive) into
        ``part``: a worker handed it then holds the per-agent state of its agents (one read of
        the partition's retained acts)."""
        if until == 0:
            return part
        with self._reader("agents", partition) as (consumer, tp):
            consumer.seek_to_beginning(tp)
            start = consumer.position(tp)
            if start >= until:
                return part
            log.info("agents partition %d: restoring records %d..%d", partition, start, until)
            while consumer.position(tp) < until:
                for records in consumer.poll(timeout_ms=1000, max_records=5000).values():
                    for r in records:
                        if r.offset >= until:
                            break
                        part.take(decode_acts(r.value), r.offset)
            log.info("agents partition %d: restored %d records, %d agents", partition,
                     until - start, len(part.stage.seen))
            return part
