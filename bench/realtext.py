"""A real-text Moltbook stream of any length: real texts, resampled shapes, new ids and times.

Everything the stream says comes from the real data of ``../shared/data/moltbook`` read through
:func:`service.sources.archive.open_archive` (:func:`load_corpus`):

* texts: every real post (title, body, submolt; verbatim repeats kept, so the verbatim filter
  meets the real duplication) and every real comment text (the comment trees of the post answers
  plus the agents' archived recent comments), resampled whole, never edited (``unique_texts``:
  a word of its own put first in each, the bound for a live stream, which repeats far less
  than this resampling: every text then brings new tokens and n-grams);
* authors: a population of ``active_agents * scale`` agents whose activity weights follow a
  Pareto law with the exponent fitted (discrete power-law maximum likelihood, xmin = 1) to the
  real per-author counts of posts and comments; the real share of null-author posts
  stays null (``author=None``); each agent's first appearance brings its AgentEvent, created a
  resampled real account age earlier (age at a post = post time - author's ``created_at``);
* threads: a post gets a real comment tree (the parent structure of a real post answer's
  comments, in time order) with probability ``comments_per_post / mean tree size``, else none;
  the comments' delays are resampled from the real comment delays up to ``max_delay_s``;
  ``reply_to`` is the parent comment's author, else the post's;
* pace: day 0 a normal day (``normal_share`` of the peak), day 1 the peak day (200k posts and
  500k comments a day at ``scale=1``), then normal days; a diurnal wave; vote changes
  (:class:`~streams.events.VoteEvent`) make ``vote_share`` of the posts, comments and votes,
  preferentially on already-voted items (heavy-tailed popularity), on the recent items;
* a planted mint flood on the peak day: ``flood_accounts * scale`` accounts registered minutes
  before post near-identical ``mint $CLAW`` texts resampled from the real CLAW flood posts of the
  data (which the background never uses); :attr:`RealTextStream.flood` is its ground truth.

Deterministic by seed (Python's ``random``, no hash-randomised state), event-time ordered (equal
times keep causal order), and a generator in constant memory: the population (``active_agents *
scale`` weights and a seen flag), the pending comments of the last ``max_delay_s``, and a ring
of ``recent_targets`` vote targets; nothing grows with the length of the stream.

:func:`simulator_corpus` swaps the texts for the synthetic society's (``service.sources.simulate``)
while keeping every shape, for the side-by-side figure of ``bench/bench_realtext.py``.

>>> events = list(stream(2000, seed=1, scale=0.05))
>>> len(events), all(a.event_time <= b.event_time for a, b in zip(events, events[1:]))
(2000, True)
>>> texts = load_corpus().text_set()
>>> all(e.text in texts for e in events if e.kind in ("post", "comment"))
True
"""

from __future__ import annotations

import heapq
import math
import random
import re
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache, cached_property
from itertools import accumulate
from pathlib import Path

from streams.events import AgentEvent, CommentEvent, Event, PostEvent, VoteEvent

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "moltbook"
SOURCE = "realtext"
DEFAULT_START = datetime(2026, 2, 2, tzinfo=UTC)
DAY = 86400.0
# The real CLAW flood: mbc-20 inscriptions posted as texts ('{"p":"mbc-20","op":"mint",...}').
MINT = re.compile(r'"op"\s*:\s*"mint"')


@dataclass(frozen=True)
class Corpus:
    """What the stream resamples. ``posts``: (title, content, submolt); ``trees``: per real post
    answer with comments, the parent position of each comment (-1 = on the post) in time order;
    ``delays``: seconds from a post to each of its comments; ``ages``: seconds from an author's
    account creation to its post; ``mint``: the real flood posts and ``mint_names`` their
    authors."""

    posts: tuple[tuple[str, str, str | None], ...]
    comments: tuple[str, ...]
    mint: tuple[tuple[str, str, str | None], ...]
    mint_names: tuple[str, ...]
    names: tuple[str, ...]
    activity: tuple[int, ...]
    trees: tuple[tuple[int, ...], ...]
    delays: tuple[float, ...]
    ages: tuple[float, ...]
    null_author_share: float

    @cached_property
    def activity_alpha(self) -> float:
        """Discrete power-law exponent of the per-author counts: the maximum-likelihood fit with
        xmin = 1 (Clauset et al. 2009 eq. 3.5, what ``powerlaw.Fit(discrete=True)`` does)."""
        from scipy.optimize import minimize_scalar
        from scipy.special import zeta

        n, logs = len(self.activity), sum(math.log(x) for x in self.activity)
        fit = minimize_scalar(lambda a: a * logs + n * math.log(zeta(a, 1.0)),
                              bounds=(1.01, 6.0), method="bounded", options={"xatol": 1e-6})
        return float(fit.x)

    @property
    def mean_tree(self) -> float:
        return sum(map(len, self.trees)) / len(self.trees)

    def text_set(self) -> set[str]:
        """Every text the stream may carry (as ``event.text``): for tests."""
        return ({_post_text(t, c) for t, c, _ in self.posts + self.mint} | set(self.comments))


def _post_text(title: str, content: str) -> str:
    return f"{title}\n{content}".strip()  # PostEvent.text


@cache
def load_corpus(path: Path = DATA) -> Corpus:
    """Read the real data once (about 1 s for the shared sample) and keep what the stream needs."""
    import json

    from service.sources.archive import open_archive

    posts: dict[str, PostEvent] = {}
    comments: list[CommentEvent] = []
    created: dict[str, datetime] = {}
    for item in open_archive([path]):
        if isinstance(item, PostEvent):
            posts.setdefault(item.post_id, item)
        elif isinstance(item, CommentEvent):
            comments.append(item)
        elif isinstance(item, AgentEvent) and item.created_at is not None:
            created.setdefault(item.name, item.created_at)
    texts, mint, mint_names = [], [], []
    for p in posts.values():
        if MINT.search(p.text):
            mint.append((p.title, p.content, p.submolt))
            mint_names.append(p.author or "minter")
        else:
            texts.append((p.title, p.content, p.submolt))
    comment_texts = [c.content for c in comments]
    profiles = path / "api" / "agent-profiles.jsonl"
    if profiles.exists():  # the agents' archived recent comments: real comment texts too
        for line in profiles.open():
            for c in json.loads(line).get("_recent_comments") or []:
                if isinstance(c.get("content"), str) and c["content"]:
                    comment_texts.append(c["content"])
    counts: dict[str, int] = {}
    for e in (*posts.values(), *comments):
        if e.author is not None:
            counts[e.author] = counts.get(e.author, 0) + 1
    by_post: dict[str, list[CommentEvent]] = {}
    for c in comments:
        by_post.setdefault(c.post_id, []).append(c)
    trees, delays = [], []
    for pid, cs in by_post.items():
        cs.sort(key=lambda c: (c.event_time, c.depth))
        pos = {c.comment_id: i for i, c in enumerate(cs)}
        trees.append(tuple(pos.get(c.parent_id, -1) if c.parent_id else -1 for c in cs))
        if pid in posts:
            t0 = posts[pid].event_time
            delays.extend(max(0.0, (c.event_time - t0).total_seconds()) for c in cs)
    ages = [(p.event_time - created[p.author]).total_seconds() for p in posts.values()
            if p.author in created and p.event_time >= created[p.author]]
    nulls = sum(p.author is None for p in posts.values())
    return Corpus(
        posts=tuple(texts), comments=tuple(comment_texts), mint=tuple(mint),
        mint_names=tuple(mint_names), names=tuple(sorted(counts)),
        activity=tuple(sorted(counts.values())), trees=tuple(trees), delays=tuple(sorted(delays)),
        ages=tuple(sorted(ages)), null_author_share=nulls / len(posts),
    )


@cache
def simulator_corpus(seed: int = 0, events: int = 30_000) -> Corpus:
    """The real corpus's shapes with the synthetic society's texts (posts, comments and the
    texts of its planted surge, a memecoin mint by new accounts)."""
    from service.sources.simulate import ScenarioSpec, SimulationConfig, Simulator

    sim = Simulator(SimulationConfig(seed=seed, duration=None, max_events=events, scenarios=(
        ScenarioSpec(name="surge", start=timedelta(hours=2)),)))
    posts, comments, mint = [], [], []
    evs = list(sim)
    surge = {p for lab in sim.labels if lab.scenario == "surge" for p in lab.posts}
    for e in evs:
        if isinstance(e, PostEvent):
            (mint if e.post_id in surge else posts).append((e.title, e.content, e.submolt))
        elif isinstance(e, CommentEvent) and e.content:
            comments.append(e.content)
    real = load_corpus()
    return replace(real, posts=tuple(posts), comments=tuple(comments),
                   mint=tuple(mint) or real.mint)


@dataclass(frozen=True)
class RealTextConfig:
    """Pace and shape of the stream; ``scale`` multiplies the rates, the population and the
    flood (a peak day at ``scale=1``: 200k posts, 500k comments, ~300k vote changes, 100k
    agents: 1 M events)."""

    seed: int = 0
    scale: float = 1.0
    peak_posts: float = 200_000
    peak_comments: float = 500_000
    normal_share: float = 0.25
    active_agents: int = 100_000
    vote_share: float = 0.3
    diurnal: float = 0.3
    max_delay_s: float = 6 * 3600.0
    recent_targets: int = 50_000
    revote_share: float = 0.5
    downvote_share: float = 0.15
    agent_events: bool = True
    flood_accounts: int = 200
    flood_posts_per_account: float = 3.0
    flood_start_s: float = DAY + 14 * 3600.0
    flood_duration_s: float = 1800.0
    start: datetime = DEFAULT_START
    unique_texts: bool = False  # a word of its own first in every background text (unique)

    def posts_per_day(self, day: int) -> float:
        return self.peak_posts * self.scale * (1.0 if day == 1 else self.normal_share)

    def events_per_day(self, day: int) -> float:
        """Expected posts, comments and votes of ``day`` (AgentEvents come on top: one an
        agent's first appearance)."""
        per_post = 1.0 + self.peak_comments / self.peak_posts
        return self.posts_per_day(day) * per_post / (1.0 - self.vote_share)


def scale_for(n_events: int, days: int = 2, **config: object) -> float:
    """The scale at which ``n_events`` cover the first ``days`` (the normal day and the peak day
    with its flood at ``days=2``), AgentEvents included at about their real share.

    >>> round(scale_for(1_250_000), 2)
    0.93
    """
    cfg = RealTextConfig(**config)  # type: ignore[arg-type]
    per_scale = sum(cfg.events_per_day(d) for d in range(days)) / cfg.scale
    return n_events / (per_scale * 1.08)  # ~8 % AgentEvents: the agents seen in two days


@dataclass
class Flood:
    """Ground truth of the planted mint flood (filled as the stream reaches it)."""

    start: datetime
    end: datetime
    agents: list[str] = field(default_factory=list)
    posts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Thread:
    post_id: str
    author: str | None
    shape: tuple[int, ...]
    emitted: list[tuple[str, str | None, int]]  # per comment: (id, author, depth)


_POST, _COMMENT, _VOTE, _FLOOD = 0, 1, 2, 3


class RealTextStream:
    """Iterate for the events (each iteration replays the same stream from the seed);
    :attr:`flood` is the ground truth of the planted flood."""

    def __init__(self, config: RealTextConfig | None = None, corpus: Corpus | None = None,
                 max_events: int | None = None) -> None:
        self.config = config or RealTextConfig()
        self.corpus = corpus or load_corpus()
        self.max_events = max_events
        c = self.config
        self.flood = Flood(c.start + timedelta(seconds=c.flood_start_s),
                           c.start + timedelta(seconds=c.flood_start_s + c.flood_duration_s))

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    # ------------------------------------------------------------------ the pieces

    def _id(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _at(self, t: float) -> datetime:
        return self._t0 + timedelta(seconds=t)

    def _rate(self, t: float) -> float:
        """Posts a second at ``t`` (seconds from the start)."""
        c = self.config
        wave = 1.0 + c.diurnal * math.sin(2 * math.pi * (t / DAY - 0.375))  # peak ~ 15:00 UTC
        return c.posts_per_day(int(t // DAY)) / DAY * wave

    def _author(self) -> int:
        return bisect_right(self._cum, self._rng.random() * self._total)

    def _name(self, i: int) -> str:
        names = self.corpus.names
        base = names[i % len(names)]
        return base if i < len(names) else f"{base}_{i // len(names)}"

    def _appear(self, i: int, t: float) -> Iterator[Event]:
        """An agent's AgentEvent at its first appearance, created a real account age before."""
        if not self.config.agent_events or self._seen[i]:
            return
        self._seen[i] = 1
        ages = self.corpus.ages
        age = ages[self._rng.randrange(len(ages))] if ages else 0.0
        when = self._at(t)
        created = when - timedelta(seconds=age)
        name = self._name(i)
        yield AgentEvent.model_construct(id=f"agent:{name}", event_time=when, observed_at=when,
                                         source=SOURCE, name=name, created_at=created)

    def _push(self, t: float, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, payload))

    def _post(self, t: float) -> Iterator[Event]:
        rng, corpus = self._rng, self.corpus
        title, content, submolt = corpus.posts[rng.randrange(len(corpus.posts))]
        pid = self._id()
        author: str | None = None
        if rng.random() >= corpus.null_author_share:
            i = self._author()
            yield from self._appear(i, t)
            author = self._name(i)
        when = self._at(t)
        yield PostEvent.model_construct(
            id=f"post:{pid}", event_time=when, observed_at=when, source=SOURCE, post_id=pid,
            author=author, submolt=submolt, title=self._unique(title), content=content)
        self._target("post", pid, pid)
        if rng.random() < self._p_tree:
            shape = corpus.trees[rng.randrange(len(corpus.trees))]
            delays = sorted(self._delay() for _ in shape)
            thread = _Thread(pid, author, shape, [])
            for d in delays:
                self._push(t + d, _COMMENT, thread)
        self._push(t + rng.expovariate(self._rate(t)), _POST, None)

    def _delay(self) -> float:
        d = self.corpus.delays
        return d[self._rng.randrange(self._n_delays)] if self._n_delays else 60.0

    def _comment(self, t: float, th: _Thread) -> Iterator[Event]:
        rng = self._rng
        k = len(th.emitted)
        parent = th.shape[k] if k < len(th.shape) else -1
        i = self._author()
        yield from self._appear(i, t)
        name = self._name(i)
        cid = self._id()
        if 0 <= parent < k:
            parent_id, reply_to, pdepth = th.emitted[parent]
            depth = pdepth + 1
        else:
            parent_id, reply_to, depth = None, th.author, 1
        th.emitted.append((cid, name, depth))
        when = self._at(t)
        content = self.corpus.comments[rng.randrange(len(self.corpus.comments))]
        yield CommentEvent.model_construct(
            id=f"comment:{cid}", event_time=when, observed_at=when, source=SOURCE,
            comment_id=cid, post_id=th.post_id, parent_id=parent_id, author=name,
            reply_to=reply_to, post_author=th.author, content=self._unique(content),
            depth=depth)
        self._target("comment", cid, th.post_id)

    def _unique(self, text: str) -> str:
        """``text``, or with ``unique_texts`` a word of its own first (``q<hex>z``: the
        background texts' count, so no random draw moves and the stream is otherwise the
        same): no verbatim repeat, new tokens and new n-grams in every text."""
        if not self.config.unique_texts:
            return text
        self._texts += 1
        return f"q{self._texts:x}z {text}"

    def _target(self, kind: str, target_id: str, post_id: str) -> None:
        self._targets.append([kind, target_id, post_id, 0, 0])

    def _vote(self, t: float) -> Iterator[Event]:
        rng, cfg = self._rng, self.config
        if self._voted and rng.random() < cfg.revote_share:
            target = self._voted[rng.randrange(len(self._voted))]  # the rich get richer
        elif self._targets:
            back = min(len(self._targets) - 1, int(rng.expovariate(1.0 / self._recency)))
            target = self._targets[-1 - back]
        else:
            target = None
        if target is not None:
            down = rng.random() < cfg.downvote_share
            target[4 if down else 3] += 1
            self._voted.append(target)
            kind, tid, pid, up, dn = target
            when = self._at(t)
            yield VoteEvent.model_construct(
                id=f"vote:{tid}:{up}-{dn}", event_time=when, observed_at=when, source=SOURCE,
                target=kind, target_id=tid, post_id=pid, upvotes=up, downvotes=dn,
                delta_up=0 if down else 1, delta_down=1 if down else 0)
        per_post = 1.0 + self._comments_per_post
        rate = self._rate(t) * per_post * cfg.vote_share / (1.0 - cfg.vote_share)
        self._push(t + rng.expovariate(rate), _VOTE, None)

    def _plan_flood(self) -> None:
        cfg, rng, corpus = self.config, self._rng, self.corpus
        accounts = max(5, round(cfg.flood_accounts * cfg.scale))
        bases = corpus.mint_names or ("minter",)
        for a in range(accounts):
            name = f"{bases[a % len(bases)]}{rng.randrange(10, 10_000)}x{a}"
            first = cfg.flood_start_s + rng.random() * cfg.flood_duration_s * 0.5
            n = 1 + int(rng.expovariate(1.0 / max(cfg.flood_posts_per_account - 1, 1e-9)))
            times = sorted(first + rng.random() * (cfg.flood_start_s + cfg.flood_duration_s
                                                   - first) for _ in range(n - 1))
            self._push(first - rng.uniform(60, 600), _FLOOD, (name, None))  # registers
            for when in (first, *times):
                self._push(when, _FLOOD, (name, corpus.mint[rng.randrange(len(corpus.mint))]))

    def _flood(self, t: float, payload: tuple[str, tuple[str, str, str | None] | None],
               ) -> Iterator[Event]:
        name, text = payload
        when = self._at(t)
        if text is None:
            self.flood.agents.append(name)
            yield AgentEvent.model_construct(id=f"agent:{name}", event_time=when,
                                             observed_at=when, source=SOURCE, name=name,
                                             created_at=when)
            return
        pid = self._id()
        title, content, submolt = text
        self.flood.posts.append(pid)
        yield PostEvent.model_construct(
            id=f"post:{pid}", event_time=when, observed_at=when, source=SOURCE, post_id=pid,
            author=name, submolt=submolt, title=title, content=content)
        self._target("post", pid, pid)

    # ------------------------------------------------------------------ the stream

    def events(self) -> Iterator[Event]:
        cfg, corpus = self.config, self.corpus
        self._rng = random.Random(cfg.seed)
        self._t0 = cfg.start
        self._seq = self._texts = 0
        self._heap: list[tuple[float, int, int, object]] = []
        n_agents = max(100, round(cfg.active_agents * cfg.scale))
        alpha = corpus.activity_alpha
        weights = ((1.0 - self._rng.random()) ** (-1.0 / (alpha - 1.0)) for _ in range(n_agents))
        self._cum = list(accumulate(weights))
        self._total = self._cum[-1]
        self._seen = bytearray(n_agents)
        self._comments_per_post = cfg.peak_comments / cfg.peak_posts
        self._p_tree = min(1.0, self._comments_per_post / corpus.mean_tree)
        self._n_delays = bisect_right(corpus.delays, cfg.max_delay_s)
        self._targets: deque[list] = deque(maxlen=cfg.recent_targets)
        self._voted: deque[list] = deque(maxlen=cfg.recent_targets)
        # recency of a fresh vote's target: about the items of the last hour
        self._recency = max(1.0, cfg.peak_posts * cfg.scale * (1 + self._comments_per_post) / 24)
        self.flood.agents.clear()
        self.flood.posts.clear()
        self._push(0.0, _POST, None)
        self._push(0.0, _VOTE, None)
        if corpus.mint and cfg.flood_accounts > 0:
            self._plan_flood()
        limit = self.max_events if self.max_events is not None else math.inf
        emitted = 0
        handlers = (lambda t, _: self._post(t), self._comment, lambda t, _: self._vote(t),
                    self._flood)
        while emitted < limit:
            t, _, kind, payload = heapq.heappop(self._heap)
            for event in handlers[kind](t, payload):
                yield event
                emitted += 1
                if emitted >= limit:
                    return


def stream(n_events: int, seed: int = 0, scale: float = 1.0, *, corpus: Corpus | None = None,
           **config: object) -> Iterator[Event]:
    """``n_events`` canonical events of the real-text stream (see the module docstring);
    ``config`` overrides :class:`RealTextConfig` fields."""
    cfg = RealTextConfig(seed=seed, scale=scale, **config)  # type: ignore[arg-type]
    return iter(RealTextStream(cfg, corpus, max_events=n_events))
