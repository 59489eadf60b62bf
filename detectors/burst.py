"""Lexical burst detector: a new phrase adopted by many distinct agents within hours.

The phrases are the word n-grams of posts and comments (word 3-grams by default, read from
``item.text.word_ngram_ids(n)``: the one tokeniser's word tokens, lower case, URLs removed; an
n-gram over half stop-words is never reported, as in the cascade definition of metrics B). An
n-gram is *born* the first time it is seen after the warm-up (``warmup_s`` and ``warmup_texts``;
anything seen during the warm-up, or within the last ``memory_s``, is old). It bursts when,
within ``max_age_s`` of its birth, at least ``min_adopters`` distinct agents used it, at a growth
rate of at least ``min_rate_per_h`` adopters an hour since birth, in at least ``min_text_share``
of all texts since its birth (a common phrase of a busy hour is not a burst), in at least
``min_threads`` threads (a phrase repeated inside one hot thread is that thread's business, as
for the surge detector: on the real-text background, resampled real threads whose bots all
answer "TIL too, thanks" raised 2 to 5 such bursts a seed without this bar). Whether the
adopters paste near-identical texts or weave the phrase into varied posts of their own, it is
the same burst (issue 10 item 7); the surge detector says separately whether a campaign is
coordinated. All n-grams of one burst (sharing a word that is not a stop-word, or most of their
adopters) are one incident, keyed by the earliest-born n-gram, which stays tracked past
``max_age_s`` while it keeps gaining adopters (none for ``quiet_s`` ends it). The evidence
carries the readable phrase (recovered from the text that made it a candidate).

Cost: per text, a handful of C-level set operations over its n-gram ids (amortised O(n-grams),
about two hash look-ups an n-gram with the defaults, no Python loop over them); Python work only
for the n-grams born recently and seen again (a verbatim repeat of a recent text promotes all its
n-grams: the real-text benchmark, which resamples real texts whole, is the worst case). Expiry
is by generations: the n-grams seen are kept in sets of ``memory_s / seen_generations`` of event
time each (12 h by default), the singly-used young n-grams in dicts of ``max_age_s /
young_generations`` (3 h); dropping the oldest generation is one deallocation, never a scan. An
n-gram is therefore old when seen within the last ``memory_s`` (and at most ``memory_s +
memory_s / seen_generations`` ago, 24 h: the bound of the generation scheme); a single's age is
checked exactly when it is used again.

Memory: the distinct n-grams of ``memory_s`` (one set entry each per generation they occur in;
when the seen sets exceed ``max_seen`` entries the oldest generation goes early), one dict entry
per n-gram born within ``max_age_s`` with a single adopter (pointing at its text's record), and
the adopters (at most ``max_adopters``) of the few with more. Items without an author count as
texts and make n-grams old, but adopt nothing.

>>> from streams.state.base import Item
>>> from streams.text import Text
>>> from streams.events import PostEvent
>>> d = BurstDetector(BurstConfig(warmup_s=0, warmup_texts=0, min_adopters=5))
>>> for i, w in enumerate(["red", "green", "blue", "gold", "pink", "gray"]):
...     text = Text.of(f"{w} zorblax quantum lattice rules")
...     d.update(Item(PostEvent.model_construct(post_id=f"p{i}"), 60.0 * i, f"agent{i}", text))
>>> [(f.evidence["ngram"], f.evidence["adopters"]) for f in d.findings(400.0)]
[('quantum lattice rules', 6)]
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from detectors.alert import Finding, Severity
from streams.events import CommentEvent, PostEvent
from streams.state.base import Item, Sample, Snapshot

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS)


@dataclass(frozen=True, slots=True)
class BurstConfig:
    n: int = 3
    min_adopters: int = 12
    min_threads: int = 5
    min_rate_per_h: float = 6.0
    max_age_s: float = 3 * 3600.0
    quiet_s: float = 1800.0
    min_text_share: float = 0.03
    memory_s: float = 12 * 3600.0
    warmup_s: float = 3600.0
    warmup_texts: int = 1000
    seen_generations: int = 1
    young_generations: int = 1
    max_seen: int = 20_000_000
    max_adopters: int = 500


@dataclass(slots=True)
class _Young:
    """An n-gram born recently with at least two adopters."""

    phrase: str
    born: float
    texts_at_birth: int
    uses: int = 0
    adopters: dict[str, float] = field(default_factory=dict)
    posts: list[str] = field(default_factory=list)
    threads: set[str] = field(default_factory=set)


def _post_id(item: Item) -> str:
    e = item.event
    return f"{e.post_id}/{e.comment_id}" if isinstance(e, CommentEvent) else e.post_id


class BurstDetector:
    type = "burst"

    def __init__(self, config: BurstConfig | None = None) -> None:
        self.cfg = cfg = config or BurstConfig()
        self._seen_gen_s = cfg.memory_s / cfg.seen_generations
        self._young_gen_s = cfg.max_age_s / cfg.young_generations
        # (generation index, the n-grams seen in it), newest last
        self._seen: deque[tuple[int, set[int]]] = deque()
        # (generation index, n-gram -> record of its only adopter's text), newest last
        self._single: deque[tuple[int, dict[int, int]]] = deque()
        # (t, author, post id, texts before it, thread) of the texts that gave birth to n-grams, in
        # order; a record's number is its position plus the number of records dropped
        self._records: deque[tuple[float, str | None, str, int, str]] = deque()
        self._record_base = 0
        self._young: dict[int, _Young] = {}
        self._young_due: list[tuple[float, int]] = []  # heap: (when to re-check, n-gram)
        self._start: float | None = None
        self._texts = 0
        self._anonymous = 0
        self._reported: dict[int, float] = {}
        self._dirty: set[int] = set()

    def update(self, item: Item) -> None:
        if item.text is None or not isinstance(item.event, PostEvent | CommentEvent):
            return
        cfg, t, author = self.cfg, item.t, item.author
        if self._start is None:
            self._start = t
        self._texts += 1
        if author is None:
            self._anonymous += 1
        ids = item.text.word_ngram_ids(cfg.n).tolist()
        grams = set(ids)
        if not grams:
            return
        gen = int(t // self._seen_gen_s)
        if not self._seen or self._seen[-1][0] < gen:
            self._seen.append((gen, set()))
        if not (t - self._start >= cfg.warmup_s and self._texts > cfg.warmup_texts):
            self._seen[-1][1].update(grams)  # warm-up: everything seen is old
            return
        # young and single n-grams are in the seen sets since their birth: only the old ones
        # of this text can be young or single
        new = grams.difference(*(s for _, s in reversed(self._seen)))
        self._seen[-1][1].update(grams)
        if len(new) < len(grams):
            grams.difference_update(new)
            self._old(grams, item, ids)
        if new:
            ygen = int(t // self._young_gen_s)
            if not self._single or self._single[-1][0] < ygen:
                self._single.append((ygen, {}))
            self._records.append((t, author, _post_id(item), self._texts - 1,
                                  item.event.post_id))
            self._single[-1][1].update(dict.fromkeys(new, self._record_base
                                                     + len(self._records) - 1))

    def _old(self, grams: set[int], item: Item, ids: list[int]) -> None:
        """The n-grams of a text seen before: adoption of the young, promotion of the single."""
        cfg, t, author = self.cfg, item.t, item.author
        young = self._young.keys() & grams if self._young else ()
        for g in young:
            y = self._young[g]
            y.uses += 1
            self._dirty.add(g)
            if author is not None and author not in y.adopters \
                    and len(y.adopters) < cfg.max_adopters:
                y.adopters[author] = t
                y.posts.append(_post_id(item))
                y.threads.add(item.event.post_id)
        for _, singles in self._single:
            for g in singles.keys() & grams:
                if self._promote(g, singles[g], item, ids):
                    del singles[g]

    def _promote(self, g: int, rec: int, item: Item, ids: list[int]) -> bool:
        """A singly-used young n-gram used again: tracked in full from a second adopter on.
        False while it is still singly used (the same agent again, or no agent)."""
        i = rec - self._record_base
        if i < 0:
            return True  # its record is older than max_age_s: no longer young
        born, first, post, texts_before, thread = self._records[i]
        author = item.author
        if item.t - born > self.cfg.max_age_s:
            return True
        if author is None or first == author:
            return False
        i = ids.index(g)
        words = item.text.words[i:i + self.cfg.n]  # type: ignore[union-attr]
        if sum(w in STOP_WORDS for w in words) * 2 > self.cfg.n:
            return True  # over half stop-words: never a burst
        phrase = " ".join(words)
        adopters = {first: born} if first is not None else {}
        adopters[author] = item.t
        self._young[g] = _Young(phrase, born, texts_before, 2, adopters, [post, _post_id(item)],
                                {thread, item.event.post_id})
        heapq.heappush(self._young_due, (born + self.cfg.max_age_s, g))
        self._dirty.add(g)
        return True

    def expire(self, now: float) -> None:
        cfg = self.cfg
        oldest = int((now - cfg.memory_s) // self._seen_gen_s)
        while self._seen and (self._seen[0][0] < oldest
                              or sum(len(s) for _, s in self._seen) > cfg.max_seen
                              and len(self._seen) > 1):
            self._seen.popleft()
        oldest = int((now - cfg.max_age_s) // self._young_gen_s)
        while self._single and self._single[0][0] < oldest:
            self._single.popleft()
        while self._records and now - self._records[0][0] > cfg.max_age_s:
            self._records.popleft()
            self._record_base += 1
        # past max_age an n-gram is no longer young, unless its open burst still spreads
        while self._young_due and self._young_due[0][0] < now:
            _, g = heapq.heappop(self._young_due)
            y = self._young.get(g)
            if y is None:
                continue
            last = max(y.adopters.values(), default=y.born)
            if g in self._reported and now - last <= cfg.quiet_s and now - y.born <= cfg.memory_s:
                heapq.heappush(self._young_due, (min(last + cfg.quiet_s, y.born + cfg.memory_s)
                                                 + 1.0, g))
            else:
                del self._young[g]

    def findings(self, now: float) -> list[Finding]:
        cfg = self.cfg
        hits: list[tuple[int, _Young]] = []
        # only n-grams used since the last evaluation can newly qualify; open ones are re-judged
        for g in self._dirty | self._reported.keys():
            y = self._young.get(g)
            if y is None:
                continue
            n = len(y.adopters)
            ongoing = g in self._reported
            scale = 0.5 if ongoing else 1.0
            need = cfg.min_adopters * scale
            if len(y.threads) < cfg.min_threads * scale:
                continue  # a phrase repeated within a thread or two is those threads' business
            rate = n / max((now - y.born) / 3600.0, 1 / 60)
            share = y.uses / max(self._texts - y.texts_at_birth, 1)
            if n >= need and (ongoing or (rate >= cfg.min_rate_per_h
                                          and share >= cfg.min_text_share)):
                hits.append((g, y))
        self._dirty.clear()
        hits.sort(key=lambda gy: (gy[0] not in self._reported, gy[1].born, gy[1].phrase))
        groups: list[tuple[int, _Young, list[str]]] = []
        for g, y in hits:
            words = set(y.phrase.split()) - STOP_WORDS
            host = next((h for h in groups if words & set(h[1].phrase.split())
                         or len(y.adopters.keys() & h[1].adopters.keys())
                         >= 0.5 * min(len(y.adopters), len(h[1].adopters))), None)
            if host is None:
                groups.append((g, y, []))
            else:
                host[2].append(y.phrase)
        self._reported = {g: y.born for g, y, _ in groups}
        return [self._finding(y, related, now) for _, y, related in groups]

    def _finding(self, y: _Young, related: list[str], now: float) -> Finding:
        n = len(y.adopters)
        hours = max((now - y.born) / 3600.0, 1 / 60)
        order = sorted(y.adopters.items(), key=lambda kv: kv[1])
        t_min = order[self.cfg.min_adopters - 1][1] if n >= self.cfg.min_adopters else None
        severity: Severity = "critical" if n >= 4 * self.cfg.min_adopters else "warning"
        g = y.phrase
        evidence = {"ngram": g, "related_ngrams": related[:20], "born_at": y.born,
                    "adopters": n, "threads": len(y.threads), "uses": y.uses,
                    "text_share": round(y.uses / max(self._texts - y.texts_at_birth, 1), 4),
                    "growth_rate_per_h": round(n / hours, 2),
                    "seconds_to_min_adopters": None if t_min is None else round(t_min - y.born),
                    "agents": [a for a, _ in order[:100]], "post_ids": y.posts[:20]}
        summary = (f"Lexical burst '{g}': born {hours:.1f} h ago, adopted by {n} agents "
                   f"({n / hours:.1f}/h)")
        return Finding(self.type, f"ngram:{g}", severity, summary, evidence, score=float(n),
                       labels={"ngram": g[:64]})

    def snapshot(self) -> Snapshot:
        return Snapshot(samples=[
            Sample("burst_young_ngrams", float(len(self._young)),
                   help="Young n-grams with two or more adopters, tracked by the burst detector"),
            Sample("burst_texts_unknown_author_total", float(self._anonymous), kind="counter",
                   help="Texts without an author read by the burst detector"),
        ])
