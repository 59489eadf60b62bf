"""Compiled kernels of the lexical-burst detector's flush (:mod:`detectors.burst`).

A flush reads every word n-gram of the buffered texts (about a hundred a real text) against the
seen table. In NumPy that was some thirty whole-array passes (a stable sort of the batch, the
table's probe rounds, the masks); :func:`flush` is one call of three passes in text order:
the batch's n-grams, each text's first use of each (a small hash map over the batch's distinct
n-grams, cache-resident, each new one's home slot in the seen table prefetched as it is met);
each distinct n-gram looked up (or inserted) in the seen table once, old or born, its time
last seen and record written back (the home slots read first in a loop of independent loads:
the misses the prefetches left overlap); of the uses, those that promote a single or adopt
into a young n-gram, decided in text order as the detector's rule has it (the Python loop
applies them).

The table is open addressing with linear probing over any number ``m`` of slots (the seen
table has 3/4 of a power of two: its load at most 2/3): the home slot of key ``k`` is
``h * m >> 32``, ``h`` the top 32 bits of the 64-bit wrap-around product ``k * MIX``; key 0
marks an empty slot.

>>> import numpy as np
>>> keys = np.zeros(12, np.uint64)
>>> slots, absent = locate(keys, np.array([7, 9, 7 + 16], np.uint64))
>>> absent.tolist(), bool((find(keys, np.array([9, 5], np.uint64)) == [slots[1], -1]).all())
([True, True, True], True)
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from streams.kernels import B1, F64, F64_A, FLOAT, I64, INT, U64, U64_A, prefetch
from streams.textscan import K

MIX = np.uint64(0x9E3779B97F4A7C15)
I32_A = types.Array(types.int32, 1, "A")


@numba.njit(cache=True, inline="always")
def _home(k: np.uint64, shift: np.uint64) -> int:
    return np.int64((k * MIX) >> shift)


@numba.njit(cache=True, inline="always")
def _at(k: np.uint64, m: np.uint64) -> int:
    """Home slot of key ``k`` in a table of ``m`` (< 2 ** 32) slots."""
    return np.int64((((k * MIX) >> np.uint64(32)) * m) >> np.uint64(32))


@numba.njit(cache=True)
def _slot(table: np.ndarray, k: np.uint64) -> tuple[int, bool]:
    """Slot of key ``k``, inserted when absent (the caller keeps a free slot), and whether it
    was absent."""
    m = len(table)
    s = _at(k, np.uint64(m))
    while True:
        got = table[s]
        if got == k:
            return s, False
        if got == 0:
            table[s] = k
            return s, True
        s += 1
        if s == m:
            s = 0


@numba.njit([(U64_A, U64)], cache=True)
def locate(table: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slot of each distinct non-zero key, inserting the absent ones, and which were absent."""
    out = np.empty(len(keys), np.int64)
    absent = np.zeros(len(keys), np.bool_)
    for j in range(len(keys)):
        out[j], absent[j] = _slot(table, keys[j])
    return out, absent


@numba.njit([(U64_A, U64)], cache=True)
def find(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Slot of each non-zero key, -1 when absent."""
    m = len(table)
    out = np.full(len(keys), -1, np.int64)
    for j in range(len(keys)):
        k = keys[j]
        s = _at(k, np.uint64(m))
        while True:
            got = table[s]
            if got == k:
                out[j] = s
                break
            if got == 0:
                break
            s += 1
            if s == m:
                s = 0
    return out


@numba.njit([(U64_A, F64_A, I32_A, U64_A, F64_A, I32_A)], cache=True)
def put(keys: np.ndarray, last: np.ndarray, ry: np.ndarray, src_keys: np.ndarray,
        src_last: np.ndarray, src_ry: np.ndarray) -> None:
    """Insert the distinct keys ``src_keys``, absent from the table, with their fields."""
    for j in range(len(src_keys)):
        s, _ = _slot(keys, src_keys[j])
        last[s] = src_last[j]
        ry[s] = src_ry[j]


@numba.njit([(U64_A, F64_A, I32_A, FLOAT, U64_A, F64_A, I32_A)], cache=True)
def rehash(keys: np.ndarray, last: np.ndarray, ry: np.ndarray, since: float,
           to_keys: np.ndarray, to_last: np.ndarray, to_ry: np.ndarray) -> int:
    """The keys of one table last seen at ``since`` or later put in another (empty, with room
    for them) with their fields, in slot order, in one pass (no copy of the kept between); the
    number put."""
    n = 0
    for s in range(len(keys)):
        k = keys[s]
        if k != 0 and last[s] >= since:
            t, _ = _slot(to_keys, k)
            to_last[t] = last[s]
            to_ry[t] = ry[s]
            n += 1
    return n


@numba.njit(cache=True)
def _member(sorted_keys: np.ndarray, k: np.uint64) -> bool:
    """Whether ``k`` is in the sorted array ``sorted_keys``."""
    j = np.searchsorted(sorted_keys, k)
    return j < len(sorted_keys) and sorted_keys[j] == k


@numba.njit([(I64, F64, B1, I64, I64, U64, U64, INT, U64_A, F64_A, I32_A, INT, INT, FLOAT,
               INT, INT, F64, I64, INT, FLOAT, U64)], cache=True)
def flush(lens: np.ndarray, times: np.ndarray, warm: np.ndarray,
          authors: np.ndarray, who: np.ndarray, words: np.ndarray, stop: np.ndarray,
          n_words: int, keys: np.ndarray, last: np.ndarray, ry: np.ndarray, cap: int,
          count: int, memory_s: float,
          record_base: int, next_record: int, rec_t: np.ndarray, rec_a: np.ndarray,
          arr_base: int, max_age_s: float, orphans: np.ndarray) -> tuple[
              int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
              np.ndarray]:
    """One batch against the seen table (``keys``, ``last``, ``ry``: ``count`` keys held,
    ``cap`` at most; ``ry`` is twice the record plus the young flag), as one text at a time
    in order would.

    The batch: text after text, ``lens`` n-grams each, its time, warm-up flag, author number
    (``authors``: that of the records, -2 for an author without one, -1 for none), author
    within the batch (``who``: equal for one author, -1 for none) and word ids (``words``,
    the texts' in a row: gram ``p`` of a text is its words ``p`` to ``p + n_words - 1``, its
    id their rolling hash as :meth:`streams.text.Text.word_ngram_ids` has it, id 0 read as
    1: 0 marks an empty slot). Only each text's first use of an n-gram counts.

    An n-gram is old when its first text here comes at most ``memory_s`` after it was last
    seen; else it is born with the record of that text (the texts that give births get the
    record numbers ``next_record`` on, in order), or gets no record (-1) in the warm-up. Its
    time last seen becomes the latest of its texts', its record is written back. A use is every
    text of an n-gram with a record outside the warm-up, but the first text of one that was not
    old; a use may do something when it is of a young n-gram (flag ``young``) or comes within
    ``max_age_s`` of its record (time ``rec_t``, author ``rec_a`` from record number
    ``arr_base`` on, or a text of this batch) by a known author other than the record's.

    Those uses, in text order, as the detector's n-gram by n-gram rule would take them: a use
    of a young n-gram (flagged, one of the sorted ``orphans``: young but out of the table,
    or promoted earlier in the batch) is an adoption; else a use of a single used again
    promotes it (flagged young here) when its record is live (number at least
    ``record_base``, within ``max_age_s``), the user an agent other than the record's and
    the n-gram at most half stop-words (ids ``stop``, sorted); an agent again, or no agent,
    changes nothing; anything else makes it never a burst (record -1), and its later uses in
    the batch do nothing.

    Returns (distinct n-grams of the batch, keys inserted, texts that gave births, and the
    actions in text order: key, whether a promotion (else an adoption), text, position,
    record). When the distinct n-grams would take the keys over ``cap``, nothing is done
    (inserted -1): the caller makes room and calls again."""
    n = lens.sum()
    lbits = 4
    while (1 << lbits) < 2 * n:
        lbits += 1
    lmask = (np.int64(1) << lbits) - 1
    lshift = np.uint64(64 - lbits)
    local = np.zeros(1 << lbits, np.uint64)
    local_grp = np.empty(1 << lbits, np.int64)
    occ_text = np.empty(n, np.int64)
    occ_pos = np.empty(n, np.int64)
    occ_grp = np.empty(n, np.int64)
    grp_key = np.empty(n, np.uint64)
    grp_first = np.empty(n, np.int64)  # its first use (in the batch)
    grp_tmax = np.empty(n, np.float64)
    grp_text = np.empty(n, np.int64)  # the last text that used it (one use a text)
    grp_slot = np.empty(n, np.int64)
    m = np.uint64(len(keys))
    word_at = np.empty(len(lens), np.int64)  # a text's first word (k grams: k + n - 1 words)
    at = 0
    for i in range(len(lens)):
        word_at[i] = at
        at += lens[i] + n_words - 1
    n_occ = n_grp = 0
    for i in range(len(lens)):
        t = times[i]
        at = word_at[i]
        for p in range(lens[i]):
            k = words[at + p]
            for w in range(at + p + 1, at + p + n_words):
                k = k * K + words[w]
            if k == 0:
                k = np.uint64(1)
            s = _home(k, lshift)
            while True:
                got = local[s]
                if got == k:
                    g = local_grp[s]
                    break
                if got == 0:
                    local[s] = k
                    g = local_grp[s] = n_grp
                    grp_key[g] = k
                    # its home in the seen table asked for now: the fetches (the table is far
                    # larger than the cache) overlap this pass instead of stalling a look-up each
                    home = _at(k, m)
                    grp_slot[g] = home
                    prefetch(keys, home)
                    prefetch(ry, home)  # (the record's other end: it may cross a line)
                    grp_first[g] = n_occ
                    grp_tmax[g] = t
                    grp_text[g] = -1
                    n_grp += 1
                    break
                s = (s + 1) & lmask
            if grp_text[g] == i:
                continue
            grp_text[g] = i
            grp_tmax[g] = max(grp_tmax[g], t)
            occ_text[n_occ] = i
            occ_pos[n_occ] = p
            occ_grp[n_occ] = g
            n_occ += 1
    none = np.empty(0, np.int64)
    if count + n_grp > cap:
        return (n_grp, -1, none, np.empty(0, np.uint64), np.empty(0, np.bool_), none, none,
                none)

    grp_rec = np.empty(n_grp, np.int64)
    grp_young = np.empty(n_grp, np.bool_)
    fresh = np.zeros(n_grp, np.bool_)  # not old: its first use is no use
    born = np.zeros(len(times), np.bool_)
    # every home slot read first, in a loop of independent loads (the table is far larger
    # than the cache: the misses overlap), then probed from the cache; a key at its home is
    # found there with its young flag and time last seen (nothing is removed here, and no
    # flag changes)
    home_key = np.empty(n_grp, np.uint64)
    home_ry = np.empty(n_grp, np.int32)
    home_last = np.empty(n_grp, np.float64)
    for g in range(n_grp):
        s = grp_slot[g]
        home_key[g] = keys[s]
        home_ry[g] = ry[s]
        home_last[g] = last[s]
    inserted = 0
    for g in range(n_grp):
        if home_key[g] == grp_key[g]:
            s, absent = grp_slot[g], False
            got = home_ry[g]
            before = home_last[g]
        else:
            s, absent = _slot(keys, grp_key[g])
            grp_slot[g] = s
            got = ry[s]
            before = -np.inf if absent else last[s]
        grp_young[g] = (got & 1) != 0
        i = occ_text[grp_first[g]]
        if absent:
            inserted += 1
        old = times[i] - before <= memory_s  # absent: never
        last[s] = max(before, grp_tmax[g])
        if old:
            grp_rec[g] = got >> 1
        else:
            fresh[g] = True
            grp_rec[g] = -1
            if not warm[i]:
                born[i] = True
    births = np.flatnonzero(born)
    number = np.full(len(times), -1, np.int64)
    for j in range(len(births)):
        number[births[j]] = next_record + j
    for g in range(n_grp):
        if fresh[g]:
            grp_rec[g] = number[occ_text[grp_first[g]]]
        s = grp_slot[g]
        ry[s] = (grp_rec[g] << 1) | (ry[s] & 1)

    may = np.zeros(n_grp, np.bool_)
    use = np.zeros(n_occ, np.bool_)
    for o in range(n_occ):
        g = occ_grp[o]
        i = occ_text[o]
        r = grp_rec[g]
        if r < 0 or warm[i] or (fresh[g] and grp_first[g] == o):
            continue
        use[o] = True
        if may[g]:
            continue
        if r >= next_record:  # born in this batch
            b = births[r - next_record]
            fresh_rec = times[i] - times[b] <= max_age_s
            other = who[i] != -1 and who[i] != who[b]
        else:
            idx = r - arr_base
            fresh_rec = idx >= 0 and times[i] - rec_t[idx] <= max_age_s
            other = fresh_rec and authors[i] != -1 and authors[i] != rec_a[idx]
        may[g] = (fresh_rec and other) or grp_young[g]
    # the young at the batch's start: flagged, or orphans
    adopting = grp_young.copy()
    if len(orphans):
        for g in range(n_grp):
            adopting[g] = adopting[g] or _member(orphans, grp_key[g])
    done = np.zeros(n_grp, np.bool_)  # promoted or never a burst in this batch
    promote = np.zeros(n_occ, np.bool_)
    n_act = 0
    for o in range(n_occ):
        g = occ_grp[o]
        if not (use[o] and may[g]):
            continue
        i = occ_text[o]
        if not adopting[g]:
            if done[g]:
                continue
            r = grp_rec[g]
            if r >= next_record:
                b = births[r - next_record]
                live = times[i] - times[b] <= max_age_s
                same = who[i] == -1 or who[i] == who[b]
            else:
                idx = r - arr_base
                live = r >= record_base and times[i] - rec_t[idx] <= max_age_s
                same = authors[i] == -1 or (live and authors[i] == rec_a[idx])
            if live and same:
                continue  # singly used still: the same agent again, or no agent
            if live:
                at = word_at[i] + occ_pos[o]
                stops = 0
                for w in range(at, at + n_words):
                    if _member(stop, words[w]):
                        stops += 1
                live = stops * 2 <= n_words  # over half stop-words: never a burst
            done[g] = True
            if not live:
                ry[grp_slot[g]] |= -2  # record -1, young flag kept
                continue
            adopting[g] = True
            promote[n_act] = True
            ry[grp_slot[g]] |= 1
        occ_text[n_act] = i  # in place: n_act <= o
        occ_pos[n_act] = occ_pos[o]
        occ_grp[n_act] = g
        n_act += 1
    g_a = occ_grp[:n_act]
    return (n_grp, inserted, births, grp_key[g_a], promote[:n_act], occ_text[:n_act],
            occ_pos[:n_act], grp_rec[g_a])
