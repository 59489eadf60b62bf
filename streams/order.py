"""Event-time order over several partitions: a watermark and a buffer, shared by the live
reducer (``streams/reducer.py``: one clock per events partition) and the offline replay
(``streams/replay.py``: one partition), so both apply the same events in the same order.

It is part of the reducer's checkpointed state (its code is in the checkpoint's version).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from streams.state.base import Sample

#: Event-time seconds an event may trail its partition's latest and still be applied in order.
#: The watermark alone orders the partitions when each is in event-time order (an archive
#: replay publishes in event-time order); the lateness absorbs small disorder inside a
#: partition (events of one batch, clocks a few seconds apart) and every event waits this much
#: longer for it. A crawler's comments found hours after their time are late whatever it is:
#: they are applied anyway and counted.
ALLOWED_LATENESS_S = 5.0
#: Seconds of wall time without records after which a partition no longer holds the watermark
#: back (a partition at its end sends nothing). Longer than a rebalance's pause (about the
#: broker session timeout, 6 s) plus a loaded machine's stalls: a paused partition that is
#: declared idle too early sends late events.
IDLE_PARTITION_S = 30.0

T = TypeVar("T")


class _Clock:
    """One partition: the latest event time it sent, and when (wall) it last sent a record."""

    __slots__ = ("latest", "heard")

    def __init__(self, heard: float | None) -> None:
        self.latest = -math.inf
        self.heard = heard


class EventTimeOrder(Generic[T]):
    """Events of several partitions released in ``(event time, event id)`` order once the
    watermark has passed them: the least latest event time of the partitions heard from
    within ``idle_partition_s`` of wall time (a partition not heard from yet counts from the
    first call), minus ``allowed_lateness_s``. An event already behind the released frontier
    when it arrives is late: it is released at once (applied anyway) and counted.
    With every partition in event-time order (within the lateness) and none idle while it
    still has records, the released sequence is the whole stream sorted by the key, whatever
    the interleaving. The offline replay uses one partition that is never idle.

    >>> o = EventTimeOrder(partitions=2, allowed_lateness_s=0.0)
    >>> o.push(5.0, "b", "e5", partition=0, offset=0, wall=0.0)
    >>> o.push(3.0, "a", "e3", partition=1, offset=0, wall=0.0)
    >>> o.push(6.0, "a", "e6", partition=1, offset=1, wall=0.0)
    >>> list(o.ready(wall=1.0)), list(o.ready(wall=IDLE_PARTITION_S + 1)), o.late
    (['e3'], ['e5', 'e6'], 0)
    >>> o.push(4.0, "c", "e4", partition=1, offset=1, wall=40.0)  # behind the frontier
    >>> list(o.ready(wall=40.0)), o.late
    (['e4'], 1)
    """

    def __init__(self, partitions: int | Iterable[int] = 1, *,
                 allowed_lateness_s: float = ALLOWED_LATENESS_S,
                 idle_partition_s: float = IDLE_PARTITION_S) -> None:
        ids = range(partitions) if isinstance(partitions, int) else partitions
        self.clocks = {p: _Clock(None) for p in ids}
        self.lateness = allowed_lateness_s
        self.idle_s = idle_partition_s
        self.heap: list[tuple[float, str, int, int, T]] = []
        self.frontier = -math.inf  # every event before it was released
        self.late = 0

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, t: float, key: str, item: T, *, partition: int, offset: int,
             wall: float) -> None:
        """Buffer ``item`` (event time ``t``, tie-break ``key``: the event id) read at
        ``offset`` of ``partition`` at ``wall``."""
        clock = self.clocks.get(partition)
        if clock is None:
            clock = self.clocks[partition] = _Clock(wall)
        clock.heard = wall
        if t > clock.latest:
            clock.latest = t
        if t < self.frontier:
            self.late += 1
        heapq.heappush(self.heap, (t, key, partition, offset, item))

    def watermark(self, wall: float) -> float:
        """Event time before which every event is released (+inf: every partition idle)."""
        low = math.inf
        for clock in self.clocks.values():
            if clock.heard is None:
                clock.heard = wall  # a partition never heard from gets its grace from now
            if wall - clock.heard <= self.idle_s and clock.latest < low:
                low = clock.latest
        return low - self.lateness

    def ready(self, wall: float) -> Iterator[T]:
        """Release, in key order, the events before the watermark (and the late ones); all
        of them if every partition is idle."""
        mark = self.watermark(wall)
        if mark == math.inf:  # the frontier stays at the latest event released
            yield from self.drain()
            return
        self.frontier = max(self.frontier, mark)
        heap = self.heap
        while heap and heap[0][0] < self.frontier:
            yield heapq.heappop(heap)[4]

    def drain(self) -> Iterator[T]:
        """Release everything (the end of a replay)."""
        while self.heap:
            t, *_, item = heapq.heappop(self.heap)
            self.frontier = max(self.frontier, t)
            yield item

    def resume(self, wall: float) -> None:
        """After a restart every partition gets its grace period again from ``wall``."""
        for clock in self.clocks.values():
            clock.heard = wall

    def sample(self) -> Sample:
        return Sample("reducer_late_events_total", float(self.late), kind="counter",
                      help="Events that reached the reducer behind its event-time watermark "
                           "(applied out of order)")
