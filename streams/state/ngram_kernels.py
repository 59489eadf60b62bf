"""Compiled kernels of the n-gram tracker's merge (:mod:`streams.state.ngrams`): the distinct
ids of a day's sorted occurrences, the fold of a batch into a sorted table (one walk over the
table and the batch, both sorted, instead of a vectorised binary search and some thirty NumPy
passes that each build a temporary) and the insertion of the new ids in place.

The fold is the grace rule of :class:`~streams.state.ngrams._Lifecycle` written per n-gram: an
n-gram already held continues its life when the batch's first day is within ``grace`` of its
last day (``grace`` < 0: always, the batch rule), else starts a new one; only the changes of
qualifying lives' first and last days move the per-day birth and death counters.

>>> import numpy as np
>>> runs(np.array([3, 3, 3, 5, 9, 9], np.uint64))
(array([3, 5, 9], dtype=uint64), array([2, 1, 2]))
>>> sort_runs(np.array([9, 3, 5, 3, 9, 3], np.uint64))
(array([3, 5, 9], dtype=uint64), array([2, 1, 2]))
>>> col = np.array([10, 20, 30, 0, 0], np.uint64)
>>> spread(col, 3, np.array([0, 2], np.int64), np.array([5, 25], np.uint64))
>>> col.tolist()
[5, 10, 20, 25, 30]
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from streams.kernels import I64, INT, U8, U64

U16 = types.Array(types.uint16, 1, "C")  # the tables' day columns and packed metadata
U32 = types.Array(types.uint32, 1, "C")  # the packed table's low 32 bits of an id
#: The packed table's ids are split: the top ``BUCKET_BITS`` bits are the bucket (implicit,
#: by place: ``starts``), the next 16 a uint16 column, the low 32 a uint32 column.
BUCKET_BITS = 16
BUCKETS = 1 << BUCKET_BITS
LOW_BITS = 64 - BUCKET_BITS


@numba.njit([(U64,)], cache=True)
def runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of sorted ``ids`` and how often each occurs, capped at 2."""
    k = 0
    for i in range(len(ids)):
        if i == 0 or ids[i] != ids[i - 1]:
            k += 1
    keys = np.empty(k, np.uint64)
    counts = np.zeros(k, np.int64)
    j = -1
    for i in range(len(ids)):
        if i == 0 or ids[i] != ids[i - 1]:
            j += 1
            keys[j] = ids[i]
        if counts[j] < 2:
            counts[j] += 1
    return keys, counts


@numba.njit([(U64,)], cache=True)
def sort_runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`runs` of ``np.sort(ids)`` (``ids`` itself is left as it was): the ids are hashes,
    spread evenly over 64 bits, so one counting pass by their top bits deals them into buckets
    of ~8 (a bucket, in id order, holds the ids between two bounds) and each bucket is sorted
    alone, by insertion (by ``np.sort`` past 32 ids, so an uneven spread stays O(n log n)):
    the same sorted ids, several times faster than a comparison sort of the whole array."""
    n = len(ids)
    bits = 1
    while bits < 24 and (1 << (bits + 3)) < n:
        bits += 1
    shift = np.uint64(64 - bits)
    start = np.zeros((1 << bits) + 1, np.int64)
    for i in range(n):
        start[(ids[i] >> shift) + np.uint64(1)] += 1
    for b in range(1 << bits):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    out = np.empty(n, np.uint64)
    for i in range(n):
        b = ids[i] >> shift
        out[fill[b]] = ids[i]
        fill[b] += 1
    for b in range(1 << bits):
        lo, hi = start[b], start[b + 1]
        if hi - lo > 32:
            out[lo:hi].sort()
            continue
        for i in range(lo + 1, hi):
            g = out[i]
            j = i - 1
            while j >= lo and out[j] > g:
                out[j + 1] = out[j]
                j -= 1
            out[j + 1] = g
    return runs(out)


@numba.njit(cache=True)
def _life(f0: int, l0: int, c0: int, bm: int, bM: int, bc: int, grace: int,
          births: np.ndarray, deaths: np.ndarray, base: int) -> tuple[int, int, int]:
    """An n-gram held with life (f0, l0, count c0) seen again on days bm..bM (bc times): its
    new life, the counters moved (a life counts once it qualifies, at count 2)."""
    cont = grace < 0 or bm <= l0 + grace
    if cont:
        nf, nl, nc = min(f0, bm), max(l0, bM), min(c0 + bc, 2)
    else:
        nf, nl, nc = bm, bM, bc
    was_q = cont and c0 >= 2
    if nc >= 2 and not was_q:  # qualifies now: a new life, or a singleton seen again
        births[nf - base] += 1
        deaths[nl - base] += 1
    elif was_q:
        if nf != f0:
            births[nf - base] += 1
            births[f0 - base] -= 1
        if nl != l0:
            deaths[nl - base] += 1
            deaths[l0 - base] -= 1
    return nf, nl, nc


@numba.njit(cache=True)
def _pack(f: int, last: int, c: int, origin: int, clamp: int) -> np.uint16:
    return np.uint16(((last - origin) | (min(last - f, clamp) << 8) | (0x8000 if c >= 2 else 0))
                     & 0xFFFF)


@numba.njit(cache=True)
def _seek(keys: np.ndarray, j: int, g: np.uint64) -> int:
    """The first position at or after ``j`` whose id is not below ``g``."""
    n = len(keys)
    while j < n and keys[j] < g:
        j += 1
    return j


@numba.njit(cache=True)
def _born(bmin: int, bmax: int, bcnt: int, births: np.ndarray, deaths: np.ndarray,
          base: int) -> None:
    """A new id's life: born and dead within the batch if it qualifies (seen twice)."""
    if bcnt >= 2:
        births[bmin - base] += 1
        deaths[bmax - base] += 1


@numba.njit([(U32, U16, U16, I64, U64, I64, I64, I64, INT, INT, INT, I64, I64, INT)],
            cache=True)
def merge_packed(lo: np.ndarray, mid: np.ndarray, meta: np.ndarray, starts: np.ndarray,
                 uk: np.ndarray, bmin: np.ndarray, bmax: np.ndarray, bcnt: np.ndarray,
                 origin: int, clamp: int, grace: int, births: np.ndarray, deaths: np.ndarray,
                 base: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fold the distinct sorted ids ``uk`` (first day, last day, count each) into the packed
    table (ids split into ``lo``, ``mid`` and the bucket ``starts``; ``meta``: see
    :class:`~streams.state.ngrams._PackedTable`): held ones updated in place; returns the
    insertion positions, the two id columns' values and the packed metadata of the new ones,
    and moves ``starts`` on as if they were inserted (:func:`spread_packed` inserts them
    next)."""
    pos = np.empty(len(uk), np.int64)
    new_lo = np.empty(len(uk), np.uint32)
    new_mid = np.empty(len(uk), np.uint16)
    new_meta = np.empty(len(uk), np.uint16)
    added = np.zeros(BUCKETS, np.int64)
    low_mask = np.uint64((1 << LOW_BITS) - 1)
    k = 0
    j = 0
    for i in range(len(uk)):
        g = uk[i]
        b = np.int64(g >> np.uint64(LOW_BITS))
        g48 = g & low_mask
        j = max(j, starts[b])
        end = starts[b + 1]
        while j < end and ((np.uint64(mid[j]) << np.uint64(32)) | np.uint64(lo[j])) < g48:
            j += 1
        if j < end and ((np.uint64(mid[j]) << np.uint64(32)) | np.uint64(lo[j])) == g48:
            m = np.int64(meta[j])
            l0 = (m & 0xFF) + origin
            nf, nl, nc = _life(l0 - ((m >> 8) & 0x7F), l0, 1 + (m >> 15), bmin[i], bmax[i],
                               bcnt[i], grace, births, deaths, base)
            meta[j] = _pack(nf, nl, nc, origin, clamp)
        else:
            _born(bmin[i], bmax[i], bcnt[i], births, deaths, base)
            pos[k] = j
            new_lo[k] = np.uint32(g48 & np.uint64(0xFFFFFFFF))
            new_mid[k] = np.uint16(g48 >> np.uint64(32))
            new_meta[k] = _pack(bmin[i], bmax[i], bcnt[i], origin, clamp)
            added[b] += 1
            k += 1
    moved = 0
    for b in range(BUCKETS):
        moved += added[b]
        starts[b + 1] += moved
    return pos[:k], new_lo[:k], new_mid[:k], new_meta[:k]


@numba.njit([(U32, U16, U16, I64, types.Array(types.bool_, 1, "C"))], cache=True)
def keep_packed(lo: np.ndarray, mid: np.ndarray, meta: np.ndarray, starts: np.ndarray,
                mask: np.ndarray) -> int:
    """Keep the entries of the packed table where ``mask`` holds, in place (writes stay at or
    below the read), ``starts`` moved with them; returns how many are kept (the columns'
    tails past it are to be cut)."""
    w = 0
    for b in range(len(starts) - 1):
        s, e = starts[b], starts[b + 1]  # e is still the old start of the next bucket
        starts[b] = w
        for i in range(s, e):
            if mask[i]:
                lo[w] = lo[i]
                mid[w] = mid[i]
                meta[w] = meta[i]
                w += 1
    starts[len(starts) - 1] = w
    return w


@numba.njit([(U64, U16, U16, U8, U64, I64, I64, I64, INT, I64, I64, INT)], cache=True)
def merge_wide(keys: np.ndarray, first: np.ndarray, last: np.ndarray, count: np.ndarray,
               uk: np.ndarray, bmin: np.ndarray, bmax: np.ndarray, bcnt: np.ndarray,
               grace: int, births: np.ndarray, deaths: np.ndarray, base: int,
               ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`merge_packed` for the wide layout (first and last day, count: see
    :class:`~streams.state.ngrams._WideTable`); returns the insertion positions of the new ids
    and their indices in ``uk``."""
    n = len(keys)
    pos = np.empty(len(uk), np.int64)
    which = np.empty(len(uk), np.int64)
    k = 0
    j = 0
    for i in range(len(uk)):
        g = uk[i]
        j = _seek(keys, j, g)
        if j < n and keys[j] == g:
            nf, nl, nc = _life(np.int64(first[j]), np.int64(last[j]), np.int64(count[j]),
                               bmin[i], bmax[i], bcnt[i], grace, births, deaths, base)
            first[j] = np.uint16(nf & 0xFFFF)
            last[j] = np.uint16(nl & 0xFFFF)
            count[j] = np.uint8(nc)
        else:
            _born(bmin[i], bmax[i], bcnt[i], births, deaths, base)
            pos[k] = j
            which[k] = i
            k += 1
    return pos[:k], which[:k]


@numba.njit([(U64, INT, I64, U64), (U16, INT, I64, U16), (U8, INT, I64, U8)], cache=True)
def spread(column: np.ndarray, held: int, pos: np.ndarray, values: np.ndarray) -> None:
    """Insert ``values`` before the elements at ``pos`` (non-decreasing) of the first ``held``
    elements of ``column``, already grown to ``held + len(values)``: in place, from the end."""
    w = held + len(values) - 1
    i = held - 1
    for t in range(len(values) - 1, -1, -1):
        p = pos[t]
        while i >= p:
            column[w] = column[i]
            w -= 1
            i -= 1
        column[w] = values[t]
        w -= 1


@numba.njit([(U32, U16, U16, INT, I64, U32, U16, U16)], cache=True)
def spread_packed(lo: np.ndarray, mid: np.ndarray, meta: np.ndarray, held: int, pos: np.ndarray,
                  new_lo: np.ndarray, new_mid: np.ndarray, new_meta: np.ndarray) -> None:
    """:func:`spread` of the packed table's three columns in one pass from the end."""
    w = held + len(new_lo) - 1
    i = held - 1
    for t in range(len(new_lo) - 1, -1, -1):
        p = pos[t]
        while i >= p:
            lo[w] = lo[i]
            mid[w] = mid[i]
            meta[w] = meta[i]
            w -= 1
            i -= 1
        lo[w] = new_lo[t]
        mid[w] = new_mid[t]
        meta[w] = new_meta[t]
        w -= 1
