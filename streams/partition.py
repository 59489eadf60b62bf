"""What ingest keeps for one partition of the events topic: the de-dup memory, the thread
state of the posts keyed to it, the act router (:class:`~streams.acts.ActRouter`: who wrote
which post and comment, to turn the partition's events into acts keyed by agent), and how far
into the partition they reach.

``next_offset`` lets the reducer order two reports of the same partition (a handover's late
report covers fewer records), and a worker that takes a partition over replays its records
before the first one it is handed through the same :meth:`PartitionState.take`, so it holds
what the previous owner held (:meth:`PartitionState.restore`: the router learns the restored
posts without their vectors, see docs/architecture.md). No I/O: the Faust agent and the
restore both drive it.

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> part = PartitionState()
>>> raw = PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p",
...                 author="a").model_dump_json().encode()
>>> [type(part.take(r, offset)).__name__ for offset, r in enumerate([raw, raw, b"{"])]
['PostEvent', 'NoneType', 'Rejected']
>>> part.next_offset, part.threads.thread("p")["comments"]
(3, 0)
>>> part.report().by_bucket["0"].posts, part.report()  # reported once until news arrive
(1, None)
>>> [(a.agent, a.kind) for a in part.route(parse_event(raw))]
[('a', 'post')]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from pydantic import ValidationError

from streams.acts import Act, ActRouter
from streams.events import CommentEvent, Event, PostEvent, VoteEvent, parse_event
from streams.state.base import Item
from streams.state.dedup import Dedup
from streams.state.threads import Partial, ThreadsConfig, ThreadsEngine

#: Event ids remembered per partition (about 120 B an id).
DEDUP_CAPACITY = 2_000_000
#: Seconds of the partition's own event time a post's uncommented verdict waits past its
#: horizon before the partition folds it into its sums; until then the post travels in the
#: report's ``pending`` list and the reducer judges it at its own tick time (the replay's).
#: Must be at least the pipeline's tick (10 s) for live to equal the replay at the end of a
#: stream; an hour also covers a reducer lagging its partitions by less than that.
VERDICT_MARGIN_S = 3600.0


class Rejected(NamedTuple):
    """A record that holds no event: ``bad_json`` or ``invalid`` (it goes to the dead letters)."""

    reason: str


class PartitionState:
    def __init__(self, dedup_capacity: int = DEDUP_CAPACITY,
                 threads: ThreadsConfig | None = None, embed: bool = False) -> None:
        self.embed = embed  # posts are embedded: a restore keeps their texts to re-embed
        self.dedup = Dedup(dedup_capacity)
        self.threads = ThreadsEngine(threads)
        self.router = ActRouter()
        self.next_offset = 0
        self.latest: float | None = None  # latest thread event time (unix s), for expiry
        self.news = False  # thread state changed since the last report

    def take(self, raw: bytes, offset: int) -> Event | Rejected | None:
        """Read the raw record at ``offset``: its event if new, None if its id was seen
        before (a repeat), :class:`Rejected` if it holds no event."""
        try:
            event = parse_event(raw)
        except ValidationError as exc:
            self.next_offset = offset + 1
            return Rejected("bad_json" if exc.errors()[0]["type"] == "json_invalid"
                            else "invalid")
        return event if self.admit(event, offset) else None

    def restore(self, raw: bytes, offset: int) -> None:
        """Replay the record at ``offset`` of a handed partition: as :meth:`take`, and the
        router learns its post or comment (its acts were forwarded by the previous owner);
        when texts are embedded it keeps the posts' texts until
        :meth:`~streams.acts.ActRouter.set_vectors` (the ingest agent re-embeds them: the
        vector cache has most)."""
        event = self.take(raw, offset)
        if event is not None and not isinstance(event, Rejected):
            self.router.route(event, embed_later=self.embed)

    def route(self, event: Event, vector: np.ndarray | None = None) -> list[Act]:
        """The acts of an event :meth:`take` admitted (``vector``: a post's embedding)."""
        return self.router.route(event, vector)

    def admit(self, event: Event, offset: int) -> bool:
        """Take the event read at ``offset``; False if its id was seen before (a repeat)."""
        self.next_offset = offset + 1
        if not self.dedup.admit(event.id):
            return False
        if isinstance(event, PostEvent | CommentEvent | VoteEvent):
            # threads read no text: an item without tokens (Item.of would tokenise the text,
            # more than half of ingest's cost, for nothing)
            # a vote has no author (getattr's miss costs pydantic's __getattr__ and a raise)
            author = None if isinstance(event, VoteEvent) else event.author
            item = Item(event, event.event_time.timestamp(), author)
            self.threads.update(item)
            self.latest = item.t if self.latest is None else max(self.latest, item.t)
            self.news = True
        return True

    def report(self) -> Partial | None:
        """The partition's thread sums (verdicts folded up to its own latest event time less
        :data:`VERDICT_MARGIN_S`, the younger posts pending) if they changed since the last
        report, else None."""
        if not self.news or self.latest is None:
            return None
        self.news = False
        self.threads.expire(self.latest - VERDICT_MARGIN_S)
        return self.threads.partial(pending=True)
