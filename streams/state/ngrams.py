"""Lexical turnover: daily n-gram birth and death rates, n = 1..5 (metrics.md A1), bounded.

Paper's rule. Per post (title and body; comments are not in A1): the tokens of
:mod:`streams.text` (URLs removed, lower case, nltk wordpunct tokens, punctuation runs kept as
nltk emits them), n-grams for n = 1..5 within one text. Keep n-grams whose global frequency
(occurrences, counted over every text) is at least 2. first(g) / last(g) = first / last day g
occurs; active set A_t = {g : first(g) <= t <= last(g)}; birth(t) = |{g in A_t : first(g) = t}|
/ |A_t|; death(t) = |{g in A_(t-1) : last(g) = t - 1}| / |A_(t-1)|. Every calendar day from the
first to the current one is a day of the series (a day without posts still has an active set).
Only posts the verbatim filter admitted (``item.admitted``) are counted.

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

Batch rule beside it (``batch=True``, what a replay of a finished archive turns on): a second,
grace-free lifecycle fed with the same posts (late ones included) keeps every n-gram's first
and last day for the whole run, so at the archive's end last(g) is final and its series is the
paper's batch rule exactly: details ``ngrams.series_batch`` (and ``mean_rates_batch``) beside
the live rule's ``ngrams.series``. It is not bounded (13 bytes per distinct n-gram of the run):
for archives, not for the live service.

Bounded memory. N-grams are the 64-bit ids of :meth:`streams.text.Text.ngram_ids` (chained there
from the (n-1)-gram ids of the same text; expected colliding pairs ~N^2 / 2^65 for N n-grams in a
table, 3e-6 for N = 10^7). Per n, a table sorted by id; the live rule's holds each id in 6 bytes
(its top 16 bits are its bucket, implied by its place: a table's 65,537 bucket offsets, 0.5 MB, are
all it adds) and one uint16 beside it: 8 bytes a tracked n-gram (``BYTES_PER_NGRAM``; it was 13,
then 10 with the whole id). The uint16 packs the last day relative to the oldest day that may still
change (8 bits: G + lateness <= 255, else the wide layout below), the first day as ``min(last -
first, lateness + 1)`` (a first day further back can never move: no post older than ``current -
lateness`` is counted, so it is kept clamped and never read back) and the count capped at 2 (1
bit); the batch rule's table keeps first and last day as uint16 days since 1970 (good to 2149) and
the count as uint8, 13 bytes. Merges and drops edit the tables in place (the buffers grow and
shrink by realloc; a merge moves the old elements right from the end, a drop moves the kept ones
left): no second copy of a table at any moment, only the buffered occurrences (8 bytes each), a
merge's 18 bytes a distinct batch id and chunk-sized temporaries. N-grams are dropped as soon as
they can no longer change: unseen for more than G days (singletons included), so the tables hold
only the n-grams of the last G + lateness + 1 days; the drop runs once per day change (nothing can
age out within a day). Occurrences are buffered and merged in vectorised batches (at each day
change, every ``flush_every`` occurrences and on reading): one sort of the buffered ids per n (one
day in the buffer: a compiled bucket sort of the ids alone, then one pass for the distinct ones),
one compiled walk over each sorted table and the sorted batch (:mod:`streams.state.ngram_kernels`:
the grace rule per n-gram, counters moved in place), one insertion in place; births and deaths are
kept as per-day counters (``births`` / ``deaths`` of a day in the series: qualifying lives whose
first / last day it is), so finished n-grams leave nothing but counts. A merge moves every element
of the tables, so the buffer holds at least an eighth of the tracked n-grams before one (8 bytes an
occurrence: the buffer adds at most ~8 % to the tables' memory); per post the cost is O(tokens x
max_n x log), with no Python loop over tokens or history. Repeated texts: a post whose exact text
(title and body as read, ``Item.raw``: its 16-byte blake2b digest, which the verbatim filter
made, :func:`streams.state.base.post_digest`) was already counted twice on its day changes nothing
(each of its n-grams already has that day in its life and a count of 2), so it is counted in the
totals and skipped without tokens' ids or n-gram work; the digests of the days that can still take
posts (lateness + 1 days) are kept, ~100 bytes a distinct text (20 MB at a 200k-post day).

A hard bound besides (``max_tracked``, default 100 M n-grams of all n: 0.8 GB of tables).
Most tracked n-grams are singletons (seen once: on real posts ~650 distinct n-grams a post,
most never seen again), and the grace rule keeps them G + lateness + 1 days: a Moltbook peak
day (200k posts) after normal days (50k) would hold ~400 M of them, 3.2 GB. When a merge leaves
more than ``max_tracked`` n-grams, the singletons of the oldest days are evicted, whole days
at a time, never the current day's (qualifying n-grams are never evicted: they carry the
counters). What that costs, exactly bounded: an evicted singleton holds no count (it never
qualified), so the series only changes if it recurs within the grace: it then starts a new
life there instead of qualifying from its first day. So each evicted n-gram moves at most one
birth (off its first day, possibly onto a later one) and one death, and removes itself from
the active sets of at most G days: the day's births, deaths and active counts are each off by
at most ``ngram_evicted_total`` (what ``evicted_through``, the last day evicted, bounds in
time). With nothing evicted the rule is exact (the tests hold both). The batch rule never
evicts.

Multi-worker: births and deaths need each n-gram's whole history in one place, and the per-day
counters are only additive between trackers that own disjoint n-grams. So either one reducer
consumes the posts of a single-partition topic, or the work is sharded by n-gram id and the
reducer adds the shards' per-day birth/death counters; the first is what is wired.

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> def post(d, text):
...     t = datetime(2026, 2, d, 12, tzinfo=timezone.utc)
...     return Item.of(PostEvent(id=f"post:{d}{text}", event_time=t, observed_at=t,
...                              post_id=text, author="a", content=text))
>>> tr = NgramTracker(max_n=2, grace_days=None)
>>> for item in (post(1, "the cat sat"), post(2, "The cat ran http://x.io"), post(3, "a dog ran")):
...     tr.update(item)
>>> s = tr.series(1)  # qualifying unigrams: the (1-2), cat (1-2), ran (2-3)
>>> [(r["day"], r["active"], r["births"], r["deaths"]) for r in s]
[('2026-02-01', 2, 2, 0), ('2026-02-02', 3, 1, 2), ('2026-02-03', 1, 0, 1)]
>>> [r["birth_rate"] for r in s], s[2]["death_rate"]
([1.0, 0.3333333333333333, 0.0], 0.6666666666666666)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import numpy as np

from streams.events import PostEvent
from streams.state import ngram_kernels
from streams.state.base import Item, Sample, Snapshot, post_digest

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BYTES_PER_NGRAM = 4 + 2 + 2  # the live tables' layout (the batch rule's: 8 + 2 + 2 + 1)
MAX_TRACKED = 100_000_000  # live n-grams held (all n): 0.8 GB of tables at most, see above
DAY = 86_400.0


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of one token list (the plain definition, used by tests as the reference)."""
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def day_index(t: float) -> int:
    """Whole UTC days since 1970-01-01 of unix time ``t``."""
    return int(t // DAY)


def day_label(index: int) -> str:
    return (_EPOCH + timedelta(days=index)).strftime("%Y-%m-%d")


class _WideTable:
    """Sorted ids with first/last day (uint16 days since 1970) and a count capped at 2, for
    one n: the grace-free batch rule's layout (any day may still be extended), 13 B an n-gram."""

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
        self.keys, self.first = _kept(self.keys, mask), _kept(self.first, mask)
        self.last, self.count = _kept(self.last, mask), _kept(self.count, mask)

    def merge(self, uk: np.ndarray, bmin: np.ndarray, bmax: np.ndarray, bcnt: np.ndarray,
              grace: int, births: np.ndarray, deaths: np.ndarray, base: int) -> None:
        """Fold distinct sorted ids (first day, last day, count) in (``grace`` < 0: none)."""
        pos, which = ngram_kernels.merge_wide(self.keys, self.first, self.last, self.count, uk,
                                              bmin, bmax, bcnt, grace, births, deaths, base)
        self.keys, self.first, self.last, self.count = _inserted(
            [self.keys, self.first, self.last, self.count],
            [uk[which], bmin[which], bmax[which], bcnt[which]], pos)

    def lasts(self) -> np.ndarray:
        return self.last.astype(np.int64)

    def counts(self) -> np.ndarray:
        return self.count


class _PackedTable:
    """The live grace rule's layout, 8 B an n-gram: sorted ids, each split into its top 16
    bits (its bucket, implicit: the bucket's entries lie between two of ``starts``, 65,537
    offsets, 0.5 MB a table once it holds any), the next 16 (``mid``) and the low 32 (``lo``),
    and one uint16 each (``meta``), ``last - origin`` (bits 0-7; every held n-gram was seen on
    or after ``origin``, the oldest day that may still be extended, moved on at each day
    change), ``min(last - first, lateness + 1)`` (bits 8-14) and count >= 2 (bit 15). A first
    day more than ``lateness`` before the last is kept clamped: no post can arrive before it
    any more (posts older than ``current - lateness`` are skipped), so it can never move and
    is never read back."""

    __slots__ = ("lo", "mid", "meta", "starts", "origin", "clamp")

    def __init__(self, clamp: int) -> None:
        self.lo = np.empty(0, np.uint32)
        self.mid = np.empty(0, np.uint16)
        self.meta = np.empty(0, np.uint16)
        self.starts = np.empty(0, np.int64)  # made at the first merge
        self.origin = 0
        self.clamp = clamp

    def __len__(self) -> int:
        return len(self.lo)

    def nbytes(self) -> int:
        return self.lo.nbytes + self.mid.nbytes + self.meta.nbytes + self.starts.nbytes

    def keep(self, mask: np.ndarray) -> None:
        columns = [_owned(c) for c in (self.lo, self.mid, self.meta)]
        kept = ngram_kernels.keep_packed(*columns, self.starts, mask)
        for c in columns:
            c.resize(kept, refcheck=False)
        self.lo, self.mid, self.meta = columns

    def rebase(self, origin: int) -> None:
        """Move ``origin`` on (every held n-gram's last day is on or after the new one)."""
        shift = origin - self.origin
        if shift > 0 and len(self.meta):
            self.meta -= np.uint16(shift)  # the low byte never borrows: last >= origin
        self.origin = origin

    def merge(self, uk: np.ndarray, bmin: np.ndarray, bmax: np.ndarray, bcnt: np.ndarray,
              grace: int, births: np.ndarray, deaths: np.ndarray, base: int) -> None:
        """Fold distinct sorted ids (first day, last day, count) in under the grace rule."""
        if not len(self.starts):
            self.starts = np.zeros(ngram_kernels.BUCKETS + 1, np.int64)
        pos, *values = ngram_kernels.merge_packed(self.lo, self.mid, self.meta, self.starts, uk,
                                                  bmin, bmax, bcnt, self.origin, self.clamp,
                                                  grace, births, deaths, base)
        if not len(pos):
            return
        n = len(self.lo)
        columns = [_owned(c) for c in (self.lo, self.mid, self.meta)]
        for c in columns:
            c.resize(n + len(pos), refcheck=False)
        ngram_kernels.spread_packed(*columns, n, pos, *values)
        self.lo, self.mid, self.meta = columns

    def lasts(self) -> np.ndarray:
        return (self.meta & 0xFF).astype(np.int64) + self.origin

    def counts(self) -> np.ndarray:
        return 1 + (self.meta >> 15)


_Table = _WideTable | _PackedTable


def _distinct(ids: list[np.ndarray], days: list[int]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ids of buffered occurrences with their first day, last day and count (<= 2)."""
    flat = np.concatenate(ids)
    if min(days) == max(days):  # the usual case: one day, so sort the ids alone
        keys, counts = ngram_kernels.sort_runs(flat)
        day = np.full(len(keys), days[0], np.int64)
        return keys, day, day, counts
    d = np.repeat(np.asarray(days, np.int64), [len(a) for a in ids])
    order = np.lexsort((d, flat))
    flat, d = flat[order], d[order]
    starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
    ends = np.r_[starts[1:], len(flat)]
    return flat[starts], d[starts], d[ends - 1], np.minimum(ends - starts, 2)


CHUNK = 1 << 20  # elements moved at a time by the in-place drops (:func:`_kept`)


def _owned(column: np.ndarray) -> np.ndarray:
    """``column`` itself if it owns a writable buffer (so it can be resized), else a copy
    (once: e.g. an array restored from a pickle)."""
    if column.flags.owndata and column.flags.writeable and column.base is None:
        return column
    return column.copy()


def _inserted(columns: list[np.ndarray], values: list[np.ndarray], pos: np.ndarray
              ) -> list[np.ndarray]:
    """The ``columns`` (of one length) with ``values`` inserted before their elements at
    ``pos`` (ascending, as ``searchsorted`` gives them), in place: each buffer grows by realloc
    (no second copy of the table) and the old elements move right from the end, in one
    compiled pass a column (:func:`~streams.state.ngram_kernels.spread`)."""
    n, k = len(columns[0]), len(pos)
    if not k:
        return columns
    columns = [_owned(c) for c in columns]
    for c, v in zip(columns, values, strict=True):
        c.resize(n + k, refcheck=False)
        ngram_kernels.spread(c, n, pos, v.astype(c.dtype, copy=False))
    return columns


def _kept(column: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``column[mask]`` in place, a chunk at a time (writes stay below the chunk read), then
    the buffer shrinks by realloc: no second copy of the table."""
    column = _owned(column)
    w = 0
    for a in range(0, len(column), CHUNK):
        sel = column[a:a + CHUNK][mask[a:a + CHUNK]]
        column[w:w + len(sel)] = sel
        w += len(sel)
    column.resize(w, refcheck=False)
    return column


class _Lifecycle:
    """First/last day per n-gram (one table per n) and per-day birth/death counters, under a
    grace rule (None: the paper's batch rule, nothing ever dropped)."""

    def __init__(self, max_n: int, grace_days: int | None, lateness_days: int = 0) -> None:
        self.grace_days = grace_days
        packed = grace_days is not None and grace_days + lateness_days <= 0xFF
        self.tables: list[_Table] = [
            _PackedTable(lateness_days + 1) if packed else _WideTable() for _ in range(max_n)]
        self.base: int | None = None  # day index of position 0 of the counters
        self.births = np.zeros((max_n, 0), np.int64)  # qualifying lives with first = day
        self.deaths = np.zeros((max_n, 0), np.int64)  # qualifying lives with last = day

    def evict(self, keep_at_most: int, current: int) -> tuple[int, int | None]:
        """Drop the singletons (count 1) of the oldest days until at most ``keep_at_most``
        n-grams are held, whole days at a time and never the current day's; returns how many
        were dropped and the last day dropped (None: none)."""
        held = sum(len(t) for t in self.tables)
        if held <= keep_at_most:
            return 0, None
        days = np.concatenate([t.lasts()[t.counts() < 2] for t in self.tables])
        days = days[days < current]
        if not len(days):
            return 0, None
        counts = np.bincount(days - days.min())
        gone = np.cumsum(counts)
        # the fewest oldest days whose singletons bring the tables under the bound
        k = min(int(np.searchsorted(gone, held - keep_at_most)), len(gone) - 1)
        cut = int(days.min()) + k  # singletons last seen on or before this day go
        dropped = int(gone[k])
        for t in self.tables:
            if len(t):
                t.keep((t.counts() >= 2) | (t.lasts() > cut))
        return dropped, cut

    def drop_done(self, watermark: int) -> None:
        """Drop n-grams that can no longer change: last + G < watermark."""
        if self.grace_days is None:
            return
        oldest = watermark - self.grace_days  # the oldest last day that may still change
        for t in self.tables:
            if len(t):
                t.keep(t.lasts() >= oldest)
            if isinstance(t, _PackedTable):
                t.rebase(oldest)

    def cover(self, lo: int, hi: int) -> None:
        """Make the per-day counters cover day indices lo..hi."""
        if self.base is None:
            self.base = lo
        width = self.births.shape[1]
        left = max(0, self.base - lo)
        right = max(0, hi - (self.base + width - 1))
        if left or right:
            pad = ((0, 0), (left, right))
            self.births = np.pad(self.births, pad)
            self.deaths = np.pad(self.deaths, pad)
            self.base -= left

    def merge(self, n: int, uk: np.ndarray, bmin: np.ndarray, bmax: np.ndarray,
              bcnt: np.ndarray) -> None:
        """Fold distinct ids (sorted) with their batch first/last day and count into table n:
        an existing n-gram continues its life, or starts a new one after a gap > G; only the
        changes of qualifying lives' first and last days touch the counters (one compiled
        walk over the table and the batch)."""
        self.cover(int(bmin.min()), int(bmax.max()))
        assert self.base is not None
        grace = -1 if self.grace_days is None else self.grace_days
        self.tables[n].merge(uk, bmin, bmax, bcnt, grace, self.births[n], self.deaths[n],
                             self.base)

    def nbytes(self) -> int:
        return sum(t.nbytes() for t in self.tables)

    def series(self, n: int, current: int, settled_to: int | None) -> list[dict[str, Any]]:
        """Per-day active / births / deaths and rates for n, from the first day to current."""
        if self.base is None:
            return []
        width = current - self.base + 1
        self.cover(self.base, current)
        b = self.births[n - 1][:width]
        dd = self.deaths[n - 1][:width]
        active = np.cumsum(b) - np.r_[0, np.cumsum(dd)[:-1]]  # first <= t and not last < t
        out: list[dict[str, Any]] = []
        for i in range(width):
            a = int(active[i])
            prev_a = int(active[i - 1]) if i else 0
            out.append({
                "day": day_label(self.base + i), "active": a, "births": int(b[i]),
                "deaths": int(dd[i]),
                "birth_rate": float(b[i] / a) if a else None,
                "death_rate": float(dd[i - 1] / prev_a) if i and prev_a else None,
                "settled": settled_to is not None and self.base + i <= settled_to,
            })
        return out


class NgramTracker:
    """Incremental first/last-seen per n-gram and daily birth/death rates, n = 1..max_n.

    ``batch``: also keep the grace-free lifecycle (the paper's batch rule, unbounded; replay).
    """

    kinds: ClassVar[tuple[type, ...]] = (PostEvent,)  # the event kinds ``update`` reads

    def __init__(self, max_n: int = 5, grace_days: int | None = 7, lateness_days: int = 1,
                 min_frequency: int = 2, flush_every: int = 1_000_000,
                 batch: bool = False, max_tracked: int | None = MAX_TRACKED) -> None:
        if grace_days is not None and grace_days < lateness_days:
            raise ValueError("grace_days must be >= lateness_days")
        if min_frequency != 2:
            raise ValueError("only the paper's global frequency >= 2 is supported")
        self.max_n = max_n
        self.grace_days = grace_days
        self.lateness_days = lateness_days
        self.flush_every = flush_every
        self.max_tracked = None if grace_days is None else max_tracked  # batch: never evicts
        self._live = _Lifecycle(max_n, grace_days, lateness_days)
        self._batch = _Lifecycle(max_n, None) if batch and grace_days is not None else None
        # buffered occurrences: per n the id arrays of each text, and each text's day
        self._buf: list[list[np.ndarray]] = [[] for _ in range(max_n)]
        self._buf_days: list[int] = []
        self._late: list[list[np.ndarray]] = [[] for _ in range(max_n)]  # batch rule only
        self._late_days: list[int] = []
        self._buffered = 0
        self._flush_at = flush_every
        # texts seen on each day that can still take posts (current - lateness .. current):
        # 16-byte digest of the text (post_digest) -> times seen (1, or 2: a third copy
        # changes nothing)
        self._seen: dict[int, dict[bytes, int]] = {}
        self.current: int | None = None
        self._first_day: int | None = None
        self.texts_total = 0
        self.occurrences_total = 0
        self.late_total = 0
        self.evicted_total = 0
        self.evicted_through: int | None = None  # the last day whose singletons were evicted

    @property
    def batch(self) -> bool:
        return self._batch is not None or self.grace_days is None

    # -- ingest -----------------------------------------------------------------------------
    def update(self, item: Item) -> None:
        """Add one admitted post (its title and body) at its event time."""
        if not item.admitted or item.text is None or type(item.event) is not PostEvent:
            return
        d = int(item.t // DAY)  # day_index, inline: a call a post saved
        if not 0 <= d < 1 << 16:
            raise ValueError(f"event day {d} outside 1970..2149 (uint16 day storage)")
        if self.current is None or d > self.current:
            self._advance(d)
        text = item.text
        late = self.grace_days is not None and d < self.current - self.lateness_days
        if late:
            self.late_total += 1
            if self._batch is None:
                return
            buf, days = self._late, self._late_days
        else:
            self.texts_total += 1
            # a text already seen twice this day: its n-grams all have count 2 and this day
            # within their life, so a third copy changes nothing (and costs no n-gram work)
            seen = self._seen.get(d)
            if seen is None:
                seen = self._seen[d] = {}
            key = post_digest(item)  # of the post's text: equal texts, equal tokens
            times = seen.get(key, 0)
            if times >= 2:  # its occurrences: sum of max(0, k - n) over n < max_n, closed
                k = len(text.ids)
                m = min(k, self.max_n)
                self.occurrences_total += m * k - m * (m - 1) // 2
                return
            seen[key] = times + 1
            buf, days = self._buf, self._buf_days
        size = 0
        for n in range(self.max_n):
            g = text.ngram_ids(n + 1)
            if not len(g):
                break
            buf[n].append(g)
            size += len(g)
        if not size:
            return
        days.append(d)
        if not late:
            self.occurrences_total += size
        self._buffered += size
        if self._buffered >= self._flush_at:
            self._flush()

    def expire(self, now: float) -> None:
        """Advance event time to ``now``; n-grams that are done are dropped at a day change."""
        d = day_index(now)
        if self.current is None or d > self.current:
            self._advance(d)

    def _advance(self, day: int) -> None:
        self._flush()
        self.current = day
        if self._first_day is None:
            self._first_day = day
        self._live.drop_done(day - self.lateness_days)
        for old in [k for k in self._seen if k < day - self.lateness_days]:
            del self._seen[old]  # no post of that day is counted any more
        self._bound()

    def _bound(self) -> None:
        """Evict old singletons while the live tables hold more than ``max_tracked``."""
        if self.max_tracked is not None and self.current is not None:
            dropped, cut = self._live.evict(self.max_tracked, self.current)
            if dropped:
                self.evicted_total += dropped
                self.evicted_through = cut

    # -- merge ------------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self._buffered:
            return
        for buf, days, lifecycles in ((self._buf, self._buf_days, (self._live, self._batch)),
                                      (self._late, self._late_days, (self._batch,))):
            if not days:
                continue
            lens = [len(a) for a in buf[0]]  # tokens of each text: it has n-grams if > n - 1
            for n in range(self.max_n):
                if buf[n]:
                    d = days if len(buf[n]) == len(days) else [
                        day for day, k in zip(days, lens, strict=True) if k > n]
                    merged = _distinct(buf[n], d)
                    for lc in lifecycles:
                        if lc is not None:
                            lc.merge(n, *merged)
            for b in buf:
                b.clear()
            days.clear()
        self._buffered = 0
        self._bound()
        # a merge rewrites the tables (O(tracked)): buffer at least an eighth of them first,
        # so that rewriting costs O(1) an occurrence however many n-grams the window holds
        held = sum(len(t) for t in self._live.tables)
        self._flush_at = max(self.flush_every, held // 8)

    # -- read -------------------------------------------------------------------------------
    def tracked(self, n: int) -> int:
        """N-grams of length n currently held by the live rule (qualifying or not)."""
        self._flush()
        return len(self._live.tables[n - 1])

    def nbytes(self) -> int:
        """Bytes of the n-gram tables (buffers flushed first), batch tables included."""
        self._flush()
        return self._live.nbytes() + (self._batch.nbytes() if self._batch else 0)

    def series(self, n: int) -> list[dict[str, Any]]:
        """The live grace rule's per-day series for n, from the first day to the current."""
        self._flush()
        if self.current is None:
            return []
        settled = None if self.grace_days is None else self.current - self.grace_days
        return self._live.series(n, self.current, settled)

    def series_batch(self, n: int) -> list[dict[str, Any]]:
        """The paper's batch rule (last(g) = the last day seen so far, final at the end of a
        finished archive); None unless the tracker keeps it (``batch=True``)."""
        if self.grace_days is None:
            return self.series(n)
        if self._batch is None:
            raise ValueError("NgramTracker(batch=True) keeps the batch rule")
        self._flush()
        return [] if self.current is None else self._batch.series(n, self.current, None)

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
            samples.append(Sample("ngrams_tracked", float(len(self._live.tables[n - 1])),
                                  label, help="N-grams held in memory"))
        if births_now and len(births_now) == self.max_n:
            samples.append(Sample("ngram_birth_rate_mean", float(np.mean(births_now)),
                                  help="Mean over n of the birth rate (latest settled day)"))
        samples += [
            Sample("ngram_texts_total", float(self.texts_total), kind="counter",
                   help="Posts counted"),
            Sample("ngram_occurrences_total", float(self.occurrences_total), kind="counter",
                   help="N-gram occurrences counted (all n)"),
            Sample("ngram_late_total", float(self.late_total), kind="counter",
                   help="Posts older than the lateness bound, skipped by the live rule"),
            Sample("ngram_state_bytes", float(self.nbytes()), help="Bytes of n-gram tables"),
            Sample("ngram_evicted_total", float(self.evicted_total), kind="counter",
                   help="Singleton n-grams evicted by the live rule's max_tracked bound"),
        ]
        tracked = sum(len(t) for t in self._live.tables)
        details: dict[str, Any] = {
            "report_day": report, "grace_days": self.grace_days,
            "lateness_days": self.lateness_days, "max_tracked": self.max_tracked,
            "evicted_total": self.evicted_total, "evicted_through":
                None if self.evicted_through is None else day_label(self.evicted_through),
            "bytes_per_tracked_ngram": (self._live.nbytes() / tracked) if tracked else None,
            "tracked": {str(n): len(self._live.tables[n - 1]) for n in all_series},
            "mean_rates": {str(n): _means(s) for n, s in all_series.items()},
            "series": {str(n): s for n, s in all_series.items()},
        }
        if self.batch:
            batch = {n: self.series_batch(n) for n in all_series}
            details["series_batch"] = {str(n): s for n, s in batch.items()}
            details["mean_rates_batch"] = {str(n): _means(s) for n, s in batch.items()}
        return Snapshot(samples=samples, details={"ngrams": details})

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
