"""Faust's aiokafka transport with the worker consumer's fetch wait set.

Faust passes a fixed ``fetch_max_wait_ms=1500`` to its worker consumer, and aiokafka reads the
value when the consumer starts: an alert crosses three topics and could wait that long at each.
:class:`WaitingApp` takes the wait from its ``fetch_wait_ms`` attribute instead.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_kafka


def transport(fetch_wait_ms: int) -> type[faust_kafka.Transport]:
    class ConsumerThread(faust_kafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_wait_ms
            return consumer

    class WaitingConsumer(faust_kafka.Consumer):
        def _new_consumer_thread(self) -> ConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(faust_kafka.Transport):
        Consumer = WaitingConsumer

    return Transport


class WaitingApp(faust.App):
    fetch_wait_ms = 1500

    def _new_transport(self) -> Any:
        return transport(self.fetch_wait_ms)(self.conf.broker_consumer, self)
