"""Citation lookups: is a cited post or account in moltscope's own store?

Each answers ``True`` (found), ``False`` (the store would know it and does not) or ``None``
(the store cannot tell). :class:`RedisLookup` reads what the crawler keeps: every agent it
ever emitted (``{crawler}:seen``, definitive once the crawler has run) and the posts of its
revisit queue (``{crawler}:posts``, only posts within the crawler's horizon, so an older post
is ``None``, not ``False``). :class:`ArchiveLookup` holds the post ids and agent names of an
archive or a replay's input, and is definitive for them. :class:`AnyLookup` combines.

>>> from datetime import UTC, datetime
>>> from streams.events import PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=UTC)
>>> look = ArchiveLookup.from_events([PostEvent(id="e1", event_time=t, observed_at=t,
...                                             source="archive", post_id="p-1", author="Ada")])
>>> look.post_exists("p-1"), look.agent_exists("ada"), look.agent_exists("Bob")
(True, True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import redis

from service.probes.scoring import CitationLookup
from streams.events import AgentEvent, CommentEvent, DeadLetter, Event, PostEvent


class RedisLookup:
    def __init__(self, client: redis.Redis, *, prefix: str = "moltscope",
                 crawler_prefix: str = "moltscope:crawler") -> None:
        self.r = client
        self.p = prefix
        self.c = crawler_prefix

    def post_exists(self, post_id: str) -> bool | None:
        return True if self.r.hexists(f"{self.c}:posts", post_id) else None

    def agent_exists(self, name: str) -> bool | None:
        pipe = self.r.pipeline(transaction=False)
        pipe.sismember(f"{self.c}:seen", f"agent:{name}")
        pipe.zscore(f"{self.p}:pagerank:cumulative", name)
        pipe.exists(f"{self.c}:seen")
        seen, score, crawled = pipe.execute()
        if seen or score is not None:
            return True
        return False if crawled else None


@dataclass
class ArchiveLookup:
    """Post ids and agent names (compared case-insensitively: Moltbook names are)."""

    posts: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)

    @classmethod
    def from_events(cls, items: Iterable[Event | DeadLetter]) -> ArchiveLookup:
        out = cls()
        for ev in items:
            if isinstance(ev, PostEvent):
                out.posts.add(ev.post_id.lower())
            if isinstance(ev, PostEvent | CommentEvent) and ev.author:
                out.agents.add(ev.author.lower())
            elif isinstance(ev, AgentEvent):
                out.agents.add(ev.name.lower())
        return out

    def post_exists(self, post_id: str) -> bool | None:
        return post_id.lower() in self.posts

    def agent_exists(self, name: str) -> bool | None:
        return name.lower() in self.agents


class AnyLookup:
    """True when any lookup finds it, False when one says absent and none finds it."""

    def __init__(self, *lookups: CitationLookup) -> None:
        self.lookups = lookups

    def _ask(self, answers: Iterable[bool | None]) -> bool | None:
        seen = list(answers)
        return True if True in seen else False if False in seen else None

    def post_exists(self, post_id: str) -> bool | None:
        return self._ask(lk.post_exists(post_id) for lk in self.lookups)

    def agent_exists(self, name: str) -> bool | None:
        return self._ask(lk.agent_exists(name) for lk in self.lookups)
