"""Coordinated surge detector: the memecoin-mint pattern.

Entities are read from the tokens of each post's and comment's text (``item.text``: the one
tokeniser, lower case, URLs removed): token tickers (``$CLAW``, and the ``"tick":"CLAW"`` of
mbc-20 / agt-20 JSON inscriptions, compact or spaced; reported upper-cased), the mint operation
of a ticker (``mint:CLAW``, from an inscription whose ``"op"`` is ``"mint"``: a flood of mints is
novel even where the ticker itself is talked about all day), contract addresses (EVM ``0x...`` and
base58 Solana-style strings, lower-cased), bare domains (``mbc20.xyz``: full URLs are removed
by the tokeniser), hashtags, and a text template (the first 40 all-letter words of the text,
so ``Mint CLAW [4CACeeJC]`` and ``Mint CLAW [62qoqi]`` share one). Each entity keeps its own
per-bucket volume. Cost per text: substring tests on the raw text decide which token scans
are needed (a dollar sign, a hash sign, ``tick``, a known top-level domain, a 32-character
word), and those scans read the tokens around a mark or a dot one at a time, not the
text's whole token list; the template reads at most 64 words, and a template met before (a
verbatim repeat) is named by its key (a hash of its word ids) from a process cache of 32,768
names (~4.4 MB when full; then cleared), its words neither gathered nor joined and hashed
again. A judgement reads the ends of an entity's buckets and accounts (kept in time order;
whole, once a post came late), not all of them.

An entity surges when, in the current ``window_s``:

- it has at least ``min_posts`` posts from at least ``min_accounts`` distinct agents in at
  least ``min_threads`` threads (a stock reply piling up under one viral post is not a campaign);
- at least ``min_coordination_share`` of those posts have a near-identical twin (word-set
  Jaccard >= ``near_dup_jaccard``, or the same inscription ``p:op:tick:amt``: real minters
  wrap one inscription in varied prose and random salts) from a *different* agent within
  ``copost_s`` (60 s):
  the coordination evidence that separates a campaign from an organic trend;
- it is *novel* (first seen after the ``warmup_s`` and at most ``novel_s`` ago, within the
  memory horizon), or else *established* and then its volume is at least ``trend_ratio`` x
  (its own baseline expectation + 1), the baseline being its rate over up to ``baseline_s``
  before the window, and the three bars above are raised by ``established_factor``
  (coordination capped at 0.9) unless the entity is *rare* (its baseline expects fewer than
  ``rare_expected`` posts a window: a ticker minted now and then in the background, whose flood
  is as new as a novel one's). Text templates must be novel: a stock phrase that recurs all
  day ("Great post!") clumps by chance and is background, not a campaign.

The features that worked for coordinated campaigns on Twitter are reported as evidence:
trendiness (this window over the previous one), volume, share of new accounts (known creation
time within ``new_account_age_s``), distinct accounts per post, and the co-posting gaps (pairs
under ``automation_s`` = 5 s suggest automation, which raises the severity to critical).
Entities that share most of their posts (the token, its URL and its template) are reported as
one incident under the highest-priority entity, the others listed as ``related_entities``.

The evidence (:mod:`detectors.evidence`) is built from the entity's kept posts (exemplars,
near-duplicate clusters on their first 400 word ids, the surge's own near-duplicate measure)
and the incident's agents (the timeline: every agent's first post since the incident opened,
or since the oldest kept post), rebuilt at most once a minute of event time.

Memory: at most ``max_entities`` entities (least recently seen evicted, and any unseen for
``window_s + baseline_s``), each with ``(window_s + baseline_s) / bucket_s`` counters, at most
``max_posts_per_entity`` recent posts (each with its first 400 word ids and 400 characters)
and ``max_accounts_per_entity`` accounts; per open incident, at most 1000 agents' post counts
and first post times; plus the creation time of at most ``max_agents`` agents. An entity seen
once (most text templates) is held as its post alone, shared with the text's other entities
(its bucket, account and times are the post's), and built in full at its second post or when
a judgement or an expiry needs it. Posts are held only while a judgement can read them: once
``window_s + copost_s`` old, those of the entities not seen since are dropped (an entity seen
once keeps a copy of its post without its word ids and text), so the posts held are mostly
those of the last ``window_s + copost_s`` (live state after 100k real-text events 21 -> 12 MB).
A text template first seen more than ``novel_s`` before the latest judgement (and not reported)
can never be novel again, so no judgement reads its buckets, posts or accounts: on its next
sighting it is reduced to the time it was last seen (it stays an entity, in its place in the
least-recently-seen order, until it expires or is evicted: a template seen again after that is
new), and a text whose entities are all such templates builds no post at all (most real texts:
stock replies and verbatim repeats).

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import PostEvent
>>> t0 = datetime(2026, 2, 8, 7, 0, tzinfo=timezone.utc)
>>> d = SurgeDetector(SurgeConfig(warmup_s=0))
>>> for i in range(10):
...     t = t0 + timedelta(seconds=3 * i)
...     d.update(Item.of(PostEvent(id=f"post:{i}", event_time=t, observed_at=t, post_id=str(i),
...         author=f"BurnMolt{i}", title="Mint", content='{"p":"mbc-20","op":"mint",'
...         f'"tick":"CLAW","amt":"100"}} mbc20.xyz [{i:04x}]')))
>>> [(f.key, f.severity, f.evidence["distinct_accounts"]) for f in d.findings(t.timestamp())]
[('mint:CLAW', 'critical', 10)]
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from hashlib import blake2b as _blake2b
from operator import itemgetter
from typing import ClassVar

import numpy as np

from detectors.alert import Finding, Severity
from detectors.evidence import (
    DEFAULT,
    EvidenceCache,
    EvidenceConfig,
    Sighting,
    build_evidence,
)
from detectors.surge_kernels import TLDS, candidates, marks
from streams.events import AgentEvent, CommentEvent, PostEvent
from streams.state.base import Item, Sample, Snapshot
from streams.text import Text, is_word

ENTITY_PRIORITY = {"mint": 0, "token": 1, "contract": 2, "url": 3, "hashtag": 4, "text": 5}
_INSCRIPTION_KEYS = frozenset(("p", "op", "tick", "amt"))
_TLD_RE = re.compile(r"\.(?:" + "|".join(TLDS) + r")\b", re.IGNORECASE)
_TLD_SET = frozenset(TLDS)
_OWN_HOSTS = ("moltbook.com", "www.moltbook.com")
_HEX = frozenset("0123456789abcdef")
_ALNUM_ASCII = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_MARKED = re.compile(r"([$#]) (\w+)")  # over tokens joined by spaces
_NO_IDS = np.zeros(0, np.uint64)  # the word ids of a post past every judgement
# the names of the templates met, by key (surge_kernels.candidates): a template met again (a
# verbatim repeat) is named without gathering its words, joining and hashing them; one process
# cache, not state (a pure function of the key), cleared when full (~135 bytes an entry)
_TEMPLATES: dict[int, str] = {}
_TEMPLATES_MAX = 1 << 15
# the positions the kernels find, written into one array read at once (a kernel returning an
# array of its own costs more than its scan of a text): grown when a text needs more
_OUT = [np.empty(4096, np.int64)]


def _ticker(word: str, max_len: int) -> bool:
    return 2 <= len(word) <= max_len and word[0].isascii() and word[0].isalpha() \
        and set(word) <= _ALNUM_ASCII


def _contract(w: str) -> bool:
    """An EVM address (0x + 40 hex digits) or a base58-like string of 32-44 with a digit."""
    if w.startswith("0x"):
        return len(w) == 42 and set(w[2:]) <= _HEX
    return len(w) <= 44 and any(c.isdigit() for c in w) and set(w) <= _ALNUM_ASCII


def inscription(tokens: list[str]) -> dict[str, str]:
    """The ``p`` / ``op`` / ``tick`` / ``amt`` fields of a JSON inscription (mbc-20, agt-20,
    brc-20 style) read from the one tokeniser's tokens: ``"tick":"CLAW"`` is the tokens
    ``tick`` ``":"`` ``claw`` (or ``tick`` ``":`` ``"`` ``claw`` when the JSON is spaced): a key
    between quote tokens, then the value's tokens up to the next token opening with a quote.
    Values are lower case (the tokeniser's); the first occurrence of each key wins.

    >>> from streams.text import tokenize
    >>> inscription(tokenize('hi {"p": "mbc-20", "op": "mint", "tick": "CLAW", "amt": "100"}'))
    {'p': 'mbc-20', 'op': 'mint', 'tick': 'claw', 'amt': '100'}
    """
    out: dict[str, str] = {}
    n = len(tokens)
    for i in range(1, n - 2):
        key = tokens[i]
        if key not in _INSCRIPTION_KEYS or key in out or not tokens[i - 1].endswith('"'):
            continue
        sep = tokens[i + 1]
        if not (sep[0] == '"' and ":" in sep):
            continue
        j = i + 2
        if not sep.endswith('"'):  # '":' then '"' (spaced JSON)
            if tokens[j] != '"':
                continue
            j += 1
        k = j
        while k < n and k - j < 8 and tokens[k][0] != '"':
            k += 1
        if k > j and k < n:
            out[key] = "".join(tokens[j:k])
    return out


def _scratch(n: int) -> np.ndarray:
    """The kernels' output array, grown to hold ``n`` positions."""
    _OUT[0] = np.empty(max(n, 2 * len(_OUT[0])), np.int64)
    return _OUT[0]


def _entities(text: Text, raw: str, min_template_words: int
              ) -> tuple[set[str], str | None, str | None]:
    """The entities of one text, its inscription signature (``p:op:tick:amt`` of a JSON
    inscription, None without one) and its template's name (the very string in the set; None
    without one)."""
    out: set[str] = set()
    sig = name = None
    if "$" in raw or "#" in raw:
        # a token ending in "$" or "#" then a word token: where every mark of the text is in a
        # token of marks alone (compiled: by id), those; else the tokens joined by spaces,
        # whose "$ " and "# " are exactly those ends (tokens never hold a space), in one
        # C-level scan
        ids = text.ids
        found, held = marks(ids, _OUT[0])
        if found < 0:
            found, held = marks(ids, _scratch(len(ids)))
        if held == raw.count("$") + raw.count("#"):
            token, last = text.token, len(ids) - 1
            pairs = [(token(i)[-1], nxt) for i in _OUT[0][:found].tolist()
                     if i < last and is_word(nxt := token(i + 1))]
        else:
            pairs = _MARKED.findall(" ".join(text.tokens))
        for mark, nxt in pairs:
            if mark == "$":
                if _ticker(nxt, 12):
                    out.add(f"token:{nxt.upper()}")
            elif _ticker(nxt, 40) and len(nxt) >= 3:
                out.add(f"hashtag:{nxt}")
    # where the other scans can find something: one compiled pass over the ids and word views
    found, n_template, spread, n_long, n_dots, tick, key = candidates(
        text.ids, text.word_ids, text.word_lengths, text.word_alpha, _OUT[0])
    if found < 0:  # (words are tokens: three times the tokens is room)
        found, n_template, spread, n_long, n_dots, tick, key = candidates(
            text.ids, text.word_ids, text.word_lengths, text.word_alpha,
            _scratch(3 * len(text.ids)))
    if tick and ("tick" in raw or "TICK" in raw):
        fields = inscription(text.tokens)
        tick_value = fields.get("tick", "")
        if 0 < len(tick_value) <= 16 and tick_value[0].isalnum():
            out.add(f"token:{tick_value.upper()}")
            op = fields.get("op")
            if op == "mint":
                out.add(f"mint:{tick_value.upper()}")
            sig = ":".join(fields.get(k, "") for k in ("p", "op", "tick", "amt"))
    if n_long or n_dots:
        at = _OUT[0][:found].tolist()  # the long words, the dots (the template's if spread)
        if n_dots:
            token = text.token
            dots = [i for i in at[n_long:n_long + n_dots] if token(i) == "."
                    and token(i + 1) in _TLD_SET and token(i - 1)[0].isalnum()]
            if dots and _TLD_RE.search(raw):
                for i in dots:
                    j = i - 1  # the host: word (. word)* before the top-level domain
                    while j >= 2 and token(j - 1) in (".", "-") \
                            and token(j - 2)[0].isalnum():
                        j -= 2
                    host = "".join(map(token, range(j, i + 2)))
                    if host not in _OWN_HOSTS:
                        out.add(f"url:{host}")
        if n_long and len(raw) >= 32:  # a contract is a word token (ASCII letters, digits)
            out.update(f"contract:{w}" for w in map(text.words.__getitem__, at[:n_long])
                       if _contract(w))
    if n_template >= min_template_words:
        name = _TEMPLATES.get(key)
        if name is None:
            name = _template(text.words, _OUT[0][n_long + n_dots:found].tolist() if spread
                             else None, n_template)
            if len(_TEMPLATES) >= _TEMPLATES_MAX:
                _TEMPLATES.clear()
            _TEMPLATES[key] = name
        out.add(name)
    return out, sig, name


def _template(words: list[str], at: list[int] | None, n: int) -> str:
    """The name of the template of ``n`` words at ``at`` (None: the first ``n`` words)."""
    template = " ".join(words[:n] if at is None else itemgetter(*at)(words) if n > 1
                        else [words[at[0]]])
    return f"text:{_blake2b(template.encode(), digest_size=6).hexdigest()}"


def extract_entities(text: Text, raw: str = "", min_template_words: int = 8) -> set[str]:
    """Entity names (``kind:value``) in one tokenised text; ``raw`` (the text before
    tokenisation) only tells which token scans can find something.

    >>> raw = 'Minting $claw {"p":"mbc-20","op":"mint","tick":"CLAW"} on mbc20.xyz #Moon'
    >>> sorted(extract_entities(Text.of(raw), raw, min_template_words=20))
    ['hashtag:moon', 'mint:CLAW', 'token:CLAW', 'url:mbc20.xyz']
    """
    return _entities(text, raw, min_template_words)[0]


@dataclass(frozen=True, slots=True)
class SurgeConfig:
    window_s: float = 900.0
    bucket_s: float = 60.0
    baseline_s: float = 6 * 3600.0
    min_posts: int = 8
    min_accounts: int = 5
    min_threads: int = 5
    trend_ratio: float = 5.0
    min_coordination_share: float = 0.3
    near_dup_jaccard: float = 0.7
    copost_s: float = 60.0
    automation_s: float = 5.0
    new_account_age_s: float = 86400.0
    warmup_s: float = 3600.0
    novel_s: float = 2 * 3600.0
    established_factor: float = 2.0
    rare_expected: float = 0.5
    min_template_words: int = 8
    max_entities: int = 200_000
    max_posts_per_entity: int = 200
    max_accounts_per_entity: int = 5_000
    max_agents: int = 1_000_000
    max_evidence_agents: int = 100
    evidence: EvidenceConfig = DEFAULT  # exemplars, clusters, timeline (detectors.evidence)


@dataclass(slots=True)
class _Post:
    t: float
    author: str | None
    post_id: str
    thread: str
    word_ids: np.ndarray  # the first 400 word ids (near-duplicate test)
    new_account: bool | None
    text: str
    inscription: str | None = None  # p:op:tick:amt of its JSON inscription
    words: frozenset[int] | None = None  # the word-id set, made when first compared

    def word_set(self) -> frozenset[int]:
        if self.words is None:
            self.words = frozenset(self.word_ids.tolist())
        return self.words


@dataclass(slots=True)
class _Entity:
    name: str
    first_seen: float
    last_seen: float
    # flat: bucket index (a float), its posts (an int), ... (a small int is a shared object:
    # ~16 bytes a bucket, where a [index, posts] list of floats took ~120)
    buckets: deque[float | int]
    posts: deque[_Post]  # the latest max_posts_per_entity
    accounts: dict[str, float] = field(default_factory=dict)
    incident_agents: Counter[str] | None = None
    incident_first: dict[str, float] = field(default_factory=dict)  # agent -> first post time
    evidence: EvidenceCache | None = None  # made when its incident opens
    volume: int = 1  # the posts its buckets count
    # a post came older than its latest: the buckets and accounts are no longer in time order
    # (a judgement then scans them whole instead of their ends)
    late: bool = False


class SurgeDetector:
    type = "surge"
    kinds: ClassVar[tuple[type, ...]] = (PostEvent, CommentEvent, AgentEvent)  # ``update`` reads

    def __init__(self, config: SurgeConfig | None = None) -> None:
        self.cfg = config or SurgeConfig()
        # an entity seen once is its post alone (a _Post), built into an _Entity when needed
        # (a template past novelty is the time it was last seen alone: a float)
        self._entities: OrderedDict[str, _Entity | _Post | float] = OrderedDict()
        self._agent_created: OrderedDict[str, float] = OrderedDict()
        self._dirty: set[str] = set()
        self._reported: set[str] = set()
        self._start: float | None = None
        self._anonymous = 0
        self._expired_at: float | None = None  # expired at this time, no text read since
        # the latest judgement's time: a template first seen more than novel_s before it can
        # never be novel again (judgements move forward in event time, as expiry's drops
        # already assume), so none can read its state: it is held as its latest sighting alone
        self._judged = -np.inf
        # each text's time and entities, in arrival order, until its posts are past every
        # judgement (window_s + copost_s): then the posts of its entities seen no later are
        # dropped at once, not when each is next seen (most never are)
        self._aging: deque[tuple[float, set[str]]] = deque()

    def update(self, item: Item) -> None:
        text = item.text
        if text is None:  # (posts and comments always have a Text: Item.of)
            event = item.event
            if type(event) is AgentEvent and event.created_at is not None:
                self._agent_created[event.name] = event.created_at.timestamp()
                self._agent_created.move_to_end(event.name)
                if len(self._agent_created) > self.cfg.max_agents:
                    self._agent_created.popitem(last=False)
            return
        t = item.t
        if self._start is None or t < self._start:
            self._start = t
        if len(text.ids):  # (any token: the strings themselves are read only where needed)
            raw = item.raw  # (a post's event.text builds title + body anew on each read)
            self._observe(t, item.author, item.event, text,
                          item.event.text if raw is None else raw)

    def _observe(self, t: float, author: str | None, event: PostEvent | CommentEvent,
                 text: Text, raw: str) -> None:
        cfg = self.cfg
        names, sig, template = _entities(text, raw, cfg.min_template_words)
        if not names:
            return
        self._expired_at = None
        if author is None:
            self._anonymous += 1
        entities = self._entities
        if template is not None and len(names) == 1:  # (most texts: a template alone)
            e = entities.get(template)
            if type(e) is float:  # past novelty: its latest sighting alone (as the loop has it)
                entities.move_to_end(template)
                if t > e:
                    entities[template] = t
                return
        reported = self._reported
        judged, novel_s = self._judged, cfg.novel_s
        post: _Post | None = None
        live: list[str] = []
        max_accounts = cfg.max_accounts_per_entity
        for name in names:
            e = entities.get(name)
            if type(e) is float:  # a template past novelty: its latest sighting alone
                entities.move_to_end(name)
                if t > e:
                    entities[name] = t
                continue
            if name is template and e is not None and name not in reported \
                    and judged - (e.t if type(e) is _Post else e.first_seen) > novel_s:
                last = e.t if type(e) is _Post else e.last_seen
                entities[name] = t if t > last else last  # (its judgements are over)
                entities.move_to_end(name)
                continue
            live.append(name)
            if post is None:  # (only a live entity keeps the post)
                if author is None:
                    new = None
                else:
                    created = self._agent_created.get(author)
                    new = None if created is None else (t - created) <= cfg.new_account_age_s
                if type(event) is PostEvent:  # (a pydantic model's isinstance is slower)
                    post_id = thread = event.post_id
                else:
                    post_id, thread = f"{event.post_id}/{event.comment_id}", event.post_id
                ids = text.word_ids  # (the text's own array: no view a post, no tail past 400)
                post = _Post(t, author, post_id, thread,
                             ids if len(ids) <= 400 else ids[:400].copy(), new,
                             raw[:cfg.evidence.stored_chars], sig)  # (evidence.snippet, inline)
                idx = t // cfg.bucket_s  # (a float: the bucket's index)
            if e is None:  # a new entity: its post alone until a second (most never have one)
                entities[name] = post
                if len(entities) > cfg.max_entities:
                    old, _ = entities.popitem(last=False)
                    self._reported.discard(old)
                continue
            if type(e) is _Post:
                e = entities[name] = self._built(name, e)
            entities.move_to_end(name)
            if t > e.last_seen:
                e.last_seen = t
            elif t < e.last_seen:
                e.late = True
            buckets = e.buckets
            if buckets and buckets[-2] == idx:
                buckets[-1] += 1
            else:
                buckets.extend((idx, 1))
            e.volume += 1
            e.posts.append(post)  # (a bounded deque: the oldest post drops out)
            if author is not None:  # an unknown author adds volume, not an account
                accounts = e.accounts
                if author in accounts:
                    if not e.late:  # (moved to the end: the accounts stay in time order)
                        del accounts[author]
                    accounts[author] = t
                elif len(accounts) < max_accounts:
                    accounts[author] = t
                agents = e.incident_agents
                if agents is not None and (author in agents or len(agents) < 1000):
                    agents[author] += 1
                    first = e.incident_first.get(author)
                    if first is None or t < first:
                        e.incident_first[author] = t
        if live:
            self._dirty.update(live)
            self._aging.append((t, live))

    def _built(self, name: str, p: _Post) -> _Entity:
        """The entity of one post as its first sighting made it (first bucket, post and
        account)."""
        cfg = self.cfg
        return _Entity(name, p.t, p.t, deque((p.t // cfg.bucket_s, 1)),
                       deque([p], cfg.max_posts_per_entity),
                       {p.author: p.t} if p.author is not None
                       and cfg.max_accounts_per_entity > 0 else {})

    def findings(self, now: float) -> list[Finding]:
        cfg = self.cfg
        if now != self._expired_at:  # (the pipeline has just expired it: nothing to redo)
            self.expire(now)
        if self._start is None or now - self._start < cfg.warmup_s:
            self._dirty.clear()
            return []
        scored: list[tuple[_Entity, dict]] = []
        entities, few = self._entities, cfg.min_posts * 0.5
        for name in self._dirty | self._reported if self._reported else self._dirty:
            e = entities.get(name)
            if type(e) is _Post:
                if few > 1:
                    continue  # (one post)
                e = entities[name] = self._built(name, e)
            if type(e) is not _Entity or len(e.posts) < few:
                continue  # (fewer recent posts than any bar: the window's are among them)
            stats = self._stats(e, now)
            if stats is not None:
                scored.append((e, stats))
        self._dirty.clear()
        # Reported entities first (a stable key for an ongoing incident), then by priority,
        # then by name: a tie never falls to the set's order, which the process's string hash
        # seed sets (live workers and the replay would pick different hosts).
        scored.sort(key=lambda es: (es[0].name not in self._reported,
                                    ENTITY_PRIORITY[es[0].name.split(":", 1)[0]],
                                    -es[1]["posts_in_window"], es[0].name))
        accepted: list[tuple[_Entity, dict, set[str]]] = []
        for e, stats in scored:
            ids = {p.post_id for p in e.posts if p.t > now - cfg.window_s}
            host = next((a for a in accepted
                         if len(ids & a[2]) >= 0.5 * min(len(ids), len(a[2]))), None)
            if host is None:
                accepted.append((e, stats, ids))
            else:
                host[1]["related_entities"].append(e.name)
        reported = {e.name for e, _, _ in accepted}
        for name in self._reported - reported:
            if type(e := self._entities.get(name)) is _Entity:
                e.incident_agents, e.incident_first, e.evidence = None, {}, None
        self._reported = reported
        return [self._finding(e, stats, now) for e, stats, _ in accepted]

    def _stats(self, e: _Entity, now: float) -> dict | None:
        """The evidence of ``e`` if it surges at ``now``, else None (the caller has checked that
        it keeps enough recent posts for the lowest bar)."""
        cfg = self.cfg
        w_start = now - cfg.window_s
        accounts = e.accounts
        if e.late:
            for a, t in list(accounts.items()):
                if t <= w_start:
                    del accounts[a]
        else:  # in time order: those of the window are a tail
            stale = []
            for a, t in accounts.items():
                if t > w_start:
                    break
                stale.append(a)
            for a in stale:
                del accounts[a]
        ongoing = e.name in self._reported
        start = self._start if self._start is not None else e.first_seen
        novel = e.first_seen - start >= cfg.warmup_s and now - e.first_seen <= cfg.novel_s
        if not (novel or ongoing) and e.name.startswith("text:"):
            return None  # a recurring stock text is background, whatever its clumps
        # too few accounts for the lowest bar its buckets could give it: no bucket scan
        low = 0.5 if ongoing else 1.0 if novel else min(1.0, cfg.established_factor)
        if len(e.accounts) < cfg.min_accounts * low:
            return None
        count_w = prev_w = base = 0.0  # (float sums of int counts: exact in any order)
        buckets, bucket_s, p_start = e.buckets, cfg.bucket_s, w_start - cfg.window_s
        if e.late:
            pairs = iter(buckets)
            for idx, n in zip(pairs, pairs, strict=True):
                at = idx * bucket_s  # (the bucket's start)
                if at >= w_start:
                    count_w += n
                else:
                    base += n
                    if at >= p_start:
                        prev_w += n
        else:  # in time order: the window's buckets, then the previous window's, end it
            i = len(buckets) - 2
            while i >= 0 and buckets[i] * bucket_s >= w_start:
                count_w += buckets[i + 1]
                i -= 2
            while i >= 0 and buckets[i] * bucket_s >= p_start:
                prev_w += buckets[i + 1]
                i -= 2
            base = e.volume - count_w
        observed = min(cfg.baseline_s, w_start - max(e.first_seen, start))
        expected = base * cfg.window_s / max(observed, cfg.window_s)
        # hysteresis: an open incident holds at half the bar; an established entity needs more,
        # unless it is rare (its baseline expects under rare_expected posts a window)
        rare = expected < cfg.rare_expected
        scale = 0.5 if ongoing else 1.0 if novel or rare else cfg.established_factor
        if count_w < cfg.min_posts * scale or len(e.accounts) < cfg.min_accounts * scale:
            return None
        if not (ongoing or novel) and count_w < cfg.trend_ratio * (expected + 1.0):
            return None
        posts = [p for p in e.posts if p.t > w_start]
        threads = len({p.thread for p in posts})
        if threads < cfg.min_threads * scale:
            return None  # the same reply all over one thread is that thread's business
        coordinated, automated, min_gap = self._coordination(posts)
        share = len(coordinated) / len(posts)
        if share < min(cfg.min_coordination_share * scale, 0.9):
            return None
        known = [p.new_account for p in posts if p.new_account is not None]
        return {
            "entity": e.name, "related_entities": [],
            "posts_in_window": int(count_w), "window_s": cfg.window_s,
            "previous_window_posts": int(prev_w),
            "trendiness": round(count_w / max(prev_w, 1.0), 3),
            "baseline_expected": round(expected, 3),
            "distinct_accounts": len(e.accounts), "threads": threads,
            "accounts_per_post": round(len(e.accounts) / count_w, 3),
            "new_account_share": round(sum(known) / len(known), 3) if known else None,
            "coordination_share": round(share, 3),
            "automated_posts": len(automated),
            "min_copost_gap_s": None if min_gap is None else round(min_gap, 3),
            "first_seen": e.first_seen, "novel": novel, "rare": rare,
        }

    def _coordination(self, posts: list[_Post]) -> tuple[set[int], set[int], float | None]:
        """Posts with a near-identical twin from another agent within copost_s (and < 5 s)."""
        cfg = self.cfg
        posts = sorted(posts, key=lambda p: p.t)
        coordinated: set[int] = set()
        automated: set[int] = set()
        min_gap: float | None = None
        for i, p in enumerate(posts):
            for j in range(i + 1, len(posts)):
                q = posts[j]
                gap = q.t - p.t
                if gap > cfg.copost_s:
                    break
                if p.author is None or q.author is None or q.author == p.author:
                    continue
                if p.inscription is not None and p.inscription == q.inscription:
                    twin = True  # the same inscription: its prose is decoration (and salt)
                else:
                    a, b = p.word_set(), q.word_set()
                    union = len(a | b)
                    twin = bool(union) and len(a & b) / union >= cfg.near_dup_jaccard
                if twin:
                    coordinated.update((i, j))
                    if gap <= cfg.automation_s:
                        automated.update((i, j))
                    min_gap = gap if min_gap is None else min(min_gap, gap)
        return coordinated, automated, min_gap

    def _finding(self, e: _Entity, stats: dict, now: float) -> Finding:
        cfg = self.cfg
        if e.incident_agents is None:
            e.incident_agents, e.incident_first = Counter(), {}
            for p in e.posts:
                if p.author is not None:
                    e.incident_agents[p.author] += 1
                    e.incident_first[p.author] = min(e.incident_first.get(p.author, p.t), p.t)
        agents = [a for a, _ in e.incident_agents.most_common(cfg.max_evidence_agents)]
        recent = list(e.posts)[-20:]
        severity: Severity = ("critical" if stats["automated_posts"] >= 3
                              or stats["distinct_accounts"] >= 5 * cfg.min_accounts
                              else "warning")
        kind, value = e.name.split(":", 1)
        # exemplars, near-duplicate clusters and timeline of the kept posts (in time order),
        # the timeline completed by the first post of every incident agent
        def build() -> dict:
            posts = sorted(e.posts, key=lambda p: (p.t, p.post_id))
            return build_evidence(
                (Sighting(p.t, p.author, p.post_id, p.text, p.word_ids) for p in posts),
                first_acts=e.incident_first, acts=e.incident_agents, cfg=cfg.evidence)

        if e.evidence is None:
            e.evidence = EvidenceCache()
        shared = e.evidence.get(now, build, cfg.evidence.refresh_s)
        evidence = {**stats, "agents": agents, "incident_agent_count": len(e.incident_agents),
                    "post_ids": [p.post_id for p in recent], **shared}
        posts = sum(e.incident_agents.values())
        evidence["incident_posts"] = posts
        summary = (f"Coordinated surge of {kind} {value}: {posts} posts by "
                   f"{len(e.incident_agents)} agents so far ({stats['posts_in_window']} in the "
                   f"last {int(cfg.window_s // 60)} min), {stats['coordination_share']:.0%} "
                   f"near-identical co-posts")
        return Finding(self.type, e.name, severity, summary, evidence,
                       score=float(stats["posts_in_window"]),
                       labels={"entity_kind": kind, "entity": value[:64]})

    def expire(self, now: float) -> None:
        cfg, entities = self.cfg, self._entities
        horizon = now - cfg.window_s - cfg.baseline_s
        first_bucket = horizon // cfg.bucket_s
        kept_after = now - cfg.window_s - cfg.copost_s
        stale: list[str] = []  # the least recently seen, up to the first seen within the horizon
        for name, e in entities.items():
            if (e if type(e) is float else e.t if type(e) is _Post else e.last_seen) >= horizon:
                break
            stale.append(name)
        for name in stale:
            del entities[name]
            self._reported.discard(name)
        for name in self._dirty | self._reported if self._reported else self._dirty:
            e = entities.get(name)
            if type(e) is _Post:
                if e.t > kept_after and e.t // cfg.bucket_s >= first_bucket:
                    continue  # (its post and bucket stay)
                e = entities[name] = self._built(name, e)
            elif type(e) is not _Entity:
                continue  # (gone, or past novelty)
            buckets, posts = e.buckets, e.posts
            while buckets and buckets[0] < first_bucket:
                buckets.popleft()
                e.volume -= buckets.popleft()
            while posts and posts[0].t <= kept_after:
                posts.popleft()
        self._age(kept_after)
        self._expired_at = self._judged = now

    def _age(self, kept_after: float) -> None:
        """Drop the posts no judgement will read: those of the entities last seen at or before
        ``kept_after`` (the next expiry would pop them all before any read, as event time
        only moves forward); an entity seen once keeps its post's time, author and ids only
        (its first bucket and account, when it is seen again)."""
        aging, entities = self._aging, self._entities
        while aging and aging[0][0] <= kept_after:
            for name in aging.popleft()[1]:
                e = entities.get(name)
                if type(e) is _Post:
                    if e.t <= kept_after and e.text:  # (a copy: other entities share the post)
                        entities[name] = _Post(e.t, e.author, e.post_id, e.thread, _NO_IDS,
                                               e.new_account, "", e.inscription)
                elif type(e) is _Entity and e.last_seen <= kept_after:
                    e.posts.clear()

    def snapshot(self) -> Snapshot:
        return Snapshot(samples=[
            Sample("surge_entities", float(len(self._entities)),
                   help="Entities (tickers, contracts, domains, hashtags, templates) tracked by "
                        "the surge detector"),
            Sample("surge_texts_unknown_author_total", float(self._anonymous), kind="counter",
                   help="Texts with an entity but without an author read by the surge detector"),
        ])
