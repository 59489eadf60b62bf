"""The verbatim-duplicate rule, live: texts repeated more than ``threshold`` times are excluded.

The paper removes, after the fact, every copy of a post text that occurs more than 1,000 times.
A stream cannot know that in advance, so the live rule is: admit the first ``threshold`` copies
of a text, exclude every later copy (``admit`` returns False), and report how many copies of
each excluded text were admitted before it crossed the threshold (at most ``threshold``), so
the difference from the batch rule is explicit: ``verbatim_admitted_before_block_total``.
Engines fed only with admitted texts thus see a text at most ``threshold`` times.

Identity: the exact post text (``PostEvent.text``: title + "\\n" + content, stripped); no case
or whitespace folding (the paper says "verbatim").

Bounded by hashing: counts live in a count-min sketch (``depth`` rows of ``width`` uint32
counters, 4 x 2^20 = 16 MB by default) with conservative update, keyed by a 128-bit blake2b of
the text. The estimate never undercounts; it overcounts by more than e N / width (N = texts
seen) with probability at most e^-depth (Cormode-Muthukrishnan), so a text may be blocked at
most e N / width copies early: 26 copies for N = 10 million at the default width (the tests
hold the bound on real posts with a tiny sketch). Blocked texts keep an exact count of their
excluded copies for the ``max_reported`` (1,000) most recent ones, with an 80-character preview.

As an engine, ``update(item)`` sets ``item.admitted`` for every post (comments and votes pass
untouched); ``admit(text)`` is the same rule on a bare text.

>>> f = VerbatimFilter(threshold=2)
>>> [f.admit("gm") for _ in range(4)], f.admit("hello")
([True, True, False, False], True)
>>> snap = f.snapshot()
>>> snap.value("verbatim_excluded_total"), snap.value("verbatim_admitted_before_block_total")
(2.0, 2.0)
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from streams.events import PostEvent
from streams.state.base import Item, Sample, Snapshot, post_digest, text_digest

_SLICES = struct.Struct("<4I")  # the four 32-bit slices of the 128-bit digest, one a row


@dataclass(slots=True)
class _Blocked:
    preview: str
    excluded: int = 0


class VerbatimFilter:
    """Admit a text unless it was already seen ``threshold`` times (count-min sketch)."""

    kinds: ClassVar[tuple[type, ...]] = (PostEvent,)  # the event kinds ``update`` reads

    def __init__(self, threshold: int = 1000, width: int = 1 << 20, depth: int = 4,
                 enabled: bool = True, max_reported: int = 1000) -> None:
        if depth > 4 or width > 1 << 32:
            raise ValueError("depth <= 4 and width <= 2^32 (four 32-bit slices of one hash)")
        self.threshold = threshold
        self.width = width
        self.depth = depth
        self.enabled = enabled
        self.max_reported = max_reported
        self._table = np.zeros(depth * width, np.uint32)  # row r at [r * width, (r+1) * width)
        self._offsets = [r * width for r in range(depth)]
        self._blocked: OrderedDict[bytes, _Blocked] = OrderedDict()
        self.seen_total = 0
        self.excluded_total = 0
        self.blocked_texts = 0

    def _cells(self, digest: bytes) -> list[int]:
        """The flat index of the cell of the text of ``digest`` (:func:`text_digest`) in each
        row (scalar Python ints: four cells are cheaper to touch one by one, through a
        memoryview of the table, than through NumPy indexing)."""
        w = self.width
        slices = _SLICES.unpack(digest)  # the first ``depth`` of them are used
        return [off + x % w for off, x in zip(self._offsets, slices, strict=False)]

    def estimate(self, text: str) -> int:
        """Copies of ``text`` admitted so far, as the sketch estimates (never below the truth)."""
        cells = self._cells(text_digest(text))
        table = memoryview(self._table)
        return min(table[i] for i in cells)

    def update(self, item: Item) -> None:
        """Engine verb: a post is admitted or not by its exact text (``item.admitted``)."""
        event = item.event
        if type(event) is PostEvent:
            raw = item.raw  # (the text Item.of read: not built again)
            # (its digest kept on the item: the n-gram tracker's key of the text too)
            item.admitted = self._admit(event.text if raw is None else raw,
                                        post_digest(item) if self.enabled else b"")

    def expire(self, now: float) -> None:
        """Nothing ages out: the sketch is the whole history (fixed size)."""

    def admit(self, text: str) -> bool:
        """Count one copy of ``text``; False if the text has already reached the threshold."""
        return self._admit(text, text_digest(text) if self.enabled else b"")

    def _admit(self, text: str, digest: bytes) -> bool:
        """:meth:`admit`, given the text's digest (:func:`text_digest`; unread if disabled)."""
        self.seen_total += 1
        if not self.enabled:
            return True
        cells = self._cells(digest)
        table = memoryview(self._table)  # Python ints in and out, no NumPy scalars
        vals = [table[i] for i in cells]
        est = min(vals)
        if est >= self.threshold:
            self.excluded_total += 1
            entry = self._blocked.get(digest)
            if entry is None:
                self.blocked_texts += 1
                entry = self._blocked[digest] = _Blocked(text[:80])
                while len(self._blocked) > self.max_reported:
                    self._blocked.popitem(last=False)
            else:
                self._blocked.move_to_end(digest)
            entry.excluded += 1
            return False
        # conservative update: raise only the cells at the minimum
        for i, v in zip(cells, vals, strict=True):
            if v == est:
                table[i] = est + 1
        return True

    def error_bound(self) -> float:
        """Overcount exceeded with probability at most e^-depth: e N / width."""
        return math.e * self.seen_total / self.width

    def snapshot(self) -> Snapshot:
        top = sorted(self._blocked.values(), key=lambda b: -b.excluded)[:20]
        samples = [
            Sample("verbatim_excluded_total", float(self.excluded_total), kind="counter",
                   help="Posts excluded: their exact text had already occurred threshold times"),
            Sample("verbatim_admitted_before_block_total",
                   float(self.threshold * self.blocked_texts), kind="counter",
                   help="Copies of excluded texts admitted before their text crossed the "
                        "threshold (the batch rule would have dropped them too)"),
            Sample("verbatim_blocked_texts", float(self.blocked_texts),
                   help="Distinct texts over the threshold"),
        ]
        details = {"verbatim": {
            "enabled": self.enabled, "threshold": self.threshold,
            "seen_total": self.seen_total, "excluded_total": self.excluded_total,
            "blocked_texts": self.blocked_texts,
            "admitted_before_block_total": self.threshold * self.blocked_texts,
            "sketch": {"width": self.width, "depth": self.depth,
                       "bytes": int(self._table.nbytes), "overcount_bound": self.error_bound(),
                       "bound_failure_probability": math.exp(-self.depth)},
            "top_blocked": [{"preview": b.preview, "excluded": b.excluded} for b in top],
        }}
        return Snapshot(samples=samples, details=details)
