"""Lexical turnover: daily n-gram birth and death rates, n = 1..5 (metrics.md A1), bounded.

Paper's rule. Per text: URLs removed (``http(s)://...`` and ``www....``), nltk word tokens,
n-grams for n = 1..5 within one text. Keep n-grams whose global frequency (occurrences, counted
over every text) is at least 2. first(g) / last(g) = first / last day g occurs; active set
A_t = {g : first(g) <= t <= last(g)}; birth(t) = |{g in A_t : first(g) = t}| / |A_t|;
death(t) = |{g in A_(t-1) : last(g) = t - 1}| / |A_(t-1)|. Every calendar day from the first
to the current one is a day of the series (a day without posts still has an active set).

Choices (the paper is silent; all configurable): tokens by ``nltk.wordpunct_tokenize``
(``tokenizer="wordpunct"``, runs of word characters or of punctuation; ``"treebank"`` uses
``TreebankWordTokenizer``; ``nltk.word_tokenize`` needs punkt data that cannot be downloaded);
punctuation tokens are kept, as nltk emits them; text lower-cased (``lowercase=True``) so that
capitals at sentence starts do not make new "words".

Live death rule, grace G days (``grace_days``, default 7). The last day of an n-gram is only
final once time has passed. An n-gram unseen for more than G days is dead on its last day, for
good: if it occurs again it is a new n-gram (a new "life", born that day). Equivalently the
paper's rule applied to lives, maximal runs of an n-gram's occurrences with gaps <= G days,
each life qualifying if it has >= 2 occurrences. With G at least the stream's span (or
``grace_days=None``) this is exactly the paper's batch rule (the tests hold both). Rates of day
t are settled once t <= T - G (T = the current day): the gauges report that day; the details
carry the whole series, settled or provisional. Events older than T - ``lateness_days``
(default 1) are counted in ``ngram_late_total`` and skipped; a late event cannot re-join two
lives already split.

Bounded memory. N-grams are hashed to 64-bit ids (token ids from blake2b, combined by a
polynomial rolling hash; expected colliding pairs ~N^2 / 2^65 for N n-grams in a table, 3e-6
for N = 10^7). Per n, a table sorted by id holds first and last day (uint16 days since 1970,
good to 2149) and an occurrence count capped at 2 (uint8): 13 bytes a tracked n-gram (plus,
while merging, a transient copy of one column and of the buffered occurrences). N-grams are
dropped as soon as they can no longer change: unseen for more than G days (singletons
included), so the tables hold only the n-grams of the last G + lateness + 1 days. Occurrences
are buffered and merged in vectorised batches (at each day change, every ``flush_every``
occurrences and on snapshot); births and deaths are kept as per-day counters (``births`` /
``deaths`` of a day in the series: qualifying lives whose first / last day it is), so finished
n-grams leave nothing but counts.

Multi-worker: births and deaths need each n-gram's whole history in one place, and the per-day
counters are only additive between trackers that own disjoint n-grams. So either one reducer
consumes (time, text) from a single-partition topic (this tracker handles thousands of posts a
second, see bench/bench_society.py), or the work is sharded by n-gram id and the reducer adds
the shards' per-day birth/death counters; the first is what the integrator should wire.

>>> from datetime import datetime, timezone
>>> tr = NgramTracker(max_n=2, grace_days=None)
>>> day = lambda d: datetime(2026, 2, d, 12, tzinfo=timezone.utc)
>>> tr.update(day(1), "the cat sat")
>>> tr.update(day(2), "The cat ran http://x.io")
>>> tr.update(day(3), "a dog ran")
>>> s = tr.series(1)  # qualifying unigrams: the (1-2), cat (1-2), ran (2-3)
>>> [(r["day"], r["active"], r["births"], r["deaths"]) for r in s]
[('2026-02-01', 2, 2, 0), ('2026-02-02', 3, 1, 2), ('2026-02-03', 1, 0, 1)]
>>> [r["birth_rate"] for r in s], s[2]["death_rate"]
([1.0, 0.3333333333333333, 0.0], 0.6666666666666666)
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from nltk.tokenize import TreebankWordTokenizer, wordpunct_tokenize

from streams.state.base import Sample, Snapshot

URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the rolling hash
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BYTES_PER_NGRAM = 8 + 2 + 2 + 1


def tokenize(text: str, tokenizer: Literal["wordpunct", "treebank"] = "wordpunct",
             lowercase: bool = True) -> list[str]:
    """URLs removed, optionally lower-cased, nltk word tokens.

    >>> tokenize("Hello, World! see https://moltbook.com/p/1 now")
    ['hello', ',', 'world', '!', 'see', 'now']
    """
    text = URL_RE.sub(" ", text)
    if lowercase:
        text = text.lower()
    if tokenizer == "wordpunct":
        return wordpunct_tokenize(text)
    return _TREEBANK.tokenize(text)


_TREEBANK = TreebankWordTokenizer()


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of one token list (the plain definition, used by tests as the reference)."""
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def day_index(when: datetime) -> int:
    """Whole UTC days since 1970-01-01."""
    return (when.astimezone(UTC) - _EPOCH).days


def day_label(index: int) -> str:
    return (_EPOCH + timedelta(days=index)).strftime("%Y-%m-%d")


class _Table:
    """Sorted ids with first/last day and a count capped at 2, for one n."""

    __slots__ = ("keys", "first", "last", "count")

    def __init__(self) -> None:
        self.keys = np.empty(0, np.uint64)
        self.first = np.empty(0, np.uint16)
        self.last = np.empty(0, np.uint16)
        self.count = np.empty(0, np.uint8)

    def __len__(self) -> int:
        return len(self.keys)

    def nbytes(self) -> int:
        return self.keys.nbytes + self.first.nbytes + self.last.nbytes + self.count.nbytes

    def keep(self, mask: np.ndarray) -> None:
        self.keys, self.first = self.keys[mask], self.first[mask]
        self.last, self.count = self.last[mask], self.count[mask]


class NgramTracker:
    """Incremental first/last-seen per n-gram and daily birth/death rates, n = 1..max_n."""

    def __init__(self, max_n: int = 5, grace_days: int | None = 7, lateness_days: int = 1,
                 min_frequency: int = 2, lowercase: bool = True,
                 tokenizer: Literal["wordpunct", "treebank"] = "wordpunct",
                 flush_every: int = 2_000_000, token_cache: int = 1_000_000) -> None:
        if grace_days is not None and grace_days < lateness_days:
            raise ValueError("grace_days must be >= lateness_days")
        if min_frequency != 2:
            raise ValueError("only the paper's global frequency >= 2 is supported")
        self.max_n = max_n
        self.grace_days = grace_days
        self.lateness_days = lateness_days
        self.lowercase = lowercase
        self.tokenizer: Literal["wordpunct", "treebank"] = tokenizer
        self.flush_every = flush_every
        self.token_cache = token_cache
        self._tok: dict[str, int] = {}
        self._tables = [_Table() for _ in range(max_n)]
        self._buf_ids: list[list[np.ndarray]] = [[] for _ in range(max_n)]
        self._buf_days: list[list[int]] = [[] for _ in range(max_n)]
        self._buffered = 0
        self._base: int | None = None  # day index of position 0 of the counters
        self._births = np.zeros((max_n, 0), np.int64)  # qualifying lives with first = day
        self._deaths = np.zeros((max_n, 0), np.int64)  # qualifying lives with last = day
        self.current: int | None = None
        self.texts_total = 0
        self.occurrences_total = 0
        self.late_total = 0

    # -- ingest -----------------------------------------------------------------------------
    def update(self, when: datetime, text: str) -> None:
        """Add one text (post title + body, or comment) observed at event time ``when``."""
        d = day_index(when)
        if not 0 <= d < 1 << 16:
            raise ValueError(f"event day {when} outside 1970..2149 (uint16 day storage)")
        if self.current is None or d > self.current:
            self._flush()
            self.current = d
            self.expire()
        elif self.grace_days is not None and d < self.current - self.lateness_days:
            self.late_total += 1
            return
        self.texts_total += 1
        h = self._token_ids(tokenize(text, self.tokenizer, self.lowercase))
        g = h
        for n in range(self.max_n):
            if n:
                g = g[:-1] * _K + h[n:]
            if len(g) == 0:
                break
            self._buf_ids[n].append(g)
            self._buf_days[n].append(d)
            self._buffered += len(g)
            self.occurrences_total += len(g)
        if self._buffered >= self.flush_every:
            self._flush()

    def _token_ids(self, tokens: list[str]) -> np.ndarray:
        cache = self._tok
        if len(cache) > self.token_cache:
            cache.clear()
        out = np.empty(len(tokens), np.uint64)
        for i, t in enumerate(tokens):
            v = cache.get(t)
            if v is None:
                v = cache[t] = int.from_bytes(
                    hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little")
            out[i] = v
        return out

    def expire(self, now: datetime | None = None) -> None:
        """Advance to ``now`` (default: the latest event day) and drop n-grams that are done."""
        if now is not None and (self.current is None or day_index(now) > self.current):
            self._flush()
            self.current = day_index(now)
        if self.grace_days is None or self.current is None:
            return
        watermark = self.current - self.lateness_days
        for t in self._tables:
            if len(t):
                t.keep(t.last.astype(np.int64) + self.grace_days >= watermark)

    # -- merge ------------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self._buffered:
            return
        for n in range(self.max_n):
            if self._buf_ids[n]:
                ids = np.concatenate(self._buf_ids[n])
                days = np.repeat(np.asarray(self._buf_days[n], np.int32),
                                 [len(a) for a in self._buf_ids[n]])
                self._merge(n, ids, days)
                self._buf_ids[n].clear()
                self._buf_days[n].clear()
        self._buffered = 0

    def _counters(self, lo: int, hi: int) -> None:
        """Make the per-day counters cover day indices lo..hi."""
        if self._base is None:
            self._base = lo
        width = self._births.shape[1]
        left = max(0, self._base - lo)
        right = max(0, hi - (self._base + width - 1))
        if left or right:
            pad = ((0, 0), (left, right))
            self._births = np.pad(self._births, pad)
            self._deaths = np.pad(self._deaths, pad)
            self._base -= left

    def _merge(self, n: int, ids: np.ndarray, days: np.ndarray) -> None:
        order = np.lexsort((days, ids))
        ids, days = ids[order], days[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(ids)]
        uk, bmin, bmax = ids[starts], days[starts], days[ends - 1]
        bcnt = np.minimum(ends - starts, 2).astype(np.uint8)
        self._counters(int(bmin.min()), int(bmax.max()))
        base = self._base
        assert base is not None
        births, deaths = self._births[n], self._deaths[n]
        t = self._tables[n]
        pos = np.searchsorted(t.keys, uk)
        found = pos < len(t)
        found[found] = t.keys[pos[found]] == uk[found]
        # existing n-grams: continue their life, or start a new one after a gap > G
        e = pos[found]
        f0, l0 = t.first[e].astype(np.int64), t.last[e].astype(np.int64)
        c0 = t.count[e]
        bm, bM, bc = bmin[found].astype(np.int64), bmax[found].astype(np.int64), bcnt[found]
        grace = self.grace_days
        cont = np.ones(len(e), bool) if grace is None else bm <= l0 + grace
        was_q = cont & (c0 >= 2)  # its counted (first, last) are about to move
        np.subtract.at(births, f0[was_q] - base, 1)
        np.subtract.at(deaths, l0[was_q] - base, 1)
        nf = np.where(cont, np.minimum(f0, bm), bm)
        nl = np.where(cont, np.maximum(l0, bM), bM)
        nc = np.where(cont, np.minimum(c0.astype(np.int64) + bc, 2), bc).astype(np.uint8)
        q = nc >= 2
        np.add.at(births, nf[q] - base, 1)
        np.add.at(deaths, nl[q] - base, 1)
        t.first[e], t.last[e], t.count[e] = nf, nl, nc
        # new n-grams
        new = ~found
        nk, nc = uk[new], bcnt[new]
        nf, nl = bmin[new].astype(np.int64), bmax[new].astype(np.int64)
        q = nc >= 2
        np.add.at(births, nf[q] - base, 1)
        np.add.at(deaths, nl[q] - base, 1)
        at = pos[new]
        t.keys = np.insert(t.keys, at, nk)
        t.first = np.insert(t.first, at, nf)
        t.last = np.insert(t.last, at, nl)
        t.count = np.insert(t.count, at, nc)

    # -- read -------------------------------------------------------------------------------
    def tracked(self, n: int) -> int:
        """N-grams of length n currently held (qualifying or not)."""
        self._flush()
        return len(self._tables[n - 1])

    def nbytes(self) -> int:
        """Bytes of the n-gram tables (buffers flushed first)."""
        self._flush()
        return sum(t.nbytes() for t in self._tables)

    def series(self, n: int) -> list[dict[str, Any]]:
        """Per-day active / births / deaths and rates for n, from the first day to the current."""
        self._flush()
        if self._base is None or self.current is None:
            return []
        width = self.current - self._base + 1
        self._counters(self._base, self.current)
        b = self._births[n - 1][:width]
        dd = self._deaths[n - 1][:width]
        active = np.cumsum(b) - np.r_[0, np.cumsum(dd)[:-1]]  # first <= t and not last < t
        settled_to = None if self.grace_days is None else self.current - self.grace_days
        out: list[dict[str, Any]] = []
        for i in range(width):
            a = int(active[i])
            prev_a = int(active[i - 1]) if i else 0
            out.append({
                "day": day_label(self._base + i), "active": a, "births": int(b[i]),
                "deaths": int(dd[i]),
                "birth_rate": b[i] / a if a else None,
                "death_rate": dd[i - 1] / prev_a if i and prev_a else None,
                "settled": settled_to is not None and self._base + i <= settled_to,
            })
        for r in out:
            for key in ("birth_rate", "death_rate"):
                if r[key] is not None:
                    r[key] = float(r[key])
        return out

    def snapshot(self) -> Snapshot:
        all_series = {n: self.series(n) for n in range(1, self.max_n + 1)}
        samples: list[Sample] = []
        report = self._report_day()
        births_now: list[float] = []
        for n, s in all_series.items():
            row = next((r for r in s if r["day"] == report), None)
            label = (("n", str(n)),)
            if row is not None and row["birth_rate"] is not None:
                births_now.append(row["birth_rate"])
                samples.append(Sample("ngram_birth_rate", row["birth_rate"], label,
                                      help="Share of the day's active n-grams born that day "
                                           "(latest settled day)"))
            if row is not None and row["death_rate"] is not None:
                samples.append(Sample("ngram_death_rate", row["death_rate"], label,
                                      help="Share of the previous day's active n-grams that "
                                           "died then (latest settled day)"))
            samples.append(Sample("ngrams_tracked", float(len(self._tables[n - 1])), label,
                                  help="N-grams held in memory"))
        if births_now and len(births_now) == self.max_n:
            samples.append(Sample("ngram_birth_rate_mean", float(np.mean(births_now)),
                                  help="Mean over n of the birth rate (latest settled day)"))
        samples += [
            Sample("ngram_texts_total", float(self.texts_total), kind="counter",
                   help="Texts tokenised"),
            Sample("ngram_occurrences_total", float(self.occurrences_total), kind="counter",
                   help="N-gram occurrences counted (all n)"),
            Sample("ngram_late_total", float(self.late_total), kind="counter",
                   help="Texts older than the lateness bound, skipped"),
            Sample("ngram_state_bytes", float(self.nbytes()), help="Bytes of n-gram tables"),
        ]
        tracked = sum(len(t) for t in self._tables)
        details = {"ngrams": {
            "report_day": report, "grace_days": self.grace_days,
            "lateness_days": self.lateness_days, "tokenizer": self.tokenizer,
            "lowercase": self.lowercase,
            "bytes_per_tracked_ngram": (self.nbytes() / tracked) if tracked else None,
            "tracked": {str(n): len(self._tables[n - 1]) for n in all_series},
            "mean_rates": {str(n): _means(s) for n, s in all_series.items()},
            "series": {str(n): s for n, s in all_series.items()},
        }}
        return Snapshot(samples=samples, details=details)

    def _report_day(self) -> str | None:
        if self.current is None:
            return None
        lag = self.grace_days if self.grace_days is not None else 1
        return day_label(self.current - lag)


def _means(series: list[dict[str, Any]]) -> dict[str, float | None]:
    """Mean over the days of the series of each rate (the paper's "constant rate")."""
    out: dict[str, float | None] = {}
    for key in ("birth_rate", "death_rate"):
        vals = [r[key] for r in series if r[key] is not None]
        out[key] = float(np.mean(vals)) if vals else None
    return out
