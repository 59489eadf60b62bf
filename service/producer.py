"""The one producer path: every source publishes canonical events and dead letters through here.

kafka-python's producer with ``acks=all``; events are keyed by :attr:`Event.key` (the post id
for posts, comments and votes), so one thread's events stay in one partition, in order.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Protocol

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from service.config import Settings
from streams.events import DeadLetter, Event

log = logging.getLogger(__name__)

#: Topic name -> whether it is keyed (settings.partitions partitions) or a single partition.
TOPICS: dict[str, bool] = {
    "events": True,
    "agents": True,
    "society": False,
    "deadletters": False,
    "alerts": False,
}


def ensure_topics(settings: Settings) -> None:
    """Create moltscope's topics with their partition counts, before any worker starts.

    Done explicitly because a broker that auto-creates topics on first use picks its own
    partition count: the events topic must have ``settings.partitions``, the others one.
    """
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap,
                             client_id="moltscope-admin")
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(settings.topic(n), settings.partitions if keyed else 1, 1)
               for n, keyed in TOPICS.items() if settings.topic(n) not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):  # another process was first
                admin.create_topics(new)
    finally:
        admin.close()


class Sink(Protocol):
    def send(self, item: Event | DeadLetter) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class KafkaSink:
    """Publishes events to the events topic and dead letters to the dead-letter topic."""

    def __init__(self, settings: Settings) -> None:
        self.events_topic = settings.topic("events")
        self.dead_topic = settings.topic("deadletters")
        self.producer = KafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=20,
            client_id="moltscope-source", retries=10,
        )
        self.sent = 0
        self.dead = 0

    def send(self, item: Event | DeadLetter) -> None:
        if isinstance(item, DeadLetter):
            self.producer.send(self.dead_topic, item.model_dump_json().encode())
            self.dead += 1
        else:
            self.producer.send(self.events_topic, item.model_dump_json().encode(),
                               key=item.key.encode())
            self.sent += 1

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.flush()
        self.producer.close()


def publish(items: Iterable[Event | DeadLetter], sink: Sink) -> int:
    """Send every item, flush, and return how many were sent."""
    n = 0
    for item in items:
        sink.send(item)
        n += 1
    sink.flush()
    return n
