"""What ingest keeps for one partition of the events topic: the de-dup memory and the thread
state of the posts keyed to it, and how far into the partition they reach.

``next_offset`` lets the reducer order two reports of the same partition (a handover's late
report covers fewer records), and a worker that takes a partition over replays its records
before the first one it is handed through the same :meth:`PartitionState.admit`, so it holds
what the previous owner held. No I/O: the Faust agent and the restore both drive it.

>>> from datetime import datetime, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> part = PartitionState()
>>> post = PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p", author="a")
>>> [part.admit(post, offset) for offset in (0, 1)]  # paging repeated the post
[True, False]
>>> part.next_offset, part.threads.thread("p")["comments"]
(2, 0)
"""

from __future__ import annotations

from datetime import datetime

from streams.events import CommentEvent, Event, PostEvent, VoteEvent
from streams.state.dedup import Dedup
from streams.state.threads import ThreadsConfig, ThreadsEngine


class PartitionState:
    def __init__(self, dedup_capacity: int = 2_000_000,
                 threads: ThreadsConfig | None = None) -> None:
        self.dedup = Dedup(dedup_capacity)
        self.threads = ThreadsEngine(threads)
        self.next_offset = 0
        self.latest: datetime | None = None  # latest thread event time, for expiry
        self.news = False  # thread state changed since the last report

    def skip(self, offset: int) -> None:
        """A record at ``offset`` that holds no event (it went to the dead letters)."""
        self.next_offset = offset + 1

    def admit(self, event: Event, offset: int) -> bool:
        """Take the event read at ``offset``; False if its id was seen before (a repeat)."""
        self.next_offset = offset + 1
        if not self.dedup.admit(event.id):
            return False
        if isinstance(event, PostEvent | CommentEvent | VoteEvent):
            self.threads.update(event)
            self.latest = max(self.latest or event.event_time, event.event_time)
            self.news = True
        return True
