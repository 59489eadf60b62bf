"""Lexical burst detector: an n-gram born and adopted by many agents fast.

Word n-grams (lower-cased word 3-grams by default, dropping those over half stop-words, as the
cascade definition of metrics B) are read from posts and comments. An n-gram is *born* the first
time it is seen after the warm-up (``warmup_s`` and ``warmup_texts``; anything seen during the
warm-up, or within the last ``memory_s``, is old). It bursts when, within ``max_age_s`` of its
birth, at least ``min_adopters`` distinct agents used it, at a cascade growth rate of at least
``min_rate_per_h`` adopters an hour since birth, in at least ``min_text_share`` of all texts
since its birth (a common phrase of a busy hour is not a burst), and in at least
``min_distinct_text_share`` x adopters different texts (texts differing only by numbers, ids
or emojis count as one): copy-pasted floods are the surge
detector's business, a lexical burst is a phrase spreading through different sentences. All
n-grams of one burst (sharing a word that is not a stop-word, or most of their adopters) are
reported as one incident, keyed by the earliest-born n-gram, which stays tracked past
``max_age_s`` while it keeps gaining adopters (none for ``quiet_s`` ends it).

Memory: a last-seen time per distinct n-gram hash for ``memory_s`` (at most ``max_seen``,
oldest evicted); one tuple per n-gram born within ``max_age_s`` with a single adopter, and the
adopters (at most ``max_adopters``) of those with more.

>>> d = BurstDetector(BurstConfig(warmup_s=0, warmup_texts=0, min_adopters=5))
>>> for i, w in enumerate(["red", "green", "blue", "gold", "pink", "gray"]):
...     d.observe_text(60.0 * i, f"agent{i}", f"p{i}", f"{w} zorblax quantum lattice rules")
>>> [(f.evidence["ngram"], f.evidence["adopters"]) for f in d.findings(400.0)]
[('quantum lattice rules', 6)]
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from detectors.alert import Finding, Severity
from streams.events import CommentEvent, Event, PostEvent

_URL = re.compile(r"https?://\S+")
_HAS_DIGIT = re.compile(r"\S*\d\S*")
_LETTERS = re.compile(r"[^\W\d_]+")
_WORD = re.compile(r"[^\W\d_][\w'-]*")


def ngrams(text: str, n: int = 3) -> set[str]:
    """Lower-cased word n-grams, URLs removed, those over half stop-words dropped.

    >>> sorted(ngrams("The zorblax lattice is here, https://x.io now"))
    ['the zorblax lattice', 'zorblax lattice is']
    """
    words = _WORD.findall(_URL.sub(" ", text.lower()))
    out = set()
    for i in range(len(words) - n + 1):
        g = words[i:i + n]
        if sum(w in ENGLISH_STOP_WORDS for w in g) * 2 <= n:
            out.add(" ".join(g))
    return out


@dataclass(frozen=True, slots=True)
class BurstConfig:
    n: int = 3
    min_adopters: int = 12
    min_rate_per_h: float = 6.0
    max_age_s: float = 3 * 3600.0
    quiet_s: float = 1800.0
    min_distinct_text_share: float = 0.6
    min_text_share: float = 0.03
    memory_s: float = 24 * 3600.0
    warmup_s: float = 3600.0
    warmup_texts: int = 1000
    max_seen: int = 5_000_000
    max_adopters: int = 500
    max_text_chars: int = 5_000


@dataclass(slots=True)
class _Young:
    born: float
    texts_at_birth: int
    uses: int = 0
    adopters: dict[str, float] = field(default_factory=dict)
    texts: set[str] = field(default_factory=set)
    posts: list[str] = field(default_factory=list)


class BurstDetector:
    type = "burst"

    def __init__(self, config: BurstConfig | None = None) -> None:
        self.cfg = config or BurstConfig()
        self._seen: dict[bytes, float] = {}
        self._young: dict[str, _Young] = {}
        # born, author, text, post, texts seen before its birth
        self._single: dict[str, tuple[float, str, str, str, int]] = {}
        self._start: float | None = None
        self._texts = 0
        self._reported: dict[str, float] = {}
        self._dirty: set[str] = set()
        self._expired_at: float | None = None

    def observe_event(self, event: Event) -> None:
        if isinstance(event, PostEvent):
            self.observe_text(event.event_time.timestamp(), event.author, event.post_id,
                              event.text)
        elif isinstance(event, CommentEvent):
            self.observe_text(event.event_time.timestamp(), event.author,
                              f"{event.post_id}/{event.comment_id}", event.content)

    def observe_text(self, t: float, author: str, post_id: str, text: str) -> None:
        cfg = self.cfg
        if self._start is None:
            self._start = t
        self._texts += 1
        warm = t - self._start >= cfg.warmup_s and self._texts > cfg.warmup_texts
        text = text[:cfg.max_text_chars]
        # texts that differ only by numbers, ids or emojis are one text (a template)
        template = " ".join(_LETTERS.findall(_HAS_DIGIT.sub(" ", text.lower())))
        text_id = hashlib.blake2b(template.encode(), digest_size=8).hexdigest()
        for g in ngrams(text, cfg.n):
            h = hashlib.blake2b(g.encode(), digest_size=8).digest()
            last = self._seen.pop(h, None)
            self._seen[h] = t  # re-inserted: the dict stays ordered by last sight
            y = self._young.get(g)
            if y is not None:
                y.uses += 1
                self._dirty.add(g)
                if author not in y.adopters and len(y.adopters) < cfg.max_adopters:
                    y.adopters[author] = t
                    y.texts.add(text_id)
                    y.posts.append(post_id)
            elif (single := self._single.get(g)) is not None:
                if single[1] != author:  # a second adopter: track it in full
                    del self._single[g]
                    self._dirty.add(g)
                    self._young[g] = _Young(single[0], single[4], 2,
                                            {single[1]: single[0], author: t},
                                            {single[2], text_id}, [single[3], post_id])
            elif last is None and warm:
                self._single[g] = (t, author, text_id, post_id, self._texts - 1)

    def findings(self, now: float) -> list[Finding]:
        cfg = self.cfg
        if self._expired_at is None or now - self._expired_at >= 60.0:
            self._expire(now)
            self._expired_at = now
        hits: list[tuple[str, _Young]] = []
        # only n-grams used since the last evaluation can newly qualify; open ones are re-judged
        for g in self._dirty | self._reported.keys():
            y = self._young.get(g)
            if y is None:
                continue
            n = len(y.adopters)
            if n < 2:
                continue
            ongoing = g in self._reported
            need = cfg.min_adopters * (0.5 if ongoing else 1.0)
            rate = n / max((now - y.born) / 3600.0, 1 / 60)
            share = y.uses / max(self._texts - y.texts_at_birth, 1)
            if (n >= need and (ongoing or (rate >= cfg.min_rate_per_h
                                           and share >= cfg.min_text_share))
                    and len(y.texts) >= cfg.min_distinct_text_share * n):
                hits.append((g, y))
        self._dirty.clear()
        hits.sort(key=lambda gy: (gy[0] not in self._reported, gy[1].born, gy[0]))
        groups: list[tuple[str, _Young, list[str]]] = []
        for g, y in hits:
            words = set(g.split()) - ENGLISH_STOP_WORDS
            host = next((h for h in groups if words & set(h[0].split())
                         or len(y.adopters.keys() & h[1].adopters.keys())
                         >= 0.5 * min(len(y.adopters), len(h[1].adopters))), None)
            if host is None:
                groups.append((g, y, []))
            else:
                host[2].append(g)
        self._reported = {g: y.born for g, y, _ in groups}
        return [self._finding(g, y, related, now) for g, y, related in groups]

    def _finding(self, g: str, y: _Young, related: list[str], now: float) -> Finding:
        n = len(y.adopters)
        hours = max((now - y.born) / 3600.0, 1 / 60)
        order = sorted(y.adopters.items(), key=lambda kv: kv[1])
        t_min = order[self.cfg.min_adopters - 1][1] if n >= self.cfg.min_adopters else None
        severity: Severity = "critical" if n >= 4 * self.cfg.min_adopters else "warning"
        evidence = {"ngram": g, "related_ngrams": related[:20], "born_at": y.born,
                    "adopters": n, "distinct_texts": len(y.texts), "uses": y.uses,
                    "text_share": round(y.uses / max(self._texts - y.texts_at_birth, 1), 4),
                    "growth_rate_per_h": round(n / hours, 2),
                    "seconds_to_min_adopters": None if t_min is None else round(t_min - y.born),
                    "agents": [a for a, _ in order[:100]], "post_ids": y.posts[:20]}
        summary = (f"Lexical burst '{g}': born {hours:.1f} h ago, adopted by {n} agents "
                   f"({n / hours:.1f}/h)")
        return Finding(self.type, f"ngram:{g}", severity, summary, evidence, score=float(n),
                       labels={"ngram": g[:64]})

    def _expire(self, now: float) -> None:
        cfg = self.cfg
        cutoff = now - cfg.memory_s
        while self._seen:
            h, t = next(iter(self._seen.items()))
            if t >= cutoff and len(self._seen) <= cfg.max_seen:
                break
            del self._seen[h]
        for g, y in list(self._young.items()):
            # past max_age an n-gram is no longer young, unless its open burst still spreads
            if now - y.born > cfg.max_age_s and (
                    g not in self._reported or now - max(y.adopters.values()) > cfg.quiet_s
                    or now - y.born > cfg.memory_s):
                del self._young[g]
        while self._single:  # insertion order is birth order
            g, single = next(iter(self._single.items()))
            if now - single[0] <= cfg.max_age_s:
                break
            del self._single[g]
