"""The Moltbook crawler: discovers new posts, revisits active ones, emits canonical events.

One sequential loop (``MoltbookCrawler.events`` / ``run``) interleaves three kinds of work, in
turn whenever more than one is due:

- **discovery**: walks ``GET /posts?sort=new`` from the newest page down, following
  ``next_cursor`` or ``next_offset`` (re-reading ``offset_overlap`` items of the previous
  page, since posts deleted between pages shift offset pages up). Pages repeat and skip
  items: a repeat is a known id and is ignored; an incremental walk stops ``rewalk_pages``
  pages after reaching ground the last walk covered, and a *deep* walk down to the horizon
  (every ``sweep_interval_s``, and on a first start) finds what an earlier walk skipped.
  A new post is emitted from its list item (or from its first detail answer when the list
  item dead-letters, e.g. the ``author: null`` incident) and joins the revisit queue.
- **revisits**: ``GET /posts/{id}`` for the comment tree, in order of next-visit time. The
  interval is ``I = clamp(age * revisit_age_fraction, revisit_min_s, revisit_max_s)`` divided
  by ``1 + activity`` (new comments created within the last ``I``, plus the post and comments
  whose votes changed since the last visit), so young and busy posts come back soon; a post
  leaves the queue ``horizon_s`` after its creation (after a 404 it is no longer fetched).
  New comments become CommentEvents; changed (upvotes, downvotes) of the post or a known
  comment become VoteEvents.
- **profiles**: ``GET /agents/profile?name=`` once for each new author. Until it answers,
  the AgentEvent built from the payload's author object is kept as a fallback (emitted on
  404, or when the profile fails after all retries); SubmoltEvents are emitted once per name.
  Profiles' recent posts are not emitted: discovery finds posts, within the horizon.
- **comment backfill**: a post whose ``comment_count`` (latest seen, from lists and detail
  answers) exceeds the comments received has a *deficit* (detail answers cap or omit the
  tree). The post with the largest deficit is asked ``GET /posts/{id}/comments?sort=&limit=``
  (``comments_limit``, the API's 500): its pages (``next_cursor``) in one order, then the
  next of ``backfill_sorts`` (each order is capped), until the deficit is gone, an answer is
  empty or the orders run out; then not again until its count grows. At most
  ``backfill_share`` of the pace (a backfill request waits ``60 / (requests_per_minute *
  backfill_share)`` s after the previous one), inside the budget: every request still takes
  the bucket's token. Progress: ``moltscope_crawler_comment_deficit``,
  ``..._posts_with_deficit``, ``..._backfill_pending_posts``, ``..._backfill_requests_total``,
  ``..._backfill_comments_total``.
- **platform totals**: ``GET /stats`` every ``stats_interval_s`` (agents, submolts, posts,
  comments: ``moltscope_crawler_platform_count{kind}``); the capture ratio
  ``moltscope_crawler_capture_ratio{kind=posts|comments}`` = posts (comments) created since
  the first answer of this process that the crawler emitted, over the totals' growth since
  then (in memory: a restart starts a new base).
- **probe posts** (docs/probes.md): ``probe_ids()`` (e.g. ``ProbeStore.post_ids``, the Redis
  set ``{prefix}:probes:post_ids``) is read at start and at the start of every discovery
  walk; a probe post not in the revisit queue joins it (created = now until its detail
  answers with the real creation time), so it is revisited even when no listing shows it.
  Probe posts are revisited every ``revisit_min_s`` and kept ``probe_horizon_s`` (default 7
  days, at least ``horizon_s``) after their creation. A probe post that left the queue is not
  queued again by this process (after a restart, once more: one fetch finds it too old).

State kept (and checkpointed, see :mod:`service.stores.checkpoint`): per post in the revisit
queue its creation time, next visit, last (upvotes, downvotes), author, comment_count and
backfill position, and the id and last counts of every comment seen, plus fingerprints of the
dead letters it produced, so memory grows with the posts created within ``horizon_s`` (probe
posts: ``probe_horizon_s``) and their comments, and drops as they age out; the ids of probe
posts (bounded by the probe bank, ~100); the set of agent/submolt names already emitted
(bounded by the platform's agents and submolts); the discovery walk's position. Dead letters
of list pages are remembered only in memory (last 10,000), so a restart may repeat one.

Delivery is at-least-once: each unit of work (one page, one visit, one profile) is checkpointed
only after all its items were handed out, so a crash repeats at most the unit in flight, with
the same event ids (de-duplicated downstream).

Requests are paced by a token bucket (``requests_per_minute``, ``burst``: by default 55/min,
at most 56 in any sliding minute, under the platform's 60); 429s, 5xx, timeouts and broken
JSON follow :class:`service.sources.ratelimit.RetryPolicy`: a header-less 429 (the per-IP
limit) pauses every request ``ip_block_backoff_s`` (30 s), doubling while they repeat up to
``ip_block_backoff_cap_s`` (15 minutes), so a lone one costs half a minute, not a stall. The API key
(``api_key`` or the ``MOLTBOOK_API_KEY`` environment variable) is sent as a bearer token and
never logged.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from service.config import CrawlerSettings
from service.sources.normalise import (
    normalise_agent_profile,
    normalise_post_detail,
    normalise_posts_list,
    parse_time,
    posts_list_paging,
)
from service.sources.ratelimit import RetryPolicy, TokenBucket, header_delay
from service.stores.checkpoint import CheckpointStore
from streams.events import (
    AgentEvent,
    CommentEvent,
    DeadLetter,
    Event,
    PostEvent,
    SubmoltEvent,
    VoteEvent,
    parse_event,
)

log = logging.getLogger(__name__)

Item = Event | DeadLetter
DAY = 86_400.0
PROBE_HORIZON_S = 7 * DAY
LAG_BUCKETS = (1, 10, 60, 300, 900, 3600, 6 * 3600, DAY, 3 * DAY, 7 * DAY, 30 * DAY)


@dataclass
class _Post:
    """Revisit state of one post (see the module docstring for its bound)."""

    created: float
    next_visit: float
    emitted: bool = False
    gone: bool = False
    votes: tuple[int, int] | None = None
    comments: dict[str, tuple[int, int]] = field(default_factory=dict)
    dead: list[str] = field(default_factory=list)
    author: str | None = None
    count: int = 0  # the platform's comment_count, latest seen
    backfill: list[Any] | None = None  # [sort index, cursor] of a backfill under way
    backfilled: int = -1  # the count at which the last backfill ran out of comments

    @property
    def deficit(self) -> int:
        return 0 if self.gone else max(0, self.count - len(self.comments))

    def to_json(self) -> dict[str, Any]:
        return {"c": self.created, "n": self.next_visit, "e": self.emitted, "g": self.gone,
                "v": self.votes, "cm": self.comments, "d": self.dead, "a": self.author,
                "cc": self.count, "bf": self.backfill, "bd": self.backfilled}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> _Post:
        return cls(created=d["c"], next_visit=d["n"], emitted=d["e"], gone=d["g"],
                   votes=tuple(d["v"]) if d["v"] else None,
                   comments={k: (v[0], v[1]) for k, v in d["cm"].items()}, dead=d["d"],
                   author=d.get("a"), count=d.get("cc", 0), backfill=d.get("bf"),
                   backfilled=d.get("bd", -1))


@dataclass
class _Unit:
    """One unit of work: the items to hand out, then the checkpoint delta to commit."""

    items: list[Item] = field(default_factory=list)
    discovery: bool = False
    put: set[str] = field(default_factory=set)
    drop: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    pending: dict[str, str] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)


@dataclass
class _Answer:
    kind: Literal["ok", "missing", "failed", "bad"]
    url: str
    data: dict[str, Any] | None = None
    text: str = ""
    status: str = ""


class _Stopped(Exception):
    """Raised out of a sleep when the stop event is set."""


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        p = "moltscope_crawler_"
        self.requests = Counter(p + "requests", "HTTP requests by status (code, timeout, error)",
                                ["status"], registry=registry)
        self.rate_limited = Counter(p + "rate_limited", "429 answers", registry=registry)
        self.backoff = Counter(p + "backoff_seconds", "Seconds waited on back-off and 429s",
                               registry=registry)
        self.queue = Gauge(p + "revisit_queue_length", "Posts in the revisit queue",
                           registry=registry)
        self.lag = Histogram(p + "event_lag_seconds", "observed_at - event_time of new posts "
                             "and comments", buckets=LAG_BUCKETS, registry=registry)
        self.discovered = Counter(p + "posts_discovered", "New posts found", registry=registry)
        self.deficit = Gauge(p + "comment_deficit", "Comments the platform counts on queued "
                             "posts (comment_count) that the crawler has not received",
                             registry=registry)
        self.deficit_posts = Gauge(p + "posts_with_deficit", "Queued posts whose comment_count "
                                   "exceeds the comments received", registry=registry)
        self.backfill_pending = Gauge(p + "backfill_pending_posts", "Posts with a deficit the "
                                      "backfill has not yet gone through", registry=registry)
        self.backfill_requests = Counter(p + "backfill_requests", "Comment backfill requests "
                                         "(GET /posts/{id}/comments)", registry=registry)
        self.backfill_comments = Counter(p + "backfill_comments", "New comments the backfill "
                                         "found", registry=registry)
        self.platform = Gauge(p + "platform_count", "The platform's totals (GET /stats)",
                              ["kind"], registry=registry)
        self.capture = Gauge(p + "capture_ratio", "Items created on the platform since the "
                             "first GET /stats answer that the crawler emitted, over the "
                             "platform's growth since then", ["kind"], registry=registry)


def _fingerprint(d: DeadLetter) -> str:
    """Same record, same fingerprint, even when its counts moved between two visits."""
    raw = _json_or_none(d.raw.encode())
    rid = raw.get("id") if isinstance(raw, dict) else None
    key = f"{d.reason}\0{rid}" if isinstance(rid, str) and rid else f"{d.reason}\0{d.raw}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def _timestamp(value: Any) -> float | None:
    try:
        t = parse_time(value)
    except (ValueError, OverflowError, OSError):
        return None
    return t.timestamp() if t else None


class MoltbookCrawler:
    """Crawl the Moltbook API into canonical events (see the module docstring).

    ``events(stop)`` yields ``Event | DeadLetter`` items; ``run(emit, stop)`` hands them to
    ``emit``. Either returns when ``stop`` is set. ``clock`` gives unix seconds; ``sleep``
    defaults to waiting on the stop event (so a stop interrupts any pause).
    """

    def __init__(
        self,
        settings: CrawlerSettings,
        checkpoint: CheckpointStore | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        registry: CollectorRegistry | None = None,
        rng: random.Random | None = None,
        probe_ids: Callable[[], Iterable[str]] | None = None,
        probe_horizon_s: float = PROBE_HORIZON_S,
    ) -> None:
        self.opts = settings
        o = self.opts
        self._store = checkpoint
        self._clock = clock
        self._sleep_fn = sleep
        self._own_client = client is None
        self._client = client or httpx.Client(
            base_url=o.base_url, timeout=o.timeout_s, follow_redirects=True,
            headers={"User-Agent": "moltscope-crawler"})
        key = o.api_key.get_secret_value() if o.api_key else os.environ.get("MOLTBOOK_API_KEY")
        self._auth = {"Authorization": f"Bearer {key}"} if key else {}
        self._bucket = TokenBucket(o.requests_per_minute, burst=o.burst, clock=clock)
        self._retry = RetryPolicy(base_s=o.backoff_base_s, cap_s=o.backoff_cap_s,
                                  ip_block_s=o.ip_block_backoff_s,
                                  ip_block_cap_s=o.ip_block_backoff_cap_s,
                                  rng=rng or random.Random())
        self.metrics = _Metrics(registry if registry is not None else REGISTRY)
        self._stop = threading.Event()
        self._posts: dict[str, _Post] = {}
        self._heap: list[tuple[float, str]] = []
        self._disc: dict[str, Any] = {}
        self._seen: set[str] = set()
        self._pending: dict[str, str] = {}
        self._list_dead: OrderedDict[str, None] = OrderedDict()
        self._turn = 0
        self._probe_ids = probe_ids
        self._probe_horizon_s = max(probe_horizon_s, settings.horizon_s)
        self._probes: set[str] = set()  # probe posts ever queued by this process
        self._deficits: dict[str, int] = {}  # queued post -> comment deficit > 0
        self._backfill_next = 0.0  # no backfill request before (clock time)
        self._next_stats = 0.0
        self._base: tuple[float, dict[str, int]] | None = None  # first /stats: (time, totals)
        self._since = {"posts": 0, "comments": 0}  # emitted, created after the base time
        self._platform: dict[str, int] = {}  # the latest /stats totals
        self._capture: dict[str, float] = {}  # the capture ratio by kind, once known

    # ------------------------------------------------------------------ public

    def run(self, emit: Callable[[Item], None], stop: threading.Event,
            flush: Callable[[], None] | None = None) -> None:
        """Crawl until ``stop`` is set, handing every item to ``emit``.

        ``flush`` (e.g. the Kafka producer's) runs before each checkpoint, so a checkpoint
        never covers items an asynchronous ``emit`` still buffers.
        """
        for item in self.events(stop, before_commit=flush):
            emit(item)

    def events(self, stop: threading.Event | None = None,
               before_commit: Callable[[], None] | None = None) -> Iterator[Item]:
        """Crawl until ``stop`` is set; checkpoint a unit once its items were consumed."""
        self._stop = stop or threading.Event()
        self._restore()
        start = _Unit()
        self._queue_probes(start)
        self._commit(start)
        kinds: tuple[Callable[[], _Unit], ...] = (self._discover, self._revisit, self._profile,
                                                  self._backfill, self._stats)
        ready_checks = (self._discovery_due, self._revisit_due, self._profile_due,
                        self._backfill_due, self._stats_due)
        try:
            while not self._stop.is_set():
                now = self._clock()
                ready = [i for i, due in enumerate(ready_checks) if due(now)]
                if not ready:
                    self._idle(now)
                    continue
                pick = next((i for i in ready if i >= self._turn), ready[0])
                self._turn = (pick + 1) % len(kinds)
                unit = kinds[pick]()
                yield from unit.items
                if unit.items and before_commit is not None:
                    before_commit()
                self._commit(unit)
        except _Stopped:
            return

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    # ------------------------------------------------------------------ state

    def _restore(self) -> None:
        if self._store is None:
            return
        cp = self._store.load()
        self._disc = cp.discovery
        self._posts = {k: _Post.from_json(v) for k, v in cp.posts.items()}
        self._heap = [(p.next_visit, k) for k, p in self._posts.items()]
        heapq.heapify(self._heap)
        self._seen = cp.seen
        self._pending = dict(sorted(cp.pending.items()))
        for pid in self._posts:
            self._account(pid)
        self._gauges()

    def _gauges(self) -> None:
        m = self.metrics
        m.queue.set(len(self._posts))
        m.deficit.set(sum(self._deficits.values()))
        m.deficit_posts.set(len(self._deficits))
        m.backfill_pending.set(sum(self._posts[p].backfilled < self._posts[p].count
                                   for p in self._deficits))

    def progress(self) -> dict[str, Any]:
        """Where the crawl stands, for the API and the live page (JSON-safe)."""
        return {
            "at": self._clock(),
            "posts_tracked": len(self._posts),
            "walk_in_progress": self._disc.get("walk") is not None,
            "comment_deficit": sum(self._deficits.values()),
            "posts_with_deficit": len(self._deficits),
            "backfill_pending_posts": sum(self._posts[p].backfilled < self._posts[p].count
                                          for p in self._deficits),
            "platform": dict(self._platform),
            "capture_ratio": dict(self._capture),
            "requests_per_minute": self.opts.requests_per_minute,
        }

    def _account(self, pid: str) -> None:
        """Keep the post's comment deficit (comment_count over comments received) current."""
        post = self._posts.get(pid)
        deficit = post.deficit if post is not None else 0
        if deficit > 0:
            self._deficits[pid] = deficit
        else:
            self._deficits.pop(pid, None)

    def _commit(self, unit: _Unit) -> None:
        for pid in unit.put | unit.drop:
            self._account(pid)
        self._gauges()
        if self._store is None:
            return
        self._store.commit(
            discovery=self._disc if unit.discovery else None,
            put_posts={k: self._posts[k].to_json() for k in unit.put if k in self._posts},
            drop_posts=unit.drop,
            add_seen=unit.seen,
            add_pending=unit.pending,
            done_pending=unit.done,
            progress=self.progress(),
        )

    def _horizon(self, pid: str) -> float:
        return self._probe_horizon_s if pid in self._probes else self.opts.horizon_s

    def _schedule(self, pid: str, post: _Post, at: float) -> None:
        post.next_visit = min(at, post.created + self._horizon(pid))
        heapq.heappush(self._heap, (post.next_visit, pid))

    def _queue_probes(self, unit: _Unit) -> None:
        """Queue the probe posts not yet queued (see the module docstring)."""
        if self._probe_ids is None:
            return
        try:
            ids = set(self._probe_ids())
        except Exception:  # noqa: BLE001 - an unreadable probe set must not stop the crawl
            log.warning("cannot read the probe post ids", exc_info=True)
            return
        now = self._clock()
        for pid in sorted(ids - self._probes):
            self._probes.add(pid)
            post = self._posts.get(pid)
            if post is None:
                post = self._posts[pid] = _Post(created=now, next_visit=now)
                log.info("probe post %s queued for revisits", pid)
            # a known post is due now, then every revisit_min_s; a deleted one stays as it is
            self._schedule(pid, post, post.next_visit if post.gone else now)
            unit.put.add(pid)

    # ------------------------------------------------------------------ pacing and HTTP

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            if self._sleep_fn is not None:
                self._sleep_fn(seconds)
            else:
                self._stop.wait(seconds)
        if self._stop.is_set():
            raise _Stopped

    def _idle(self, now: float) -> None:
        due = [self._disc.get("next_walk_at", now)]
        if self._heap:
            due.append(self._heap[0][0])
        if self._backfill_due(self._backfill_next):
            due.append(self._backfill_next)
        if self.opts.stats_interval_s > 0:
            due.append(self._next_stats)
        self._sleep(min(max(0.0, min(due) - now), self.opts.discovery_interval_s))

    def _get(self, path: str, params: dict[str, Any] | None = None) -> _Answer:
        """GET with pacing and retries; never raises for HTTP or payload trouble."""
        url = f"{path}?{httpx.QueryParams(params)}" if params else path
        attempt = 0
        while True:
            self._sleep(self._bucket.reserve())
            try:
                resp = self._client.get(path, params=params, headers=self._auth)
                status = str(resp.status_code)
            except httpx.TimeoutException:
                resp, status = None, "timeout"
            except httpx.TransportError:
                resp, status = None, "error"
            self.metrics.requests.labels(status=status).inc()
            if resp is not None and resp.status_code == 429:
                self.metrics.rate_limited.inc()
                wait = self._retry.rate_limited(resp.headers, _json_or_none(resp.content),
                                                self._clock())
                log.warning("429 on %s: waiting %.1f s", url, wait)
                self._back_off(wait)
                continue
            if resp is None or resp.status_code >= 500:
                if attempt >= self.opts.max_retries:
                    log.warning("giving up on %s after %s (%d retries)", url, status, attempt)
                    return _Answer("failed", url, text=resp.text if resp else "", status=status)
                self._back_off(self._retry.server_error(attempt))
                attempt += 1
                continue
            self._retry.success()
            if (told := header_delay(resp.headers, None, self._clock())) is not None:
                self._bucket.block_until(self._clock() + told)  # window used up: pause
            if resp.status_code == 404:
                return _Answer("missing", url, status=status)
            if resp.status_code >= 400:
                log.warning("%s answered %s", url, status)
                return _Answer("failed", url, text=resp.text, status=status)
            data = _json_or_none(resp.content)
            if isinstance(data, dict):
                return _Answer("ok", url, data=data, text=resp.text, status=status)
            if attempt >= self.opts.max_retries:  # truncated or malformed, persistently
                return _Answer("bad", url, text=resp.text, status=status)
            self._back_off(self._retry.server_error(attempt))
            attempt += 1

    def _back_off(self, seconds: float) -> None:
        self.metrics.backoff.inc(seconds)
        self._bucket.block_until(self._clock() + seconds)

    # ------------------------------------------------------------------ emission helpers

    def _observed(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _emit_new(self, unit: _Unit, ev: PostEvent | CommentEvent) -> None:
        unit.items.append(ev)
        self.metrics.lag.observe(max(0.0, (ev.observed_at - ev.event_time).total_seconds()))
        if self._base is not None and ev.event_time.timestamp() >= self._base[0]:
            self._since["posts" if isinstance(ev, PostEvent) else "comments"] += 1

    def _entity(self, unit: _Unit, ev: AgentEvent | SubmoltEvent) -> None:
        """Emit an agent/submolt once; agents wait for their profile when profiles are on."""
        key = ev.id
        if key in self._seen:
            return
        self._seen.add(key)
        unit.seen.add(key)
        if isinstance(ev, AgentEvent) and self.opts.fetch_profiles:
            self._pending[ev.name] = unit.pending[ev.name] = ev.model_dump_json()
        else:
            unit.items.append(ev)

    def _vote(self, unit: _Unit, target: Literal["post", "comment"], target_id: str,
              post_id: str, before: tuple[int, int] | None, ev: PostEvent | CommentEvent,
              ) -> tuple[int, int]:
        now = (ev.upvotes, ev.downvotes)
        if before is not None and before != now:
            unit.items.append(VoteEvent(
                id=f"vote:{target_id}:{now[0]}-{now[1]}", event_time=ev.observed_at,
                observed_at=ev.observed_at, source=ev.source, target=target,
                target_id=target_id, post_id=post_id, upvotes=now[0], downvotes=now[1],
                delta_up=now[0] - before[0], delta_down=now[1] - before[1]))
        return now

    def _list_dead_letter(self, unit: _Unit, d: DeadLetter) -> None:
        fp = _fingerprint(d)
        if fp not in self._list_dead:
            self._list_dead[fp] = None
            if len(self._list_dead) > 10_000:
                self._list_dead.popitem(last=False)
            unit.items.append(d)

    # ------------------------------------------------------------------ discovery

    def _discovery_due(self, now: float) -> bool:
        return self._disc.get("walk") is not None or now >= self._disc.get("next_walk_at", 0.0)

    def _discover(self) -> _Unit:
        o, d = self.opts, self._disc
        unit = _Unit(discovery=True)
        walk = d.get("walk")
        if walk is None:
            self._queue_probes(unit)
            deep = (d.get("watermark") is None
                    or self._clock() - d.get("last_sweep", 0.0) >= o.sweep_interval_s)
            walk = {"offset": 0, "cursor": None, "deep": deep, "newest": None, "covered": 0,
                    "pages": 0}
        params: dict[str, Any] = {"sort": "new", "limit": o.page_limit}
        if walk["cursor"]:
            params["cursor"] = walk["cursor"]
        elif walk["offset"]:
            params["offset"] = walk["offset"]
        ans = self._get("/posts", params)
        now = self._clock()
        paging = posts_list_paging(ans.data) if ans.kind == "ok" and ans.data else None
        if ans.data is None or paging is None:
            if ans.kind in ("ok", "bad"):
                for item in normalise_posts_list(ans.data or ans.text, origin=ans.url,
                                                 observed_at=self._observed()):
                    if isinstance(item, DeadLetter):
                        self._list_dead_letter(unit, item)
            self._end_walk(walk, now, complete=False)
            return unit
        raw_posts = ans.data["posts"]
        new, oldest, beyond = 0, None, False
        obs = self._observed()
        for raw in raw_posts:
            pid = raw.get("id") if isinstance(raw, dict) else None
            created = _timestamp(raw.get("created_at")) if isinstance(raw, dict) else None
            if not isinstance(pid, str) or not pid or created is None:
                for item in normalise_posts_list({"posts": [raw]}, origin=ans.url,
                                                 observed_at=obs):
                    if isinstance(item, DeadLetter):
                        self._list_dead_letter(unit, item)
                continue
            oldest = created if oldest is None else min(oldest, created)
            walk["newest"] = max(walk["newest"] or created, created)
            if now - created >= o.horizon_s:
                beyond = True
                continue
            if pid in self._posts:
                self._list_sighting(unit, pid, raw, obs, ans.url)
                continue
            new += 1
            post = _Post(created=created, next_visit=now)
            for item in normalise_posts_list({"posts": [raw]}, origin=ans.url, observed_at=obs):
                if isinstance(item, PostEvent):
                    self._emit_new(unit, item)
                    post.emitted, post.votes = True, (item.upvotes, item.downvotes)
                    post.author, post.count = item.author, item.comment_count
                elif isinstance(item, AgentEvent | SubmoltEvent):
                    self._entity(unit, item)
                # a dead-lettered list item is retried from its detail answer
            self._posts[pid] = post
            self._schedule(pid, post, now)
            unit.put.add(pid)
            self.metrics.discovered.inc()
        walk["pages"] += 1
        watermark = d.get("watermark")
        if (beyond or not raw_posts or not paging.has_more
                or walk["pages"] >= o.max_walk_pages):
            self._end_walk(walk, now, complete=True)
            return unit
        if (not walk["deep"] and watermark is not None and new == 0
                and oldest is not None and oldest <= watermark):
            walk["covered"] += 1
            if walk["covered"] > o.rewalk_pages:
                self._end_walk(walk, now, complete=True)
                return unit
        if paging.next_cursor:
            if paging.next_cursor == walk["cursor"]:  # a cursor that does not advance
                self._end_walk(walk, now, complete=False)
                return unit
            walk["cursor"] = paging.next_cursor
        else:
            nxt = paging.next_offset
            if nxt is None:
                nxt = walk["offset"] + len(raw_posts)
            walk["offset"] = max(walk["offset"] + 1, nxt - o.offset_overlap)
            walk["cursor"] = None
        d["walk"] = walk
        return unit

    def _end_walk(self, walk: dict[str, Any], now: float, *, complete: bool) -> None:
        d = self._disc
        d["walk"] = None
        d["next_walk_at"] = now + self.opts.discovery_interval_s
        if complete:
            if walk["newest"] is not None:
                d["watermark"] = max(d.get("watermark") or walk["newest"], walk["newest"])
            if walk["deep"]:
                d["last_sweep"] = now

    def _list_sighting(self, unit: _Unit, pid: str, raw: dict[str, Any], obs: datetime,
                       origin: str) -> None:
        """A known post seen again in a list: its counts are free vote observations."""
        post = self._posts[pid]
        if not post.emitted or post.gone:
            return
        for item in normalise_posts_list({"posts": [raw]}, origin=origin, observed_at=obs):
            if not isinstance(item, PostEvent):
                continue
            if (item.upvotes, item.downvotes) != post.votes:
                post.votes = self._vote(unit, "post", pid, pid, post.votes, item)
                unit.put.add(pid)
            if item.comment_count != post.count:
                post.count = item.comment_count
                unit.put.add(pid)

    # ------------------------------------------------------------------ revisits

    def _revisit_due(self, now: float) -> bool:
        while self._heap:
            t, pid = self._heap[0]
            post = self._posts.get(pid)
            if post is not None and post.next_visit == t:
                return t <= now
            heapq.heappop(self._heap)  # stale entry of a rescheduled or dropped post
        return False

    def _revisit(self) -> _Unit:
        o = self.opts
        unit = _Unit()
        _, pid = heapq.heappop(self._heap)
        post = self._posts[pid]
        if post.gone or self._clock() - post.created >= self._horizon(pid):
            del self._posts[pid]
            unit.drop.add(pid)
            return unit
        ans = self._get(f"/posts/{pid}")
        now = self._clock()
        unit.put.add(pid)
        if ans.kind == "missing":  # deleted: keep the id (no re-discovery) until the horizon
            post.gone = True
            self._schedule(pid, post, post.created + self._horizon(pid))
            return unit
        age = max(0.0, now - post.created)
        interval = (o.revisit_min_s if pid in self._probes else
                    min(o.revisit_max_s, max(o.revisit_min_s, age * o.revisit_age_fraction)))
        recent = now - interval  # comments newer than this count as activity
        activity = 0
        if ans.kind == "ok":
            items = normalise_post_detail(ans.data or {}, observed_at=self._observed(),
                                          origin=ans.url)
        elif ans.kind == "bad":
            items = normalise_post_detail(ans.text, observed_at=self._observed(),
                                          origin=ans.url)
        else:
            items = []
        for item in items:
            if isinstance(item, PostEvent):
                post.count = item.comment_count
                post.author = post.author or item.author
                if not post.emitted:
                    self._emit_new(unit, item)
                    post.emitted, post.votes = True, (item.upvotes, item.downvotes)
                    # a probe post queued before any listing showed it: its real creation
                    post.created = min(post.created, item.event_time.timestamp())
                else:
                    before = post.votes
                    post.votes = self._vote(unit, "post", pid, pid, before, item)
                    activity += post.votes != before
            elif isinstance(item, CommentEvent):
                new, changed = self._comment(unit, pid, post, item)
                activity += (new and item.event_time.timestamp() >= recent) + changed
            elif isinstance(item, AgentEvent | SubmoltEvent):
                self._entity(unit, item)
            elif isinstance(item, DeadLetter) and (fp := _fingerprint(item)) not in post.dead:
                post.dead.append(fp)
                unit.items.append(item)
        self._schedule(pid, post, now + max(o.revisit_min_s, interval / (1 + activity)))
        return unit

    def _comment(self, unit: _Unit, pid: str, post: _Post, item: CommentEvent,
                 ) -> tuple[bool, bool]:
        """A comment of a visit or a backfill: emitted if new, a vote event if its counts
        moved; (new, counts changed)."""
        before = post.comments.get(item.comment_id)
        if before is None:
            self._emit_new(unit, item)
        post.comments[item.comment_id] = self._vote(
            unit, "comment", item.comment_id, pid, before, item)
        return before is None, before is not None and post.comments[item.comment_id] != before

    # ------------------------------------------------------------------ comment backfill

    def _backfill_pick(self) -> str | None:
        """The queued post with the largest comment deficit the backfill has not yet gone
        through at its current comment_count."""
        best: tuple[int, str] | None = None
        for pid, deficit in self._deficits.items():
            post = self._posts[pid]
            if post.backfilled < post.count and (best is None or (-deficit, pid) < best):
                best = (-deficit, pid)
        return None if best is None else best[1]

    def _backfill_due(self, now: float) -> bool:
        return (self.opts.backfill_share > 0 and bool(self.opts.backfill_sorts)
                and now >= self._backfill_next and self._backfill_pick() is not None)

    def _backfill(self) -> _Unit:
        """One ``GET /posts/{id}/comments`` for the post with the largest deficit: its pages
        (``next_cursor``) in one sort order, then the next order (each is capped), until the
        deficit is gone, an answer is empty, or the orders run out; then not again until its
        comment_count grows. Paced apart from the rest: at most ``backfill_share`` of the
        request budget, inside it (every request still takes the bucket's token)."""
        o = self.opts
        pid = self._backfill_pick()
        assert pid is not None  # due
        post = self._posts[pid]
        unit = _Unit(put={pid})
        order, cursor = post.backfill or (0, None)
        params: dict[str, Any] = {"sort": o.backfill_sorts[order], "limit": o.comments_limit}
        if cursor:
            params["cursor"] = cursor
        self.metrics.backfill_requests.inc()
        ans = self._get(f"/posts/{pid}/comments", params)
        self._backfill_next = self._clock() + 60.0 / (o.requests_per_minute * o.backfill_share)
        raw = ans.data.get("comments") if ans.kind == "ok" and ans.data else None
        if not isinstance(raw, list) or not raw:  # nothing (more) to be had for this count
            post.backfill, post.backfilled = None, post.count
            return unit
        payload = {"post": {"id": pid, "created_at": datetime.fromtimestamp(
            post.created, UTC).isoformat(), "author": {"name": post.author} if post.author
            else None}, "comments": raw}
        found = 0
        for item in normalise_post_detail(payload, observed_at=self._observed(),
                                          origin=ans.url):
            if isinstance(item, CommentEvent):
                found += self._comment(unit, pid, post, item)[0]
            elif isinstance(item, AgentEvent):
                self._entity(unit, item)
            elif isinstance(item, DeadLetter) and (fp := _fingerprint(item)) not in post.dead:
                post.dead.append(fp)
                unit.items.append(item)
        self.metrics.backfill_comments.inc(found)
        paging = ans.data or {}
        nxt = paging.get("next_cursor") if paging.get("has_more", True) else None
        if post.deficit == 0:
            post.backfill, post.backfilled = None, post.count
        elif isinstance(nxt, str) and nxt and nxt != cursor:
            post.backfill = [order, nxt]
        elif order + 1 < len(o.backfill_sorts):
            post.backfill = [order + 1, None]
        else:
            post.backfill, post.backfilled = None, post.count
        return unit

    # ------------------------------------------------------------------ platform totals

    def _stats_due(self, now: float) -> bool:
        return self.opts.stats_interval_s > 0 and now >= self._next_stats

    def _stats(self) -> _Unit:
        """``GET /stats``: the platform's totals, and the capture ratio since the first
        answer (items created since then that the crawler emitted, over the totals' growth)."""
        ans = self._get("/stats")
        now = self._clock()
        self._next_stats = now + self.opts.stats_interval_s
        data = ans.data if ans.kind == "ok" and ans.data else {}
        totals = data.get("stats") if isinstance(data.get("stats"), dict) else data
        got = {k: v for k in ("agents", "submolts", "posts", "comments")
               if isinstance(v := totals.get(k), int) and not isinstance(v, bool)}
        for kind, value in got.items():
            self.metrics.platform.labels(kind=kind).set(value)
        self._platform.update(got)
        if not {"posts", "comments"} <= got.keys():
            return _Unit()
        if self._base is None:
            self._base = (now, got)
            return _Unit()
        for kind in ("posts", "comments"):
            if (grown := got[kind] - self._base[1][kind]) > 0:
                self._capture[kind] = self._since[kind] / grown
                self.metrics.capture.labels(kind=kind).set(self._capture[kind])
        return _Unit()

    # ------------------------------------------------------------------ profiles

    def _profile_due(self, now: float) -> bool:
        return self.opts.fetch_profiles and bool(self._pending)

    def _profile(self) -> _Unit:
        name, fallback = next(iter(self._pending.items()))
        ans = self._get("/agents/profile", {"name": name})
        unit = _Unit(done={name})
        del self._pending[name]
        agent: Item | None = None
        if ans.kind == "ok":
            agent = next((i for i in normalise_agent_profile(
                ans.data or {}, observed_at=self._observed(), origin=ans.url)
                if isinstance(i, AgentEvent) and i.name == name), None)
        if agent is None and fallback:  # unknown name, or the profile would not come
            agent = parse_event(fallback)
        if agent is not None:
            unit.items.append(agent)
        return unit


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None
