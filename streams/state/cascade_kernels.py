"""Compiled kernels of the cascade engine's merge (:mod:`streams.state.cascades`): searches
and insertions in its sorted adoption stores, one scalar loop each instead of NumPy passes
that build a temporary per step (a vectorised binary search is one pass per level; a masked
insertion writes every column through a mask).

The queries of a merge come sorted (the pairs in key order), so the searches gallop from the
previous answer (O(log gap), near the last read) and restart from the front when a query is
below its predecessor (pairs of n-grams that share a key prefix): any order gives the exact
leftmost positions of ``np.searchsorted``.

>>> import numpy as np
>>> sorted_search(np.array([1, 3, 3, 7], np.uint64), np.array([3, 0, 8], np.uint64)).tolist()
[1, 0, 4]
>>> inserted(np.array([1, 3]), np.array([0, 2, 4]), np.array([0, 1, 2])).tolist()
[0, 1, 2, 3, 4]
>>> merge_order(np.array([1, 4], np.uint64), np.array([0, 4, 5], np.uint64)).tolist()
[2, 0, 1, 3, 4]
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import BOOL, F64, FLOAT, I64, INT, U32, U64, UINT

AGENT_BITS = 26  # agents indexed below 2^26 (67 M): the low bits of an adoption's key


@numba.njit(cache=True, inline="always")
def _gallop(arr: np.ndarray, q: np.uint64, lo: int) -> int:
    """The leftmost place of ``q`` in the sorted ``arr``, at ``lo`` or after (galloping)."""
    n = len(arr)
    hi, step = lo, 1
    while hi < n and arr[hi] < q:
        lo = hi + 1
        hi = lo + step
        step *= 2
    hi = min(hi, n)
    while lo < hi:
        mid = (lo + hi) >> 1
        if arr[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit([(U64, U64)], cache=True)
def sorted_search(arr: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``np.searchsorted(arr, queries)`` (leftmost), galloping from the previous answer."""
    out = np.empty(len(queries), np.int64)
    lo = 0
    for i in range(len(queries)):
        q = queries[i]
        if i and q < queries[i - 1]:
            lo = 0
        lo = _gallop(arr, q, lo)
        out[i] = lo
    return out


@numba.njit([(U64, U64)], cache=True)
def merge_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.argsort(np.concatenate((a, b)), kind="stable")`` for sorted ``a`` and ``b``: one
    merging pass (on ties ``a`` first)."""
    na, nb = len(a), len(b)
    out = np.empty(na + nb, np.int64)
    i, j = 0, 0
    for o in range(na + nb):
        if j == nb or (i < na and a[i] <= b[j]):
            out[o] = i
            i += 1
        else:
            out[o] = na + j
            j += 1
    return out


@numba.njit([(U32, U32, I64), (I64, I64, I64)], cache=True)
def inserted(column: np.ndarray, values: np.ndarray, pos: np.ndarray,
             ) -> np.ndarray:
    """``np.insert(column, pos, values)`` for non-decreasing ``pos``: one pass."""
    m = len(values)
    out = np.empty(len(column) + m, column.dtype)
    j = 0
    for i in range(m):
        p = pos[i]
        for q in range(j, p):  # a loop, not a slice: the gaps are mostly short
            out[q + i] = column[q]
        out[p + i] = values[i]
        j = p
    out[j + m:] = column[j:]
    return out


@numba.njit([(U32, U32, U32, U32, U32)], cache=True)
def merge_segments(ev: np.ndarray, indptr: np.ndarray, ev2: np.ndarray, indptr2: np.ndarray,
                   text_agent: np.ndarray) -> np.ndarray:
    """Two levels of the cascades' store (texts in segments ``indptr``, each sorted by the
    text's agent, no agent in both) as one: each segment of the result the merge of the two
    (one pass; its segment starts are ``indptr + indptr2``)."""
    out = np.empty(len(ev) + len(ev2), np.uint32)
    o = 0
    for c in range(len(indptr) - 1):
        i, end = np.int64(indptr[c]), np.int64(indptr[c + 1])
        j, end2 = np.int64(indptr2[c]), np.int64(indptr2[c + 1])
        while i < end and j < end2:
            if text_agent[ev[i]] < text_agent[ev2[j]]:
                out[o] = ev[i]
                i += 1
            else:
                out[o] = ev2[j]
                j += 1
            o += 1
        for q in range(i, end):  # loops, not slices: most segments are short
            out[o] = ev[q]
            o += 1
        for q in range(j, end2):
            out[o] = ev2[q]
            o += 1
    return out


@numba.njit([(U32, U32, I64, I64, U32)], cache=True)
def segment_find(ev: np.ndarray, indptr: np.ndarray, cno: np.ndarray, agent: np.ndarray,
                 text_agent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, position when found else insertion point) of (cascade, agent) pairs in one
    level of the cascades' store: a binary search by agent in the cascade's segment
    ``ev[indptr[c]:indptr[c + 1]]`` (texts, sorted by their agent ``text_agent``); the next
    pair of the same cascade with a larger agent gallops from the previous answer."""
    n = len(cno)
    found = np.zeros(n, np.bool_)
    pos = np.empty(n, np.int64)
    for i in range(n):
        c = cno[i]
        lo, end = np.int64(indptr[c]), np.int64(indptr[c + 1])
        a = agent[i]
        if i and c == cno[i - 1] and a > agent[i - 1]:
            lo = pos[i - 1]
        hi, step = lo, 1
        while hi < end and text_agent[ev[hi]] < a:
            lo = hi + 1
            hi = lo + step
            step *= 2
        hi = min(hi, end)
        while lo < hi:
            mid = (lo + hi) >> 1
            if text_agent[ev[mid]] < a:
                lo = mid + 1
            else:
                hi = mid
        pos[i] = lo
        found[i] = lo < end and text_agent[ev[lo]] == a
    return found, pos


NO_BLOCK = 0xFFFFFFFF  # a free block's link at the end of its class's free list


@numba.njit([(U64, I64, U64, UINT, INT)], cache=True)
def pair_keys(g: np.ndarray, text_of: np.ndarray, agents: np.ndarray, prefix_mask: np.uint64,
              agent_bits: int) -> np.ndarray:
    """The sort keys of n-gram uses (ids ``g`` in texts ``text_of`` by ``agents``): the id's
    prefix (``prefix_mask``: its top bits, the low ``AGENT_BITS`` zero) shifted down to leave
    ``agent_bits`` bits to the agent. One pass, no temporaries."""
    shift = np.uint64(AGENT_BITS - agent_bits)
    out = np.empty(len(g), np.uint64)
    for i in range(len(g)):
        out[i] = ((g[i] & prefix_mask) >> shift) | agents[text_of[i]]
    return out


@numba.njit([(U64, U64, I64, I64, F64, INT, U64, U64, U32, U32, U32, U32, F64)], cache=True)
def split_pairs(ku: np.ndarray, gu: np.ndarray, best: np.ndarray, by_time: np.ndarray,
                times: np.ndarray, base: int, cids: np.ndarray, keys: np.ndarray,
                size: np.ndarray, blk: np.ndarray, pool: np.ndarray, text_agent: np.ndarray,
                text_time: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                           np.ndarray, np.ndarray]:
    """A merge's distinct (key ``ku``, id ``gu``) pairs (as :func:`distinct_pairs` gives
    them: ``best``, the rank in time order ``by_time`` of their earliest text among the
    batch's, at ``times``, the first of which is text ``base`` of the table): each pair's first
    use (time, text), and the pairs split: those of the cascades (``cids``, sorted) as (pair,
    cascade number, agent), and of the others the new ones (pairs never seen), the others'
    first use made the earlier of the stored one and the pair's in place (in ``pool``: the
    first ``size`` entries of the n-gram's block ``blk`` in the table ``keys``); and each
    pair's n-gram's place in ``keys`` (``np.searchsorted``: :func:`counted` needs no search).
    One pass, galloping searches (the ids come grouped by prefix: restarted from the front
    when an id is below its predecessor)."""
    n = len(ku)
    agent_mask = np.uint64((1 << AGENT_BITS) - 1)
    tu = np.empty(n, np.float64)
    xu = np.empty(n, np.uint32)
    ci = np.empty(n, np.int64)
    cno = np.empty(n, np.int64)
    ag = np.empty(n, np.int64)
    fresh = np.empty(n, np.int64)
    place = np.empty(n, np.int64)
    nc, nk = len(cids), len(keys)
    c, f, lo_c, lo_k = 0, 0, 0, 0
    for i in range(n):
        e = by_time[best[i]]
        t, x = times[e], np.uint32(e + base)
        tu[i], xu[i] = t, x
        q = gu[i]
        if i and q < gu[i - 1]:
            lo_c, lo_k = 0, 0
        a = ku[i] & agent_mask
        lo_k = _gallop(keys, q, lo_k)
        place[i] = lo_k
        lo_c = _gallop(cids, q, lo_c)
        if lo_c < nc and cids[lo_c] == q:
            ci[c], cno[c], ag[c] = i, lo_c, np.int64(a)
            c += 1
            continue
        seen = False
        if lo_k < nk and keys[lo_k] == q:
            b = np.int64(blk[lo_k])
            for j in range(b, b + np.int64(size[lo_k])):
                if text_agent[pool[j]] == a:
                    seen = True
                    if t < text_time[pool[j]]:
                        pool[j] = x
                    break
        if not seen:
            fresh[f] = i
            f += 1
    return tu, xu, ci[:c], cno[:c], ag[:c], fresh[:f], place


@numba.njit([(U32, INT, I64, I64, I64, U32, U32, I64, U32)], cache=True)
def pool_put(pool: np.ndarray, used: int, heads: np.ndarray, caps: np.ndarray,
             cls_of: np.ndarray, blk: np.ndarray, size: np.ndarray, e: np.ndarray,
             x: np.ndarray) -> tuple[np.ndarray, int]:
    """New adoptions (texts ``x``) of the n-grams at ``e`` in the table (any order) added to
    their blocks: an n-gram's ``size`` (after them) is its block's fill, so it held
    ``size - its new ones``; a block of class c holds ``caps[c]`` texts and a fill of s needs
    the class ``cls_of[s]``: an n-gram that outgrows its block moves to a block of its class,
    the old one freed. Free blocks are threaded through their first entry, one list a class
    (``heads``: each list's first block, -1 none); a block is taken from its class's list, else
    at the end of the pool (``used`` entries; grown by a quarter when full). Updates ``blk``,
    ``heads`` in place, and ``heads[-1]``: the entries of the free blocks; returns the pool and
    its used entries."""
    n = len(e)
    order = np.arange(n)
    for i in range(1, n):
        if e[i] < e[i - 1]:  # the pairs' n-grams come grouped but for shared id prefixes
            order = np.argsort(e, kind="mergesort")
            break
    i = 0
    while i < n:
        g = e[order[i]]
        k = i
        while k < n and e[order[k]] == g:
            k += 1
        fill = np.int64(size[g])
        had = fill - (k - i)
        c = cls_of[fill]
        b = np.int64(blk[g])
        if had == 0 or cls_of[had] != c:
            if heads[c] >= 0:
                nb = heads[c]
                link = pool[nb]
                heads[c] = -1 if link == NO_BLOCK else np.int64(link)
                heads[-1] -= caps[c]
            else:
                nb = used
                if used + caps[c] > len(pool):
                    grown = np.empty(max(used + caps[c], used + used // 4 + 1024), np.uint32)
                    grown[:used] = pool[:used]
                    pool = grown
                used += caps[c]
            if had:
                for q in range(had):  # a loop, not a slice: a block holds a few texts
                    pool[nb + q] = pool[b + q]
                old = cls_of[had]
                pool[b] = NO_BLOCK if heads[old] < 0 else np.uint32(heads[old])
                heads[old] = b
                heads[-1] += caps[old]
            b = nb
            blk[g] = np.uint32(b)
        for j in range(i, k):
            pool[b + had + j - i] = x[order[j]]
        i = k
    return pool, used


@numba.njit([(U32, I64, I64, I64, U32, I64)], cache=True)
def pool_take(pool: np.ndarray, heads: np.ndarray, caps: np.ndarray, cls_of: np.ndarray,
              blocks: np.ndarray, fills: np.ndarray) -> np.ndarray:
    """The texts of the blocks ``blocks`` (holding ``fills`` each; none: no block), one block
    after another, and the blocks freed (onto their class's free list, as :func:`pool_put`
    keeps them)."""
    out = np.empty(fills.sum(), np.uint32)
    o = 0
    for i in range(len(blocks)):
        f = fills[i]
        if f == 0:
            continue
        b = np.int64(blocks[i])
        out[o:o + f] = pool[b:b + f]
        o += f
        c = cls_of[f]
        pool[b] = NO_BLOCK if heads[c] < 0 else np.uint32(heads[c])
        heads[c] = b
        heads[-1] += caps[c]
    return out


@numba.njit([(U32, I64, I64, U32, U32, INT)], cache=True)
def pool_compact(pool: np.ndarray, caps: np.ndarray, cls_of: np.ndarray, blk: np.ndarray,
                 size: np.ndarray, m: int) -> np.ndarray:
    """The pool without its free blocks (exactly sized): the blocks of the table's n-grams
    that are not cascades (``size`` under ``m``) one after another in table order, ``blk``
    updated in place."""
    total = 0
    for e in range(len(size)):
        if size[e] < m:
            total += caps[cls_of[size[e]]]
    out = np.empty(total, np.uint32)
    o = 0
    for e in range(len(size)):
        f = np.int64(size[e])
        if f < m:
            b = np.int64(blk[e])
            out[o:o + f] = pool[b:b + f]
            blk[e] = np.uint32(o)
            o += caps[cls_of[f]]
    return out


@numba.njit([(U64, F64, I64, U64, U32, F64, U32, INT)], cache=True)
def counted(gn: np.ndarray, tn: np.ndarray, pn: np.ndarray, keys: np.ndarray,
            size: np.ndarray, last: np.ndarray, blk: np.ndarray, m: int,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                       np.ndarray, np.ndarray, np.ndarray]:
    """New adoptions (ids ``gn``, grouped by id prefix, at times ``tn``; ``pn``: each one's
    place in ``keys``, as ``np.searchsorted`` gives it) added to the n-gram table (``keys``
    sorted, with each n-gram's adopters ``size``, last adoption ``last`` and block ``blk``,
    size and last updated in place for the n-grams it holds). Returns the table with the
    unseen n-grams inserted (keys, size, last, block: ``NO_BLOCK``; the same arrays when none
    is unseen: no rewrite), whether each adoption is of a cascade (``m`` adopters or more)
    now, the n-grams that became cascades (sorted), the first adoption of each of them in
    ``gn`` and its adopters before, and each adoption's n-gram's row in the table returned."""
    n = len(gn)
    run = np.empty(n + 1, np.int64)  # runs of equal ids: starts, then n
    r = 0
    for i in range(n):
        if i == 0 or gn[i] != gn[i - 1]:
            run[r] = i
            r += 1
    run[r] = n
    rg = np.empty(r, np.uint64)
    rc = np.empty(r, np.int64)
    rt = np.empty(r, np.float64)
    pos = np.empty(r, np.int64)
    for j in range(r):
        rg[j], rc[j], pos[j] = gn[run[j]], run[j + 1] - run[j], pn[run[j]]
        t = tn[run[j]]
        for i in range(run[j] + 1, run[j + 1]):
            t = max(t, tn[i])
        rt[j] = t
    nk = len(keys)
    hit = np.zeros(r, np.bool_)
    before = np.empty(r, np.uint32)
    for j in range(r):
        if pos[j] < nk and keys[pos[j]] == rg[j]:
            hit[j] = True
            before[j] = size[pos[j]]  # before any run adds (an n-gram may have several runs)
    for j in range(r):
        if hit[j]:
            e = pos[j]
            size[e] += np.uint32(rc[j])
            last[e] = max(last[e], rt[j])
    # the unseen n-grams, by id: their adopters and last adoption summed over their runs
    miss = np.flatnonzero(~hit)
    miss = miss[np.argsort(rg[miss], kind="mergesort")]
    ng = np.empty(len(miss), np.uint64)
    nc = np.zeros(len(miss), np.uint32)
    nt = np.full(len(miss), -np.inf)
    npos = np.empty(len(miss), np.int64)
    nfirst = np.empty(len(miss), np.int64)
    group = np.empty(r, np.int64)  # a missed run's n-gram among the unseen
    u = -1
    for j in miss:
        if u < 0 or rg[j] != ng[u]:
            u += 1
            ng[u], npos[u], nfirst[u] = rg[j], pos[j], run[j]
        group[j] = u
        nc[u] += np.uint32(rc[j])
        nt[u] = max(nt[u], rt[j])
        nfirst[u] = min(nfirst[u], run[j])
    u += 1
    # cascades now, per adoption, and the n-grams that crossed (first adoption in gn); each
    # adoption's row after the insertion: an unseen n-gram v goes to npos[v] + v, a held one
    # moves down by the unseen ones inserted at or before its place (npos ascends)
    cascade = np.empty(n, np.bool_)
    rows = np.empty(n, np.int64)
    cross_g = np.empty(r + u, np.uint64)
    cross_f = np.empty(r + u, np.int64)
    cross_b = np.zeros(r + u, np.int64)
    c, below, at = 0, 0, -1
    npos_u = npos[:u]
    for j in range(r):
        if hit[j]:
            after = size[pos[j]]
            now = after >= m
            if before[j] < m and now:
                cross_g[c], cross_f[c], cross_b[c] = rg[j], run[j], before[j]
                c += 1
            if pos[j] < at:  # the runs ascend but for shared id prefixes
                below = 0
            at = pos[j]
            below = _gallop(npos_u, at + 1, below)  # the unseen inserted at or before it
            row = at + below
        else:
            now = nc[group[j]] >= m
            row = npos[group[j]] + group[j]
        for i in range(run[j], run[j + 1]):  # a loop, not slices: most runs are one
            cascade[i] = now
            rows[i] = row
    for v in range(u):
        if nc[v] >= m:
            cross_g[c], cross_f[c] = ng[v], nfirst[v]
            c += 1
    order = np.argsort(cross_g[:c], kind="mergesort")
    crossed = np.empty(c, np.uint64)
    first = np.empty(c, np.int64)
    had = np.empty(c, np.int64)
    d = -1
    for j in order:  # an n-gram with several runs crossed once: its first run
        if d < 0 or cross_g[j] != crossed[d]:
            d += 1
            crossed[d], first[d], had[d] = cross_g[j], cross_f[j], cross_b[j]
        else:
            first[d] = min(first[d], cross_f[j])
    d += 1
    if u == 0:
        return keys, size, last, blk, cascade, crossed[:d], first[:d], had[:d], rows
    # the unseen n-grams inserted (sorted, so their insertion points ascend)
    keys2 = np.empty(nk + u, np.uint64)
    size2 = np.empty(nk + u, np.uint32)
    last2 = np.empty(nk + u, np.float64)
    blk2 = np.empty(nk + u, np.uint32)
    j = 0
    for v in range(u + 1):
        p = npos[v] if v < u else nk
        keys2[j + v:p + v] = keys[j:p]
        size2[j + v:p + v] = size[j:p]
        last2[j + v:p + v] = last[j:p]
        blk2[j + v:p + v] = blk[j:p]
        if v < u:
            keys2[p + v], size2[p + v], last2[p + v] = ng[v], nc[v], nt[v]
            blk2[p + v] = NO_BLOCK
        j = p
    return keys2, size2, last2, blk2, cascade, crossed[:d], first[:d], had[:d], rows


@numba.njit([(U64,)], cache=True)
def argsort_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable argsort of uint64 keys, and the keys in that order (the sort has them: no
    gather): least significant digit radix sort, 8 bits a pass (256 buckets: their write
    fronts stay in cache, where 2048 of 11 bits thrash it: 0.6x the time with one or two
    passes more), a pass skipped when every key has the same digit there."""
    n = len(keys)
    bits, passes = 8, 8
    mask = np.uint64((1 << bits) - 1)
    counts = np.zeros((passes, (1 << bits) + 1), np.int64)
    for i in range(n):
        x = keys[i]
        for p in range(passes):
            counts[p, ((x >> np.uint64(p * bits)) & mask) + 1] += 1
    idx = np.arange(n)
    tmp = np.empty(n, np.int64)
    key = keys.copy()
    ktmp = np.empty(n, np.uint64)
    for p in range(passes):
        c = counts[p]
        if c.max() == n:
            continue
        for d in range(1, len(c)):
            c[d] += c[d - 1]
        shift = np.uint64(p * bits)
        for i in range(n):
            d = (key[i] >> shift) & mask
            at = c[d]
            c[d] = at + 1
            ktmp[at] = key[i]
            tmp[at] = idx[i]
        key, ktmp = ktmp, key
        idx, tmp = tmp, idx
    return idx, key


@numba.njit([(U64, I64, U64, INT, INT, FLOAT, UINT)], cache=True)
def batch_ngrams(w: np.ndarray, lens: np.ndarray, stop_ids: np.ndarray, lo: int, hi: int,
                 max_stop_share: float, k: np.uint64,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The word n-grams (n in lo..hi, by n then position) of texts whose word ids ``w`` are
    concatenated (``lens`` words each), windows across two texts left out, those with more
    than ``max_stop_share`` stop words (ids in ``stop_ids``) dropped: (ids, start
    word in ``w``, text, end of each n's part). An id is the rolling hash
    ``(... (w0 * k + w1) * k ...) + w(n-1)`` mod 2^64, as
    :meth:`streams.text.Text.word_ngram_ids` has it."""
    n_w = len(w)
    tid = np.empty(n_w, np.int64)
    at = 0
    for t in range(len(lens)):
        tid[at:at + lens[t]] = t
        at += lens[t]
    # the stop ids in an open-addressing set (at most 1/4 full, probed linearly from a
    # multiplicative hash): a word costs a probe or two, not a binary search's mispredictions
    bits = 4
    while (1 << bits) < 4 * len(stop_ids):
        bits += 1
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    mul = np.uint64(0x9E3779B97F4A7C15)
    slot_id = np.zeros(1 << bits, np.uint64)
    held = np.zeros(1 << bits, np.bool_)
    for s in stop_ids:
        h = np.int64((s * mul) >> shift)
        while held[h] and slot_id[h] != s:
            h = (h + 1) & mask
        slot_id[h], held[h] = s, True
    stops = np.zeros(n_w + 1, np.int64)
    for i in range(n_w):
        x = w[i]
        h = np.int64((x * mul) >> shift)
        stop = 0
        while held[h]:
            if slot_id[h] == x:
                stop = 1
                break
            h = (h + 1) & mask
        stops[i + 1] = stops[i] + stop
    grams = w.copy()
    size = 0
    for n in range(lo, hi + 1):
        size += max(n_w - n + 1, 0)
    g = np.empty(size, np.uint64)
    where = np.empty(size, np.int64)
    text_of = np.empty(size, np.int64)
    part_ends = np.empty(hi - lo + 1, np.int64)
    out = 0
    for n in range(1, hi + 1):
        if n > 1:
            for i in range(n_w - n + 1):
                grams[i] = grams[i] * k + w[i + n - 1]
        if n < lo:
            continue
        for i in range(n_w - n + 1):
            if tid[i] == tid[i + n - 1] and stops[i + n] - stops[i] <= max_stop_share * n:
                g[out], where[out], text_of[out] = grams[i], i, tid[i]
                out += 1
        part_ends[n - lo] = out
    return g[:out], where[:out], text_of[:out], part_ends


@numba.njit([(I64, U64, U64, I64, I64, BOOL, INT)], cache=True)
def distinct_pairs(order: np.ndarray, sorted_keys: np.ndarray, g: np.ndarray,
                   text_of: np.ndarray, rank: np.ndarray, strict: bool, agent_bits: int,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The distinct (key, id) pairs of n-gram uses in ``order`` (sorted by key; by key then id
    unless ``strict``; ``sorted_keys``: their keys in that order, packed: the id prefix
    shifted down to leave ``agent_bits`` bits to the agent): (key, unpacked: the agent in the
    low ``AGENT_BITS`` bits, id, first use in ``order``, earliest rank of their texts'
    ``rank``), and False when ``strict`` met two ids under one key (then nothing else: the
    caller sorts by key then id)."""
    n = len(order)
    ku = np.empty(n, np.uint64)
    gu = np.empty(n, np.uint64)
    src = np.empty(n, np.int64)
    best = np.empty(n, np.int64)
    low = np.uint64((1 << agent_bits) - 1)
    up = np.uint64(AGENT_BITS - agent_bits)
    m = -1
    last = np.uint64(0)
    for i in range(n):
        j = order[i]
        k, gg, r = sorted_keys[i], g[j], rank[text_of[j]]
        if m >= 0 and k == last:
            if gg == gu[m]:
                best[m] = min(best[m], r)
                continue
            if strict:
                return ku[:0], gu[:0], src[:0], best[:0], False
        m += 1
        last = k
        ku[m], gu[m], src[m], best[m] = ((k & ~low) << up) | (k & low), gg, j, r
    m += 1
    return ku[:m], gu[:m], src[:m], best[:m], True


@numba.njit(cache=True, inline="always")
def _exposed(gi: np.ndarray, times: np.ndarray, indptr: np.ndarray, dst: np.ndarray,
             tail_src: np.ndarray, tail_dst: np.ndarray, t: np.ndarray, k: np.ndarray,
             touched: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`exposures`, its list of touched nodes in ``touched`` (graph-sized)."""
    n = len(gi)
    for i in range(n):
        if gi[i] >= 0:
            t[gi[i]] = times[i]
    m = 0
    indexed = len(indptr) - 1
    for i in range(n):
        s = gi[i]
        if s < 0:
            continue
        ts = t[s]
        if s < indexed:
            for e in range(indptr[s], indptr[s + 1]):
                d = dst[e]
                if ts < t[d]:
                    if k[d] == 0:
                        touched[m] = d
                        m += 1
                    k[d] += 1
        a, b = 0, len(tail_src)
        while a < b:
            mid = (a + b) >> 1
            if tail_src[mid] < s:
                a = mid + 1
            else:
                b = mid
        while a < len(tail_src) and tail_src[a] == s:
            d = tail_dst[a]
            if ts < t[d]:
                if k[d] == 0:
                    touched[m] = d
                    m += 1
                k[d] += 1
            a += 1
    k_ad = np.zeros(n, np.int64)
    for i in range(n):
        if gi[i] >= 0:
            k_ad[i] = k[gi[i]]
    others = np.empty(m, np.int64)
    o = 0
    for j in range(m):
        d = touched[j]
        if t[d] == np.inf:
            others[o] = k[d]
            o += 1
        k[d] = 0
    for i in range(n):
        if gi[i] >= 0:
            t[gi[i]] = np.inf
    return k_ad, others[:o]


@numba.njit([(I64, F64, I64, I64, I64, I64, F64, I64)], cache=True)
def exposures(gi: np.ndarray, times: np.ndarray, indptr: np.ndarray, dst: np.ndarray,
              tail_src: np.ndarray, tail_dst: np.ndarray, t: np.ndarray, k: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    """Exposures to one cascade: k(a) = edges j -> a with j an adopter before a (a
    non-adopter: ever), read from the adopters' out-edges only (a CSR ``indptr``/``dst`` of
    the edges indexed by source, and the newer ones ``tail_src``/``tail_dst`` sorted by
    source). ``gi``: the adopters' graph nodes (-1: not in the graph), adopted at ``times``.
    ``t`` (inf) and ``k`` (0) are graph-sized work arrays, left as found. Returns each
    adopter's exposure (0 outside the graph) and the exposures >= 1 of the non-adopters."""
    return _exposed(gi, times, indptr, dst, tail_src, tail_dst, t, k,
                    np.empty(len(t), np.int64))


@numba.njit([(I64, F64, INT)], cache=True)
def earliest_k(agents: np.ndarray, times: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k earliest adoptions, ties by agent, in that order (``np.lexsort((agents,
    times))[:k]``): only those up to the k-th earliest time are sorted."""
    n = len(times)
    if k <= 0:
        return np.empty(0, np.int64)
    if k < n:
        kth = np.partition(times.copy(), k - 1)[k - 1]
        sel = np.flatnonzero(times <= kth)
    else:
        sel = np.arange(n)
    st = times[sel]
    order = sel[np.argsort(st, kind="mergesort")]
    i = 0  # runs of equal times sorted by agent (insertion: the runs are short)
    while i < len(order):
        j = i + 1
        while j < len(order) and times[order[j]] == times[order[i]]:
            j += 1
        for a in range(i + 1, j):
            x = order[a]
            b = a - 1
            while b >= i and agents[order[b]] > agents[x]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        i = j
    return order[:k].copy()


@numba.njit([(U32, U32, I64, U32, I64)], cache=True)
def gather_segments(ev: np.ndarray, indptr: np.ndarray, numbers: np.ndarray, out: np.ndarray,
                    fill: np.ndarray) -> None:
    """Segments ``numbers`` of one level of the cascades' store (texts ``ev``, segment starts
    ``indptr``) appended to their places in ``out``: segment ``numbers[i]`` at ``fill[i]``,
    which moves past it."""
    for i in range(len(numbers)):
        c = numbers[i]
        a, b = np.int64(indptr[c]), np.int64(indptr[c + 1])
        out[fill[i]:fill[i] + b - a] = ev[a:b]
        fill[i] += b - a


@numba.njit([(U32, I64, U32, F64, I64, I64, I64, I64, I64, F64, I64, INT, INT)], cache=True)
def exposure_batch(texts: np.ndarray, offsets: np.ndarray, text_agent: np.ndarray,
                   text_time: np.ndarray, gmap: np.ndarray, indptr: np.ndarray,
                   dst: np.ndarray, tail_src: np.ndarray, tail_dst: np.ndarray, t: np.ndarray,
                   k: np.ndarray, cap: int, shown: int,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                              np.ndarray, np.ndarray]:
    """The exposure figures of cascades (cascade i: its adoptions' texts
    ``texts[offsets[i]:offsets[i + 1]]``, the agents ``text_agent`` at ``text_time``; ``gmap``:
    agent -> graph node, -1 none), as :func:`exposures` reads them (edges and work arrays
    alike): by exposure 0..``cap`` (the larger pooled at ``cap``), the graph's agents with an
    exposure >= 1 or adopters in the graph, and the adopters in the graph; how many agents
    that counts; and the ``shown`` earliest adopters (:func:`earliest_k`): their agent, time
    and exposure (-1: not in the graph), one cascade after another (``first``: where each
    cascade's begin)."""
    n = len(offsets) - 1
    agents_k = np.zeros((n, cap + 1), np.int64)
    adopted_k = np.zeros((n, cap + 1), np.int64)
    counted = np.empty(n, np.int64)
    first = np.zeros(n + 1, np.int64)
    for i in range(n):
        first[i + 1] = first[i] + min(shown, offsets[i + 1] - offsets[i])
    first_agent = np.empty(first[n], np.uint32)
    first_time = np.empty(first[n], np.float64)
    first_exp = np.empty(first[n], np.int32)
    touched = np.empty(len(t), np.int64)
    for i in range(n):
        mine = texts[offsets[i]:offsets[i + 1]]
        m = len(mine)
        agents = np.empty(m, np.int64)
        times = np.empty(m, np.float64)
        gi = np.empty(m, np.int64)
        for a in range(m):
            agents[a] = text_agent[mine[a]]
            times[a] = text_time[mine[a]]
            gi[a] = gmap[agents[a]]
        k_ad, others = _exposed(gi, times, indptr, dst, tail_src, tail_dst, t, k, touched)
        inside = 0
        for a in range(m):
            if gi[a] >= 0:
                adopted_k[i, min(k_ad[a], cap)] += 1
                inside += 1
        agents_k[i] = adopted_k[i]
        for o in others:
            agents_k[i, min(o, cap)] += 1
        counted[i] = inside + len(others)
        f = earliest_k(agents, times, shown)
        for j in range(len(f)):
            a = f[j]
            first_agent[first[i] + j] = np.uint32(agents[a])
            first_time[first[i] + j] = times[a]
            first_exp[first[i] + j] = np.int32(k_ad[a] if gi[a] >= 0 else -1)
    return agents_k, adopted_k, counted, first, first_agent, first_time, first_exp
