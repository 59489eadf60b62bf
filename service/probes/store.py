"""Probes in Redis: what was posted, the replies that came back, the write log and the budget.

Keys (``{p}`` = the topic prefix, default ``moltscope``):

- ``{p}:probes:record`` hash probe id -> JSON: the probe (tier, stimulus, expected answer,
  bank version), its thread (``post_id``), ``posted_at``, the follow-up comments posted
  (ids, times) and whether each write was verified;
- ``{p}:probes:post_ids`` set: the probe post ids. **The crawler reads it** to revisit
  probe threads often (see docs/probes.md); :class:`ProbeTap` reads it to keep the replies;
- ``{p}:probes:own_comments`` set: comment ids the probes posted (never scored as replies);
- ``{p}:probes:replies:{post_id}`` hash comment id -> JSON reply (author, content, parent,
  time), filled from ordinary crawled CommentEvents by :class:`ProbeTap`;
- ``{p}:probes:writes`` list: the write log, newest first (capped at 10,000; no key in it);
- ``{p}:probes:ledger`` hash: ``day``, ``posts``, ``comments`` written that UTC day,
  ``last_post_at``, ``last_comment_at``, ``blocked_until`` (after a 429 or a failure);
- ``{p}:probes:kill`` string: set = kill switch on (the reason as value);
- ``{p}:probes:inflight`` string: the write under way; one left behind (a crash mid-write)
  or met by a second runner turns the kill switch on, since the platform may hold a post
  the record does not: the operator checks Moltbook, then ``moltscope probe kill --off``;
- ``{p}:probes:history`` list: one campaign summary per ``report`` (capped at 365), the
  baseline of the band alert.

Memory grows with the probes posted (the bank holds ~100) and their replies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from service.probes.bank import Probe
from service.probes.scoring import Reply
from streams.events import CommentEvent, DeadLetter, Event

WRITE_LOG_MAX = 10_000
HISTORY_MAX = 365


@dataclass
class Record:
    """A posted probe: the stimulus as posted and where it lives."""

    probe: Probe
    post_id: str
    posted_at: float
    bank_version: str
    verified: bool | None = None
    followups: list[dict[str, Any]] = field(default_factory=list)  # {comment_id, at, verified}

    @property
    def followups_done(self) -> int:
        return len(self.followups)

    @property
    def last_write_at(self) -> float:
        return self.followups[-1]["at"] if self.followups else self.posted_at

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe.to_json(), "post_id": self.post_id,
                "posted_at": self.posted_at, "bank_version": self.bank_version,
                "verified": self.verified, "followups": self.followups}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Record:
        return cls(Probe.from_json(d["probe"]), d["post_id"], d["posted_at"], d["bank_version"],
                   d.get("verified"), list(d.get("followups") or []))


@dataclass
class Ledger:
    """Writes of one UTC day and the last write times (the budget's input)."""

    day: str = ""
    posts: int = 0
    comments: int = 0
    last_post_at: float | None = None
    last_comment_at: float | None = None
    blocked_until: float = 0.0

    def on(self, day: str) -> Ledger:
        """The ledger as seen on ``day``: counts start again on a new day."""
        if day == self.day:
            return self
        return Ledger(day, 0, 0, self.last_post_at, self.last_comment_at, self.blocked_until)


class ProbeStore:
    def __init__(self, client: redis.Redis, prefix: str = "moltscope") -> None:
        self.r = client
        self.k = f"{prefix}:probes"

    # ------------------------------------------------------------ records

    def record_post(self, probe: Probe, post_id: str, at: float, bank_version: str,
                    verified: bool | None) -> Record:
        rec = Record(probe, post_id, at, bank_version, verified)
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(f"{self.k}:record", probe.id, json.dumps(rec.to_json()))
        pipe.sadd(f"{self.k}:post_ids", post_id)
        pipe.execute()
        return rec

    def record_followup(self, probe_id: str, comment_id: str, at: float,
                        verified: bool | None) -> Record:
        rec = self.record(probe_id)
        if rec is None:
            raise KeyError(probe_id)
        rec.followups.append({"comment_id": comment_id, "at": at, "verified": verified})
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(f"{self.k}:record", probe_id, json.dumps(rec.to_json()))
        pipe.sadd(f"{self.k}:own_comments", comment_id)
        pipe.execute()
        return rec

    def record(self, probe_id: str) -> Record | None:
        raw = self.r.hget(f"{self.k}:record", probe_id)
        return Record.from_json(json.loads(raw)) if raw else None

    def records(self) -> dict[str, Record]:
        return {k.decode(): Record.from_json(json.loads(v))
                for k, v in self.r.hgetall(f"{self.k}:record").items()}

    def post_ids(self) -> set[str]:
        return {m.decode() for m in self.r.smembers(f"{self.k}:post_ids")}

    # ------------------------------------------------------------ replies

    def add_replies(self, replies: Iterable[tuple[str, Reply]]) -> int:
        """Store (post id, reply) pairs; a repeat of a comment id overwrites (edits win)."""
        pipe = self.r.pipeline(transaction=False)
        n = 0
        for post_id, r in replies:
            pipe.hset(f"{self.k}:replies:{post_id}", r.comment_id, json.dumps(
                {"author": r.author, "content": r.content, "parent_id": r.parent_id, "t": r.t}))
            n += 1
        if n:
            pipe.execute()
        return n

    def own_comments(self) -> set[str]:
        return {m.decode() for m in self.r.smembers(f"{self.k}:own_comments")}

    def replies(self, post_id: str, *, exclude_author: str | None = None,
                extra: Iterable[Reply] = ()) -> list[Reply]:
        """Replies in a probe thread, the probe's own comments left out. ``extra`` (e.g. the
        thread's comments found in an archive) fills in comments the store does not hold."""
        own = self.own_comments()
        found = {cid.decode(): Reply(cid.decode(), d["author"], d["content"], d["parent_id"],
                                     d["t"])
                 for cid, raw in self.r.hgetall(f"{self.k}:replies:{post_id}").items()
                 for d in [json.loads(raw)]}
        for r in extra:
            found.setdefault(r.comment_id, r)
        out = [r for r in found.values()
               if r.comment_id not in own and not (exclude_author and r.author == exclude_author)]
        return sorted(out, key=lambda r: (r.t, r.comment_id))

    # ------------------------------------------------------------ budget, kill switch, log

    def ledger(self) -> Ledger:
        d = {k.decode(): v.decode() for k, v in self.r.hgetall(f"{self.k}:ledger").items()}

        def opt(name: str) -> float | None:
            return float(d[name]) if d.get(name) else None

        return Ledger(d.get("day", ""), int(d.get("posts", 0)), int(d.get("comments", 0)),
                      opt("last_post_at"), opt("last_comment_at"),
                      float(d.get("blocked_until", 0.0)))

    def save_ledger(self, ledger: Ledger) -> None:
        self.r.hset(f"{self.k}:ledger", mapping={
            "day": ledger.day, "posts": ledger.posts, "comments": ledger.comments,
            "last_post_at": "" if ledger.last_post_at is None else ledger.last_post_at,
            "last_comment_at": "" if ledger.last_comment_at is None else ledger.last_comment_at,
            "blocked_until": ledger.blocked_until})

    def kill(self, reason: str = "operator") -> None:
        self.r.set(f"{self.k}:kill", reason)

    def unkill(self) -> None:
        self.r.delete(f"{self.k}:kill", f"{self.k}:inflight")

    def begin_write(self, what: str) -> str | None:
        """Mark a write in flight; returns the mark of an earlier write that never ended
        (a crash, or a second runner), in which case nothing is marked."""
        if self.r.set(f"{self.k}:inflight", what, nx=True):
            return None
        raw = self.r.get(f"{self.k}:inflight")
        return raw.decode() if raw is not None else "unknown"

    def end_write(self) -> None:
        self.r.delete(f"{self.k}:inflight")

    def killed(self) -> str | None:
        raw = self.r.get(f"{self.k}:kill")
        return raw.decode() if raw is not None else None

    def log_write(self, entry: dict[str, Any]) -> None:
        pipe = self.r.pipeline(transaction=False)
        pipe.lpush(f"{self.k}:writes", json.dumps(entry))
        pipe.ltrim(f"{self.k}:writes", 0, WRITE_LOG_MAX - 1)
        pipe.execute()

    def writes(self, n: int = 100) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(f"{self.k}:writes", 0, n - 1)]

    def push_history(self, summary: dict[str, Any]) -> None:
        pipe = self.r.pipeline(transaction=False)
        pipe.rpush(f"{self.k}:history", json.dumps(summary))
        pipe.ltrim(f"{self.k}:history", -HISTORY_MAX, -1)
        pipe.execute()

    def history(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(f"{self.k}:history", 0, -1)]


def reply_of(ev: CommentEvent) -> Reply:
    return Reply(ev.comment_id, ev.author, ev.content, ev.parent_id, ev.event_time.timestamp())


class ProbeTap:
    """Keeps the replies to probe posts out of the ordinary event stream.

    ``observe(item)`` stores a CommentEvent whose post is a probe post; the set of probe
    post ids is re-read at most every ``refresh_s`` seconds, so a crawled event costs a set
    lookup, not a Redis round trip. ``wrap(emit)`` gives an ``emit`` that observes first.
    """

    def __init__(self, store: ProbeStore, *, refresh_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.refresh_s = refresh_s
        self._clock = clock
        self._ids: set[str] = set()
        self._read_at: float | None = None
        self.kept = 0

    def observe(self, item: Event | DeadLetter) -> bool:
        if not isinstance(item, CommentEvent):
            return False
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            self._ids, self._read_at = self.store.post_ids(), now
        if item.post_id not in self._ids:
            return False
        self.store.add_replies([(item.post_id, reply_of(item))])
        self.kept += 1
        return True

    def wrap(self, emit: Callable[[Any], None]) -> Callable[[Any], None]:
        def tapped(item: Any) -> None:
            self.observe(item)
            emit(item)

        return tapped
