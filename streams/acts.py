"""What one agent did, as the per-agent stage sees it: an :class:`Act`.

The events topic is keyed by post (a thread stays in order in one partition), but the
individual layer (metrics.md A2) and the action plane (D) are per agent, so their state lives
with the agent's key: ingest turns each event into the acts of the agents it concerns and
forwards them keyed by agent. An act carries what its agent's state cannot see from its own
partition: the vector of the post a comment answers (interaction impact's ``v*``), and, for a
vote-count change, whose item it was and its new score (feedback adaptation).

Acts of one agent may arrive out of event-time order (they come from several ingest
partitions); every per-agent engine orders what it keeps by ``(t, item_id)``, so its figures
do not depend on the arrival order, and two workers give the replay's figures.

>>> a = Act(agent="KingMolt", t=1769904000.0, kind="post", post_id="p1", item_id="p1")
>>> a.kind, a.score is None
('post', True)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from streams.events import CommentEvent, Event, PostEvent, VoteEvent

if TYPE_CHECKING:
    import numpy as np

ActKind = Literal["post", "comment", "replied", "score"]


@dataclass(frozen=True, slots=True)
class Act:
    """One act of one agent.

    agent: who acted (post or comment author); for ``replied``, the agent a comment replied to
    (so that reciprocity is per agent: each side sees both directions); for ``score``, whose
    item's votes changed;
    t: event time, unix seconds; post_id: the thread; item_id: the post or comment id (for
    ``score``: the voted item); vector: a post's embedding (unit float32; None when the stage
    embeds nothing); target_author: for a comment, the agent it replies to (the parent
    comment's author, else the post's; None when unknown); target_vector: for a comment, the
    vector of the post it is on (``v*``), None when that post was not seen or not embedded;
    target_kind / score: for ``score``, the voted item's kind and upvotes - downvotes after
    the change.
    """

    agent: str
    t: float
    kind: ActKind
    post_id: str
    item_id: str
    vector: np.ndarray | None = None
    target_author: str | None = None
    target_vector: np.ndarray | None = None
    target_kind: Literal["post", "comment"] | None = None
    score: int | None = None


#: Seconds of event time a post (and its comments) stays known to the router after it was
#: posted: a vote or comment on an older item routes no act (counted). Threads stay live
#: for 7 days (``ThreadsConfig``); votes trail their posts by hours.
ROUTER_HORIZON_S = 7 * 86400.0
#: Extra event time an item is kept in memory past its horizon, so that an event arriving
#: this late (behind the partition's latest) still finds the items it may route to.
ROUTER_SWEEP_MARGIN_S = 86400.0

#: Why an event made no act (``ActRouter.unrouted``).
Unrouted = Literal["post_no_author", "comment_no_author", "vote_no_author", "vote_unknown_item",
                   "vote_expired_item"]


class _Post:
    __slots__ = ("author", "comments", "t", "vector")

    def __init__(self, author: str | None, t: float, vector: np.ndarray | None) -> None:
        self.author = author
        self.t = t
        self.vector = vector
        self.comments: dict[str, str | None] = {}  # comment id -> author


class ActRouter:
    """Turns one ingest partition's de-duplicated events into acts (pure, no I/O).

    The events topic is keyed by post, so a partition sees whole threads: the router keeps,
    per post, its author, time and vector, and per comment its author, for
    ``horizon_s`` of event time after the post (then swept, ``ROUTER_SWEEP_MARGIN_S`` later),
    and turns each event into the acts of the agents it concerns:

    - a post: ``post`` for its author (with its vector);
    - a comment: ``comment`` for its author (``target_author`` = the event's ``reply_to``,
      else the parent comment's author, else the post's; ``target_vector`` = the post's
      vector) and ``replied`` for the agent it answers (``target_author`` = the commenter;
      none for a reply to oneself or to nobody known);
    - a vote-count change: ``score`` for the voted item's author (``score`` = upvotes -
      downvotes after the change). A post or comment observed with non-zero counts (an
      archive's final counts, a crawl's first sight) also makes a ``score`` act at its time:
      its counts changed from zero.

    Items without an author make no act for it (counted in :attr:`unrouted`, by reason, as
    are votes on items the router does not hold or holds past the horizon). Whether an item
    is past the horizon depends only on the two event times, never on what else the
    partition read, so any split of threads over partitions routes the same acts.

    Memory: ~300 bytes a post plus its vector (1,536 bytes at d = 384, shared with the
    forwarded record) and ~150 bytes a comment, for the posts of ``horizon_s`` plus the
    margin (``bench/bench_agents.py`` measures it).

    >>> from datetime import datetime, timezone
    >>> from streams.events import CommentEvent, PostEvent, VoteEvent
    >>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
    >>> r = ActRouter()
    >>> [a.kind for a in r.route(PostEvent(id="post:p", event_time=t, observed_at=t,
    ...                                    post_id="p", author="ann"))]
    ['post']
    >>> acts = r.route(CommentEvent(id="comment:c", event_time=t, observed_at=t, comment_id="c",
    ...                             post_id="p", author="bob"))
    >>> [(a.agent, a.kind, a.target_author) for a in acts]
    [('bob', 'comment', 'ann'), ('ann', 'replied', 'bob')]
    >>> [(a.agent, a.kind, a.score) for a in r.route(VoteEvent(
    ...     id="vote:c:3-1", event_time=t, observed_at=t, target="comment", target_id="c",
    ...     post_id="p", upvotes=3, downvotes=1, delta_up=3, delta_down=1))]
    [('bob', 'score', 2)]
    """

    def __init__(self, horizon_s: float = ROUTER_HORIZON_S,
                 sweep_margin_s: float = ROUTER_SWEEP_MARGIN_S) -> None:
        self.horizon_s = horizon_s
        self.sweep_margin_s = sweep_margin_s
        self._posts: dict[str, _Post] = {}  # in arrival order (about event time): swept
        self._unembedded: dict[str, str] = {}  # restored post id -> text, until re-embedded
        self.latest = -math.inf
        self.routed: Counter[str] = Counter()  # acts made, by kind
        self.unrouted: Counter[Unrouted] = Counter()  # events (or parts) without an act

    def __len__(self) -> int:
        return len(self._posts)

    def route(self, event: Event, vector: np.ndarray | None = None, *,
              embed_later: bool = False) -> list[Act]:
        """The acts of one de-duplicated event (``vector``: a post's embedding, if any;
        ``embed_later``: a restore without vectors keeps the post's text until
        :meth:`set_vectors` gives its vector)."""
        t = event.event_time.timestamp()
        if embed_later and isinstance(event, PostEvent) and vector is None and event.text:
            self._unembedded[event.post_id] = event.text
        out: list[Act]
        if isinstance(event, PostEvent):
            out = self._post(event, t, vector)
        elif isinstance(event, CommentEvent):
            out = self._comment(event, t)
        elif isinstance(event, VoteEvent):
            out = self._vote(event, t)
        else:
            return []
        if t > self.latest:
            self.latest = t
            self._sweep()
        for a in out:
            self.routed[a.kind] += 1
        return out

    def unembedded(self) -> dict[str, str]:
        """The texts of the held posts a restore left without a vector (post id -> text)."""
        return {p: t for p, t in self._unembedded.items() if p in self._posts}

    def set_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        """Give held posts their vectors (after a restore): later comments carry their v*."""
        for pid, v in vectors.items():
            post = self._posts.get(pid)
            if post is not None:
                post.vector = v
        self._unembedded.clear()

    def _post(self, e: PostEvent, t: float, vector: np.ndarray | None) -> list[Act]:
        held = self._posts.get(e.post_id)
        if held is None:
            self._posts[e.post_id] = _Post(e.author, t, vector)
        else:  # a comment came first (kept as a stub): the post fills it in
            held.author, held.t, held.vector = e.author, t, vector
        if e.author is None:
            self.unrouted["post_no_author"] += 1
            return []
        out = [Act(e.author, t, "post", e.post_id, e.post_id, vector=vector)]
        if e.upvotes or e.downvotes:
            out.append(Act(e.author, t, "score", e.post_id, e.post_id, target_kind="post",
                           score=e.upvotes - e.downvotes))
        return out

    def _comment(self, e: CommentEvent, t: float) -> list[Act]:
        post = self._posts.get(e.post_id)
        if post is None:  # its post is unknown (not read, or its author only named here)
            post = self._posts[e.post_id] = _Post(e.post_author, t, None)
        post.comments[e.comment_id] = e.author
        if e.author is None:
            self.unrouted["comment_no_author"] += 1
            return []
        target = e.reply_to
        if target is None and e.parent_id is not None:
            target = post.comments.get(e.parent_id)
        if target is None and e.parent_id is None:
            target = post.author or e.post_author
        vector = post.vector if t - post.t <= self.horizon_s else None
        out = [Act(e.author, t, "comment", e.post_id, e.comment_id, target_author=target,
                   target_vector=vector)]
        if target is not None and target != e.author:
            out.append(Act(target, t, "replied", e.post_id, e.comment_id, target_author=e.author))
        if e.upvotes or e.downvotes:
            out.append(Act(e.author, t, "score", e.post_id, e.comment_id, target_kind="comment",
                           score=e.upvotes - e.downvotes))
        return out

    def _vote(self, e: VoteEvent, t: float) -> list[Act]:
        post = self._posts.get(e.post_id)
        if post is None or (e.target == "comment" and e.target_id not in post.comments):
            self.unrouted["vote_unknown_item"] += 1
            return []
        if t - post.t > self.horizon_s:
            self.unrouted["vote_expired_item"] += 1
            return []
        author = post.author if e.target == "post" else post.comments[e.target_id]
        if author is None:
            self.unrouted["vote_no_author"] += 1
            return []
        return [Act(author, t, "score", e.post_id, e.target_id, target_kind=e.target,
                    score=e.upvotes - e.downvotes)]

    def _sweep(self) -> None:
        """Forget posts (and their comments) older than the horizon plus the margin."""
        cut = self.latest - self.horizon_s - self.sweep_margin_s
        while self._posts:
            pid, post = next(iter(self._posts.items()))
            if post.t >= cut:
                break
            del self._posts[pid]
            self._unembedded.pop(pid, None)

    def nbytes(self) -> int:
        """Approximate memory (bytes; vectors counted, shared strings not)."""
        import sys

        n = sys.getsizeof(self._posts)
        for p in self._posts.values():
            n += 120 + sys.getsizeof(p.comments) + 100 * len(p.comments)
            if p.vector is not None:
                n += p.vector.nbytes
        return n
