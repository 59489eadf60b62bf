"""Faust's aiokafka transport with the worker consumer's fetch wait set, and its per-message
delivery without four tasks a message.

Faust passes a fixed ``fetch_max_wait_ms=1500`` to its worker consumer, and aiokafka reads the
value when the consumer starts: an alert crosses three topics and could wait that long at each.
:class:`WaitingApp` takes the wait from its ``fetch_wait_ms`` attribute instead.

Faust's fetch loop (``Consumer._drain_messages``) hands each message to its topic's streams
through ``wait_first(callback(message), suspend_flow.wait())``: four tasks (the callback, the
flow's, the service's stopped and crashed events) and an ``asyncio.wait`` for every record,
the largest part of a record's cost in the worker. The callback almost always completes on
its first step (its streams' queues have room), so :class:`WaitingConsumer` runs that step
inline and falls back to Faust's ``wait_first`` only when the callback blocks (a full
queue), with the rest of the callback, exactly as before: the first step ran on the first
loop iteration there too, whatever the flow.

A topic the app batches (:attr:`WaitingApp.batched`: the events topic) goes through that loop a
chunk of records at a time: each partition's fetched records become chunks of at most the
topic's batch size (:class:`Records`), each delivered, tracked and acked as one message at the
offset of its last record. The consumer remembers where each chunk starts (the offset after
the last one read before it), and a commit moves over a run of acked chunks that follow each
other: a chunk's offsets are committed only once its message is acked, i.e. after its every
record was processed, as a message's are. Faust's message, event, queue and ack machinery then
runs once a chunk instead of once a record (about a twentieth of the worker's CPU time on a
backlog). Faust's own gaps (an interval tree rebuilt on every insertion) would cost more than
they save here.

Every topic of the worker is raw (bytes in, bytes out), but Faust decodes each record through
its serializer registry (codec lookups, two calls a record) and reads its settings for the
event class: :class:`RawSchema` makes the event of the record's key and value as read, what
the raw codec gives back.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import Any

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as faust_kafka


class RawSchema(faust.Schema):
    """A raw topic's schema: an event holds the record's key and value as read (the raw codec
    decodes bytes to themselves), without the serializer registry's per-record calls; sent
    values go through the raw codec as before."""

    def __init__(self) -> None:
        super().__init__(key_serializer="raw", value_serializer="raw")

    def compile(self, app: Any, **_: Any) -> Callable[..., Awaitable[Any]]:
        event = app.conf.Event

        async def decode(message: Any, *, propagate: bool = False) -> Any:
            return event(app, message.key, message.value, message.headers, message)

        return decode


class Records(list[tuple[bytes, int, int]]):
    """A chunk of one partition's records, in offset order: (value, partition, offset) each.
    Delivered as the value of one message at the last record's offset."""


def chunks(records: list[Any], size: int, read: int | None) -> list[Any]:
    """``records`` (aiokafka's, of one partition, in offset order) as records holding a
    :class:`Records` of at most ``size`` each, at the offset of their last; those before
    ``read`` (the partition's read offset) are left out, as the fetch loop drops them.

    >>> from aiokafka.structs import ConsumerRecord
    >>> rs = [ConsumerRecord("t", 0, o, 0, 0, None, b"v%d" % o, None, 0, 2, ()) for o in range(5)]
    >>> [(c.offset, c.value) for c in chunks(rs, 2, 1)]
    [(2, [(b'v1', 0, 1), (b'v2', 0, 2)]), (4, [(b'v3', 0, 3), (b'v4', 0, 4)])]
    """
    if read is not None:
        records = [r for r in records if r.offset >= read]
    out = []
    for i in range(0, len(records), size):
        part = records[i:i + size]
        last = part[-1]
        out.append(dataclasses.replace(last, key=None, value=Records(
            [(r.value, r.partition, r.offset) for r in part])))
    return out


class _Rest:
    """Awaitable: the rest of a coroutine that already ran its first step, which yielded
    ``blocked`` (the future it waits on)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], blocked: Any) -> None:
        self.coro = coro
        self.blocked = blocked

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.blocked
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # noqa: BLE001 - a cancellation goes into the coroutine
                try:
                    value = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as done:
                    return done.value


async def _rest(coro: Coroutine[Any, Any, Any], blocked: Any) -> Any:
    return await _Rest(coro, blocked)


def transport(fetch_wait_ms: int) -> type[faust_kafka.Transport]:
    class ConsumerThread(faust_kafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_wait_ms
            return consumer

    class WaitingConsumer(faust_kafka.Consumer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # per partition: the chunks delivered and not yet committed, by the offset of
            # their message (their last record's) -> the first offset they cover
            self._chunk_start: defaultdict[Any, dict[int, int]] = defaultdict(dict)

        def _new_offset(self, tp: Any) -> int | None:
            starts = self._chunk_start.get(tp)
            if not starts:
                return super()._new_offset(tp)
            acked = self._acked[tp]
            if not acked:
                return None
            acked.sort()
            committed = self._committed_offset[tp]
            if committed and starts.get(acked[0], acked[0]) - committed > 1:
                return None  # an earlier chunk is not acked yet (Faust's test for a message)
            n = 1
            while n < len(acked) and starts.get(acked[n], acked[n]) <= acked[n - 1] + 1:
                n += 1
            done = acked[:n]
            del acked[:n]
            self._acked_index[tp].difference_update(done)
            # with those done, any chunk delivered before a re-seek and never acked
            for offset in [o for o in starts if o <= done[-1]]:
                del starts[offset]
            return done[-1] + 1

        async def on_partitions_revoked(self, revoked: set[Any]) -> None:
            for tp in revoked:
                self._chunk_start.pop(tp, None)
            await super().on_partitions_revoked(revoked)

        def _new_consumer_thread(self) -> ConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def _wait_next_records(self, timeout: float) -> Any:
            records, active = await super()._wait_next_records(timeout)
            batched: Mapping[str, int] = self.app.batched
            if records and batched:
                for tp, got in records.items():
                    if tp.topic in batched:
                        records[tp] = chunks(got, batched[tp.topic], self._read_offset[tp])
            return records, active

        async def _deliver(self, callback: Callable[[Any], Awaitable[Any]],
                           message: Any) -> None:
            coro = callback(message)
            assert isinstance(coro, Coroutine)
            try:
                blocked = coro.send(None)
            except StopIteration:
                return
            await self.wait_first(_rest(coro, blocked), self.suspend_flow.wait())

        async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover
            # Faust 0.15's loop (faust/transport/consumer.py), but for ``_deliver`` and
            # the chunks
            callback = self.callback
            getmany = self.getmany
            consumer_should_stop = self._stopped.is_set
            fetcher_should_stop = fetcher._stopped.is_set
            get_read_offset = self._read_offset.__getitem__
            set_read_offset = self._read_offset.__setitem__
            set_flag, unset_flag = self.diag.set_flag, self.diag.unset_flag
            fetching = CONSUMER_FETCHING
            commit_every = self._commit_every
            acks_enabled_for = self.app.topics.acks_enabled_for
            deliver = self._deliver
            chunk_start = self._chunk_start
            since_yield = 0
            try:
                while not (consumer_should_stop() or fetcher_should_stop()):
                    set_flag(fetching)
                    ait = getmany(timeout=1.0)
                    await self.sleep(0)
                    if not self.should_stop:
                        async for tp, message in ait:
                            since_yield += 1
                            if since_yield > 100:
                                await asyncio.sleep(0)
                                since_yield = 0
                            offset = message.offset
                            r_offset = get_read_offset(tp)
                            if r_offset is None or offset >= r_offset:
                                if type(message.value) is Records:  # covers since the last read
                                    chunk_start[tp][offset] = r_offset + 1 if r_offset \
                                        else message.value[0][2]
                                elif offset - (r_offset or 0) > 1 and r_offset \
                                        and acks_enabled_for(message.topic):
                                    await self._add_gap(tp, r_offset + 1, offset)
                                if commit_every is not None and self._n_acked >= commit_every:
                                    self._n_acked = 0
                                    await self.commit()
                                await deliver(callback, message)
                                set_read_offset(tp, offset)
                        unset_flag(fetching)
            except self.consumer_stopped_errors:
                if self.transport.app.should_stop:
                    return
                raise
            except asyncio.CancelledError:
                if self.transport.app.should_stop:
                    return
                raise
            finally:
                unset_flag(fetching)

    class Transport(faust_kafka.Transport):
        Consumer = WaitingConsumer

    return Transport


class WaitingApp(faust.App):
    fetch_wait_ms = 1500
    #: topics read a chunk of records a message (:class:`Records`), with the chunk's size
    batched: Mapping[str, int] = {}

    def _new_transport(self) -> Any:
        return transport(self.fetch_wait_ms)(self.conf.broker_consumer, self)
