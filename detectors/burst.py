"""Lexical burst detector: a new phrase adopted by many distinct agents within hours.

The phrases are the word n-grams of posts and comments (word 3-grams by default: the ids of
``item.text.word_ngram_ids(n)``, rolled by the flush kernel from the one tokeniser's word
tokens, lower case, URLs removed; an n-gram over half stop-words is never reported, as in the
cascade definition of metrics B). An n-gram is *born* the first time it is seen after the
warm-up (``warmup_s`` and ``warmup_texts``; anything seen during the warm-up, or within the last
``memory_s``, is old). It bursts when, within ``max_age_s`` of its birth, at least
``min_adopters`` distinct agents used it, at a growth rate of at least ``min_rate_per_h``
adopters an hour since birth, in at least ``min_text_share`` of all texts since its birth (a
common phrase of a busy hour is not a burst), in at least ``min_threads`` threads (a phrase
repeated inside one hot thread is that thread's business, as for the surge detector: on the
real-text background, resampled real threads whose bots all answer "TIL too, thanks" raised 2 to
5 such bursts a seed without this bar). Whether the adopters paste near-identical texts or weave
the phrase into varied posts of their own, it is the same burst (issue 10 item 7); the surge
detector says separately whether a campaign is coordinated. All n-grams of one burst (sharing a
word that is not a stop-word, or most of their adopters) are one incident, keyed by the
earliest-born n-gram, which stays tracked past ``max_age_s`` while it keeps gaining adopters
(none for ``quiet_s`` ends it). The evidence carries the readable phrase (recovered from the
text that made it a candidate).

Cost: texts are buffered and handled in one compiled pass (:mod:`detectors.burst_kernels`)
once the buffer spans ``flush_s`` (30 s) of event time or holds ``batch`` texts (findings
therefore come at most ``flush_s`` late; batching changes nothing else: the same result as one
text at a time, tested). A pass reads the batch's word n-gram ids in text order, looks each
distinct one up once in an open-addressing hash table over one NumPy array of packed records
(n-gram id -> time last seen, record of the text that gave it birth, young flag) and writes
it back; the same pass decides which uses promote a single (the record's age, the agents, the
stop-words by word id) and which adopt, so Python only applies them. A verbatim repeat of a
recent text by another agent promotes all its n-grams (the real-text benchmark, which
resamples real texts whole, is the worst case: some 0.7 promotions an event); a promoted
n-gram is kept unbuilt (its record, the promoting text's words and sighting, shared by all
that text's n-grams, and its position) until a third use or a judgement needs it in full,
and its expiry is one sorted array a flush. Old-ness is exact: an n-gram is
old when last seen at most ``memory_s`` before; entries unseen for ``memory_s`` are dropped when
the table is rebuilt (when it would pass half full), a single's age is checked exactly when it
is used again.

The evidence (:mod:`detectors.evidence`): exemplars and near-duplicate clusters of the texts of
the first ``evidence_texts`` adopters after the first (the first's text is not kept: its
record holds its time, author and id, and it leads the timeline), and the timeline of every
adopter's first use; rebuilt at most once a minute of event time.

Memory: the distinct n-grams of ``memory_s`` (20 bytes a slot, 1.5 to 2.25 slots an n-gram
held: the slots grow by half when the n-grams held would pass 2/3 of them; the table is rebuilt,
the n-grams unseen for ``memory_s`` dropped, when those held would pass ``2 ** (bits - 1)``,
to under ``2 ** (bits - 2)``, and once a ``memory_s``; a checkpoint pickles the used slots
only, 20 bytes an n-gram; over ``max_seen`` n-grams the least recently seen go first, ties by
id, the only departure from the definition),
one record per text within ``max_age_s`` that gave birth to n-grams, and the adopters (at most
``max_adopters``) and the first ``evidence_texts`` adopters' texts (400 characters each) of
the young n-grams with three or more uses (with two: a 3-tuple, beside one tuple a promoting
text). Items without an author count as
texts and make n-grams old, but adopt nothing.

>>> from streams.state.base import Item
>>> from streams.text import Text, token_ids
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
from operator import itemgetter
from typing import ClassVar, NamedTuple

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from detectors import burst_kernels as kernels
from detectors.alert import Finding, Severity
from detectors.evidence import (
    DEFAULT,
    EvidenceCache,
    EvidenceConfig,
    Sighting,
    build_evidence,
    snippet,
)
from streams.events import CommentEvent, PostEvent
from streams.state.base import Item, Sample, Snapshot
from streams.text import Text, token_ids

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS)
_TEXTS = (PostEvent, CommentEvent)  # the events with a text (a tuple: isinstance is faster)
_STOP_IDS = np.sort(token_ids(sorted(STOP_WORDS)))  # their word ids, for the kernel


@dataclass(frozen=True, slots=True)
class BurstConfig:
    n: int = 3
    min_adopters: int = 12
    min_threads: int = 5
    min_rate_per_h: float = 6.0
    max_age_s: float = 3 * 3600.0
    quiet_s: float = 1800.0
    min_text_share: float = 0.03
    memory_s: float = 24 * 3600.0
    warmup_s: float = 3600.0
    warmup_texts: int = 1000
    max_seen: int = 20_000_000
    max_adopters: int = 500
    evidence_texts: int = 20
    batch: int = 4096
    flush_s: float = 30.0
    evidence: EvidenceConfig = DEFAULT  # exemplars, clusters, timeline (detectors.evidence)


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
    texts: list[Sighting] = field(default_factory=list)  # the first adopters' texts (evidence)
    evidence: EvidenceCache | None = None  # made at its first finding


# a text that gave birth to n-grams: (t, author, post id, texts before it, thread)
_Record = tuple[float, str | None, str, int, str]
# a text that promoted singles: (t, author, thread, its words, its sighting)
_Promoter = tuple[float, str, str, list[str], Sighting]
# a young n-gram used by its first two agents only, not built yet (most never are): its
# record, the text that promoted it and the n-gram's position in that text's words
_Single = tuple[_Record, _Promoter, int]


class _SeenTable:
    """Open-addressing hash table (linear probing) over NumPy arrays: n-gram id -> time last
    seen, record of the text that gave it birth (-1: none, or never a burst) and young flag
    (``ry``: twice the record plus the flag, 32 bits; the detector keeps record numbers under
    ``2 ** 30``). The three are the fields of one packed 20-byte record a slot (``keys``,
    ``last`` and ``ry`` are views of them): a look-up reads one place of a table far larger
    than the cache, not three. Lookups and inserts are compiled
    (:mod:`detectors.burst_kernels`).

    Two sizes: ``2 ** (bits - 1)`` keys is the capacity that decides when the table is rebuilt
    (dead entries, unseen for ``memory_s``, dropped: over ``max_seen`` keys which go depends on
    when, so that schedule is the definition's); the slots are only as many as the keys held
    need (``cap``, at most 2/3 of them: a load of 2/3 at most), grown with every key kept as
    keys come, up to 3/4 of ``2 ** bits``. Pickled, it keeps only its used slots (a checkpoint
    holds 20 bytes an n-gram): which slot holds a key changes no outcome."""

    _FIELDS = ("keys", "last", "ry")
    _SLOT = np.dtype([("keys", np.uint64), ("last", np.float64),
                      ("ry", np.int32)])  # packed: fields unaligned, 20 bytes
    _MIN_SLOTS = 3072
    _ROOM = 2.25  # slots a key held when (re)sized: a load of 4/9, grown by half at 2/3

    def __init__(self, bits: int = 12) -> None:
        self._alloc(bits, 0)
        self.count = 0

    def _alloc(self, bits: int, keys: int) -> None:
        """Slots for ``keys`` keys and more (``cap`` in all), empty."""
        self.bits = bits
        m = min(3 << (bits - 2), max(self._MIN_SLOTS, int(self._ROOM * keys)))
        self.cap = min(1 << (bits - 1), 2 * m // 3)
        # zeroed pages the OS maps on first touch: an empty slot's fields are never read (an
        # insert writes them), bar the young flag, which starts False
        self.slots = np.zeros(m, self._SLOT)
        self.keys = self.slots["keys"]  # 0: empty (id 0 is stored as 1)
        self.last = self.slots["last"]
        self.ry = self.slots["ry"]

    def __getstate__(self) -> dict[str, object]:
        used = self.keys != 0
        return {"bits": self.bits, **{f: getattr(self, f)[used] for f in self._FIELDS}}

    def __setstate__(self, state: dict[str, object]) -> None:
        bits, keys = state["bits"], state["keys"]
        assert isinstance(bits, int) and isinstance(keys, np.ndarray)
        self._alloc(bits, len(keys))
        self.count = 0
        self._put(*(state[f] for f in self._FIELDS))  # type: ignore[arg-type]

    def _put(self, keys: np.ndarray, last: np.ndarray, ry: np.ndarray) -> None:
        kernels.put(self.keys, self.last, self.ry, keys, last, ry)
        self.count += len(keys)

    def young(self, slots: np.ndarray) -> np.ndarray:
        """The young flags of ``slots``."""
        return (self.ry[slots] & 1).astype(bool)

    def unflag(self, slots: np.ndarray) -> None:
        """No longer young."""
        self.ry[slots] &= -2

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Slot of each (non-zero) key, -1 when absent."""
        return kernels.find(self.keys, keys)

    def insert(self, keys: np.ndarray) -> np.ndarray:
        """Slots for distinct keys known to be absent (the caller keeps them within
        ``cap``)."""
        return self.locate(keys)[0]

    def locate(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slot of each distinct non-zero key, inserting the absent ones (the caller keeps them
        within ``cap``), and which were absent."""
        out, absent = kernels.locate(self.keys, keys)
        self.count += int(absent.sum())
        return out, absent

    def reserve(self, extra: int, now: float, memory_s: float, max_seen: int,
                force: bool = False) -> bool:
        """Room for ``extra`` new keys (within ``cap``): past ``2 ** (bits - 1)`` keys in all
        (or forced), a rebuild that drops the dead (unseen within ``memory_s`` of ``now``) and,
        over ``max_seen``, the least recently seen, and grows if need be; else more slots if
        need be, every key kept. Whether the table was rebuilt."""
        if 2 * (self.count + extra) <= 1 << self.bits and not force:
            if self.count + extra > self.cap:
                self._move(self.bits, self.count + extra, -np.inf)
            return False
        since = now - memory_s
        live = int(np.count_nonzero((self.keys != 0) & (self.last >= since)))
        # room for under 2 ** (bits - 2) keys after the rebuild
        bits = max(12, int(4 * (min(live, max_seen) + extra)).bit_length())
        if live <= max_seen:
            self._move(bits, live + extra, since)
            return True
        kept = self.slots[(self.keys != 0) & (self.last >= since)]
        # the most recently seen (ties by key: layout-independent)
        kept = kept[np.lexsort((kept["keys"], kept["last"]))[len(kept) - max_seen:]]
        self._alloc(bits, len(kept) + extra)
        self.count = 0
        self._put(*(kept[f] for f in self._FIELDS))
        return True

    def _move(self, bits: int, keys: int, since: float) -> None:
        """Slots for ``keys`` keys and more, holding those of the old slots last seen at
        ``since`` or later, moved across in one compiled pass in slot order (no copy of them
        between)."""
        old = self.keys, self.last, self.ry
        self._alloc(bits, keys)
        self.count = kernels.rehash(*old, since, self.keys, self.last, self.ry)

    def nbytes(self) -> int:
        return self.slots.nbytes


class _Text(NamedTuple):
    t: float
    author: str | None
    event: PostEvent | CommentEvent
    grams: int  # its n-grams: words - n + 1
    text: Text
    warm: bool  # in the warm-up: its n-grams are only seen
    texts_before: int

    @property
    def post(self) -> str:
        e = self.event
        return f"{e.post_id}/{e.comment_id}" if isinstance(e, CommentEvent) else e.post_id

    @property
    def thread(self) -> str:
        return self.event.post_id

    def sighting(self, chars: int) -> Sighting:  # the start of the text (evidence)
        return Sighting(self.t, self.author, self.post, snippet(self.event.text, chars))


_T, _GRAMS, _WARM = itemgetter(0), itemgetter(3), itemgetter(5)  # fields of a _Text
_new_text = tuple.__new__


class BurstDetector:
    type = "burst"
    kinds: ClassVar[tuple[type, ...]] = _TEXTS  # what ``update`` reads
    _rec_limit = 1 << 30  # record numbers stay under it (the seen table keeps 30 bits)

    def __init__(self, config: BurstConfig | None = None) -> None:
        self.cfg = config or BurstConfig()
        self._table = _SeenTable()
        # (t, author, post id, texts before it, thread) of the texts that gave birth to n-grams, in
        # order; a record's number is its position plus the number of records dropped
        self._records: deque[_Record] = deque()
        self._record_base = 0
        # the records' times and author numbers (-1: none) from record number _arr_base on
        self._rec_t = np.zeros(1024, np.float64)
        self._rec_a = np.zeros(1024, np.int64)
        self._arr_base = 0
        self._author_no: dict[str, int] = {}
        self._buf: list[_Text] = []
        self._swept = -np.inf
        self._young: dict[int, _Young | _Single] = {}
        self._young_due: list[tuple[float, int]] = []  # heap: (when to re-check, n-gram)
        # the singles' due times by flush (heap: next due, flush number, dues sorted, n-grams)
        self._singles_due: list[tuple[float, int, np.ndarray, np.ndarray]] = []
        self._flushes = 0
        self._orphans = np.zeros(0, np.uint64)  # young, not flagged in the table (sorted)
        self._start: float | None = None
        self._texts = 0
        self._anonymous = 0
        self._reported: dict[int, float] = {}
        self._dirty: set[int] = set()

    def update(self, item: Item) -> None:
        if item.text is None or not isinstance(item.event, _TEXTS):
            return
        cfg, t = self.cfg, item.t
        if self._start is None:
            self._start = t
        self._texts += 1
        if item.author is None:
            self._anonymous += 1
        grams = len(item.text.word_ids) - cfg.n + 1
        if grams <= 0:
            return
        warm = not (t - self._start >= cfg.warmup_s and self._texts > cfg.warmup_texts)
        # (tuple.__new__: a NamedTuple's own __new__ is a Python function, a frame a text)
        self._buf.append(_new_text(_Text, (t, item.author, item.event, grams, item.text, warm,
                                           self._texts - 1)))
        if len(self._buf) >= self.cfg.batch:
            self._flush()

    def _flush(self) -> None:
        """The buffered texts in one compiled pass (module doc): the same result as one text at
        a time, in order."""
        buf, self._buf = self._buf, []
        if not buf:
            return
        cfg, table = self.cfg, self._table
        n = len(buf)
        if self._record_base + len(self._records) + n >= self._rec_limit:
            self._renumber()
            assert self._record_base + len(self._records) + n < self._rec_limit, \
                "more records within max_age_s than record numbers"
        lens = np.fromiter(map(_GRAMS, buf), np.int64, n)
        times = np.fromiter(map(_T, buf), np.float64, n)
        warm = np.fromiter(map(_WARM, buf), bool, n)
        # the authors' record numbers (-2: none yet), and who is who within the batch (a
        # record born here has no number yet)
        number, batch = self._author_no, {}
        authors = np.fromiter((-1 if b.author is None else number.get(b.author, -2)
                               for b in buf), np.int64, n)
        who = np.fromiter((-1 if b.author is None else batch.setdefault(b.author, len(batch))
                           for b in buf), np.int64, n)
        words = np.concatenate([b.text.word_ids for b in buf]) if n > 1 else \
            buf[0].text.word_ids
        while True:
            distinct, inserted, births, keys, promote, texts, pos, recs = kernels.flush(
                lens, times, warm, authors, who, words, _STOP_IDS, cfg.n,
                table.keys, table.last, table.ry, table.cap, table.count,
                cfg.memory_s, self._record_base, self._record_base + len(self._records),
                self._rec_t, self._rec_a, self._arr_base, cfg.max_age_s, self._orphans)
            if inserted >= 0:
                break
            if table.reserve(distinct, float(times.min()), cfg.memory_s, cfg.max_seen):
                self._find_orphans()
        table.count += inserted
        for i in births.tolist():
            self._add_record(buf[i])
        if not len(keys):
            return
        sights: dict[int, Sighting] = {}  # one per text, shared by all its n-grams

        def sighting(i: int) -> Sighting:
            s = sights.get(i)
            if s is None:
                s = sights[i] = buf[i].sighting(cfg.evidence.stored_chars)
            return s

        young, records, base, dirty = self._young, self._records, self._record_base, self._dirty
        singles: list[int] = []
        born: list[float] = []
        # a single's two threads at most: with min_threads over 2 it cannot newly qualify
        judged = cfg.min_threads <= 2
        max_adopters, evidence_texts = cfg.max_adopters, cfg.evidence_texts
        by_i, r_no = -1, -1  # the last promoter and record met (a text's n-grams come in a row)
        by: _Promoter
        r: _Record
        # the kernel's actions, in text order: promotions of singles (kept unbuilt), adoptions
        for g, pr, i, p, rc in zip(keys.tolist(), promote.tolist(), texts.tolist(),
                                   pos.tolist(), recs.tolist(), strict=True):
            if pr:
                if judged:
                    dirty.add(g)
                if i != by_i:
                    b, by_i = buf[i], i
                    by = (b.t, b.author, b.thread, b.text.words,  # type: ignore[assignment]
                          sighting(i))
                if rc != r_no:
                    r, r_no = records[rc - base], rc
                young[g] = (r, by, p)
                singles.append(g)
                born.append(r[0])
                continue
            dirty.add(g)
            b = buf[i]
            y = young[g]
            if type(y) is tuple:
                y = self._built(g, y)
            y.uses += 1
            if b.author is not None and b.author not in y.adopters \
                    and len(y.adopters) < max_adopters:
                y.adopters[b.author] = b.t
                y.posts.append(sighting(i).item_id)
                y.threads.add(b.thread)
                if len(y.texts) < evidence_texts:
                    y.texts.append(sighting(i))
        if singles:  # due max_age after birth, in one heap entry
            at = np.array(born) + cfg.max_age_s
            order = np.argsort(at, kind="stable")
            self._flushes += 1
            heapq.heappush(self._singles_due, (float(at[order[0]]), self._flushes, at[order],
                                               np.array(singles, np.uint64)[order]))

    def _built(self, g: int, single: _Single) -> _Young:
        """A young n-gram kept unbuilt, built (in its place) as its promotion made it."""
        (born, first, post, texts_before, thread), (t, author, by_thread, words, seen), p = single
        adopters = {first: born} if first is not None else {}
        adopters[author] = t
        y = self._young[g] = _Young(" ".join(words[p:p + self.cfg.n]), born, texts_before, 2,
                                    adopters, [post, seen.item_id], {thread, by_thread}, [seen])
        return y

    def _find_orphans(self) -> None:
        """The young n-grams the seen table does not flag (dropped by a rebuild, or seen again
        since), sorted, for the kernel: they adopt, never promote."""
        ids = np.fromiter(self._young, np.uint64, len(self._young))
        at = self._table.find(ids)
        flagged = np.zeros(len(ids), bool)
        flagged[at >= 0] = self._table.young(at[at >= 0])
        self._orphans = np.sort(ids[~flagged])

    def _add_record(self, b: _Text) -> None:
        n = self._record_base + len(self._records) - self._arr_base
        if n >= len(self._rec_t):
            self._rec_t = np.resize(self._rec_t, 2 * n)
            self._rec_a = np.resize(self._rec_a, 2 * n)
        self._rec_t[n] = b.t
        if b.author is None:
            self._rec_a[n] = -1
        else:
            self._rec_a[n] = self._author_no.setdefault(b.author, len(self._author_no))
        self._records.append((b.t, b.author, b.post, b.texts_before, b.thread))

    def _due(self, now: float) -> None:
        """Flush the buffer once it spans ``flush_s`` of event time (or is full)."""
        if self._buf and now - self._buf[0].t >= self.cfg.flush_s:
            self._flush()

    def expire(self, now: float) -> None:
        cfg = self.cfg
        if (self._young_due and self._young_due[0][0] < now) or \
                (self._singles_due and self._singles_due[0][0] < now):
            self._flush()  # the young due now take their buffered uses first
        else:
            self._due(now)
        if now - self._swept >= cfg.memory_s:  # once a memory_s: the dead go, the table shrinks
            self._swept = now
            self._flush()  # the buffered texts see the table as it was
            self._table.reserve(0, now, cfg.memory_s, cfg.max_seen, force=True)
            self._find_orphans()
        while self._records and now - self._records[0][0] > cfg.max_age_s:
            self._records.popleft()
            self._record_base += 1
        if self._record_base - self._arr_base > max(1024, len(self._records)):
            self._compact_records()
        # past max_age an n-gram is no longer young, unless its open burst still spreads
        due: list[int] = []
        while self._young_due and self._young_due[0][0] < now:
            due.append(heapq.heappop(self._young_due)[1])
        while self._singles_due and self._singles_due[0][0] < now:
            _, flush, at, ids = heapq.heappop(self._singles_due)
            k = int(np.searchsorted(at, now))  # those due before now
            due += ids[:k].tolist()
            if k < len(at):
                heapq.heappush(self._singles_due, (float(at[k]), flush, at[k:], ids[k:]))
        gone: list[int] = []
        for g in due:  # (a re-check is due after now: none comes back in this loop)
            y = self._young.get(g)
            if y is None:
                continue
            last = max(y.adopters.values(), default=y.born) if g in self._reported else 0.0
            if g in self._reported and now - last <= cfg.quiet_s and now - y.born <= cfg.memory_s:
                heapq.heappush(self._young_due, (min(last + cfg.quiet_s, y.born + cfg.memory_s)
                                                 + 1.0, g))
            else:
                del self._young[g]
                gone.append(g)
        if gone:
            ids = np.array(gone, np.uint64)
            at = self._table.find(ids)
            self._table.unflag(at[at >= 0])
            if len(self._orphans):
                self._orphans = self._orphans[~np.isin(self._orphans, ids)]

    def _renumber(self) -> None:
        """Record numbers from 1 again: those from ``_arr_base`` on (their times and authors
        still in the arrays) shift down, the older ones become 0 (to the flush kernel they are
        all alike: below ``_arr_base``, never live)."""
        shift = self._arr_base - 1
        ry = self._table.ry
        r = ry >> 1
        ry[:] = np.where(r >= self._arr_base, r - shift, np.minimum(r, 0)) * 2 | (ry & 1)
        self._record_base -= shift
        self._arr_base = 1

    def _compact_records(self) -> None:
        """Drop the arrays' dropped records and renumber the authors of the live ones."""
        self._author_no = {}
        n = len(self._records)
        self._rec_t = np.zeros(max(1024, 2 * n), np.float64)
        self._rec_a = np.zeros(max(1024, 2 * n), np.int64)
        for i, (t, a, _, _, _) in enumerate(self._records):
            self._rec_t[i] = t
            self._rec_a[i] = -1 if a is None else self._author_no.setdefault(
                a, len(self._author_no))
        self._arr_base = self._record_base

    def findings(self, now: float) -> list[Finding]:
        cfg = self.cfg
        self._due(now)
        hits: list[tuple[int, _Young]] = []
        # only n-grams used since the last evaluation can newly qualify; open ones are re-judged
        for g in self._dirty | self._reported.keys():
            y = self._young.get(g)
            if y is None:
                continue
            ongoing = g in self._reported
            scale = 0.5 if ongoing else 1.0
            if type(y) is tuple:  # its two adopters' threads first: most go no further
                if (1 if y[0][4] == y[1][2] else 2) < cfg.min_threads * scale:
                    continue
                y = self._built(g, y)
            n = len(y.adopters)
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
        if y.evidence is None:
            y.evidence = EvidenceCache()
        evidence = {"ngram": g, "related_ngrams": related[:20], "born_at": y.born,
                    "adopters": n, "threads": len(y.threads), "uses": y.uses,
                    "text_share": round(y.uses / max(self._texts - y.texts_at_birth, 1), 4),
                    "growth_rate_per_h": round(n / hours, 2),
                    "seconds_to_min_adopters": None if t_min is None else round(t_min - y.born),
                    "agents": [a for a, _ in order[:100]], "post_ids": y.posts[:20],
                    **y.evidence.get(now, lambda: build_evidence(
                        y.texts, first_acts=y.adopters, cfg=self.cfg.evidence),
                        self.cfg.evidence.refresh_s)}
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
