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


@numba.njit([(U64, U64)], cache=True)
def sorted_search(arr: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``np.searchsorted(arr, queries)`` (leftmost), galloping from the previous answer."""
    n = len(arr)
    out = np.empty(len(queries), np.int64)
    lo = 0
    for i in range(len(queries)):
        q = queries[i]
        if i and q < queries[i - 1]:
            lo = 0
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
        out[j + i:p + i] = column[j:p]
        out[p + i] = values[i]
        j = p
    out[j + m:] = column[j:]
    return out


@numba.njit([(U32, I64, U32, I64, U32)], cache=True)
def merge_segments(ev: np.ndarray, indptr: np.ndarray, ev2: np.ndarray, indptr2: np.ndarray,
                   text_agent: np.ndarray) -> np.ndarray:
    """Two levels of the cascades' store (texts in segments ``indptr``, each sorted by the
    text's agent, no agent in both) as one: each segment of the result the merge of the two
    (one pass; its segment starts are ``indptr + indptr2``)."""
    out = np.empty(len(ev) + len(ev2), np.uint32)
    o = 0
    for c in range(len(indptr) - 1):
        i, end = indptr[c], indptr[c + 1]
        j, end2 = indptr2[c], indptr2[c + 1]
        while i < end and j < end2:
            if text_agent[ev[i]] < text_agent[ev2[j]]:
                out[o] = ev[i]
                i += 1
            else:
                out[o] = ev2[j]
                j += 1
            o += 1
        out[o:o + end - i] = ev[i:end]
        o += end - i
        out[o:o + end2 - j] = ev2[j:end2]
        o += end2 - j
    return out


@numba.njit([(U32, I64, I64, I64, U32)], cache=True)
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
        lo, end = indptr[c], indptr[c + 1]
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


@numba.njit(cache=True, inline="always")
def _below(g: np.uint64, a: np.uint64, qp: np.uint64, qa: np.uint64, qg: np.uint64,
           prefix_mask: np.uint64) -> bool:
    """Entry (id g, agent a) before the query (prefix qp, agent qa, id qg) in store order."""
    p = g & prefix_mask
    if p != qp:
        return p < qp
    if a != qa:
        return a < qa
    return g < qg


@numba.njit([(U64, U32, U32, U64, U64, UINT)], cache=True)
def store_find(sg: np.ndarray, st: np.ndarray, text_agent: np.ndarray, ku: np.ndarray,
               gu: np.ndarray, prefix_mask: np.uint64,
               ) -> tuple[np.ndarray, np.ndarray]:
    """(found, position when found else insertion point) of pairs (key ``ku``: id prefix and
    agent; id ``gu``) in the other n-grams' store, sorted by (id prefix, agent, id) with the
    agent of entry j ``text_agent[st[j]]``: the leftmost entry not below the pair."""
    n = len(sg)
    agent_mask = np.uint64((1 << AGENT_BITS) - 1)
    found = np.zeros(len(ku), np.bool_)
    at = np.empty(len(ku), np.int64)
    lo = 0
    for i in range(len(ku)):
        qp, qa, qg = ku[i] & prefix_mask, np.uint64(ku[i] & agent_mask), gu[i]
        if i and (ku[i] < ku[i - 1] or (ku[i] == ku[i - 1] and qg < gu[i - 1])):
            lo = 0
        hi, step = lo, 1
        while hi < n and _below(sg[hi], np.uint64(text_agent[st[hi]]), qp, qa, qg,
                                prefix_mask):
            lo = hi + 1
            hi = lo + step
            step *= 2
        hi = min(hi, n)
        while lo < hi:
            mid = (lo + hi) >> 1
            if _below(sg[mid], np.uint64(text_agent[st[mid]]), qp, qa, qg, prefix_mask):
                lo = mid + 1
            else:
                hi = mid
        at[i] = lo
        found[i] = lo < n and sg[lo] == qg and np.uint64(text_agent[st[lo]]) == qa
    return found, at


@numba.njit([(U64, U32, U64, U32, I64, U64, UINT)], cache=True)
def store_update(sg: np.ndarray, st: np.ndarray, g: np.ndarray, t: np.ndarray, pos: np.ndarray,
                 gids: np.ndarray, prefix_mask: np.uint64,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The other n-grams' store (sorted by id prefix first) with the entries (``g``, ``t``)
    inserted at their non-decreasing insertion points ``pos`` and the adoptions of the n-grams
    ``gids`` (sorted ids, none of ``g``) taken out, in one pass: (store ids, store texts, taken
    ids, taken texts), all in store order. The taken prefix ranges are found by galloping
    searches (O(their adoptions + log))."""
    n = len(sg)
    hits = np.empty(n, np.int64)
    moved = 0
    lo = 0
    for i in range(len(gids)):
        p = gids[i] & prefix_mask
        hi, step = lo, 1
        while hi < n and (sg[hi] & prefix_mask) < p:
            lo = hi + 1
            hi = lo + step
            step *= 2
        hi = min(hi, n)
        while lo < hi:
            mid = (lo + hi) >> 1
            if (sg[mid] & prefix_mask) < p:
                lo = mid + 1
            else:
                hi = mid
        j = lo
        while j < n and (sg[j] & prefix_mask) == p:
            if sg[j] == gids[i]:
                hits[moved] = j
                moved += 1
            j += 1
    at = np.sort(hits[:moved])
    m = len(g)
    size = n - moved + m
    keep_g, keep_t = np.empty(size, sg.dtype), np.empty(size, st.dtype)
    out_g, out_t = np.empty(moved, sg.dtype), np.empty(moved, st.dtype)
    # one pass over the old entries, element by element (a slice copy per insertion costs
    # more than the copy itself: the blocks between insertions are ~10 entries)
    o, i, k = 0, 0, 0  # next output place, inserted entry, taken entry
    next_i = pos[0] if m else n
    next_k = at[0] if moved else n
    for j in range(n):
        while next_i == j:
            keep_g[o], keep_t[o] = g[i], t[i]
            o += 1
            i += 1
            next_i = pos[i] if i < m else n
        if next_k == j:
            out_g[k], out_t[k] = sg[j], st[j]
            k += 1
            next_k = at[k] if k < moved else n
        else:
            keep_g[o], keep_t[o] = sg[j], st[j]
            o += 1
    keep_g[o:] = g[i:]
    keep_t[o:] = t[i:]
    return keep_g, keep_t, out_g, out_t


@numba.njit([(U64, F64, U64, U32, F64, INT)], cache=True)
def counted(gn: np.ndarray, tn: np.ndarray, keys: np.ndarray, size: np.ndarray,
            last: np.ndarray, m: int,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """New adoptions (ids ``gn``, grouped by id prefix, at times ``tn``) added to the n-gram
    table (``keys`` sorted, with each n-gram's adopters ``size`` and last adoption ``last``,
    updated in place for the n-grams it holds). Returns the table with the unseen n-grams
    inserted (keys, size, last), whether each adoption is of a cascade (``m`` adopters or
    more) now, the n-grams that became cascades (sorted) and the first adoption of each of
    them in ``gn``."""
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
    for j in range(r):
        rg[j], rc[j] = gn[run[j]], run[j + 1] - run[j]
        t = tn[run[j]]
        for i in range(run[j] + 1, run[j + 1]):
            t = max(t, tn[i])
        rt[j] = t
    pos = sorted_search(keys, rg)
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
    # cascades now, per adoption, and the n-grams that crossed (first adoption in gn)
    cascade = np.empty(n, np.bool_)
    cross_g = np.empty(r + u, np.uint64)
    cross_f = np.empty(r + u, np.int64)
    c = 0
    for j in range(r):
        if hit[j]:
            after = size[pos[j]]
            now = after >= m
            if before[j] < m and now:
                cross_g[c], cross_f[c] = rg[j], run[j]
                c += 1
        else:
            now = nc[group[j]] >= m
        cascade[run[j]:run[j + 1]] = now
    for v in range(u):
        if nc[v] >= m:
            cross_g[c], cross_f[c] = ng[v], nfirst[v]
            c += 1
    order = np.argsort(cross_g[:c], kind="mergesort")
    crossed = np.empty(c, np.uint64)
    first = np.empty(c, np.int64)
    d = -1
    for j in order:  # an n-gram with several runs crossed once: its first run
        if d < 0 or cross_g[j] != crossed[d]:
            d += 1
            crossed[d], first[d] = cross_g[j], cross_f[j]
        else:
            first[d] = min(first[d], cross_f[j])
    d += 1
    # the unseen n-grams inserted (sorted, so their insertion points ascend)
    keys2 = np.empty(nk + u, np.uint64)
    size2 = np.empty(nk + u, np.uint32)
    last2 = np.empty(nk + u, np.float64)
    j = 0
    for v in range(u + 1):
        p = npos[v] if v < u else nk
        keys2[j + v:p + v] = keys[j:p]
        size2[j + v:p + v] = size[j:p]
        last2[j + v:p + v] = last[j:p]
        if v < u:
            keys2[p + v], size2[p + v], last2[p + v] = ng[v], nc[v], nt[v]
        j = p
    return keys2, size2, last2, cascade, crossed[:d], first[:d]


@numba.njit([(U64,)], cache=True)
def argsort_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable argsort of uint64 keys, and the keys in that order (the sort has them: no
    gather): least significant digit radix sort, 11 bits a pass, a pass skipped when every
    key has the same digit there."""
    n = len(keys)
    bits, passes = 11, 6
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
    than ``max_stop_share`` stop words (ids in the sorted ``stop_ids``) dropped: (ids, start
    word in ``w``, text, end of each n's part). An id is the rolling hash
    ``(... (w0 * k + w1) * k ...) + w(n-1)`` mod 2^64, as
    :meth:`streams.text.Text.word_ngram_ids` has it."""
    n_w = len(w)
    tid = np.empty(n_w, np.int64)
    at = 0
    for t in range(len(lens)):
        tid[at:at + lens[t]] = t
        at += lens[t]
    stops = np.zeros(n_w + 1, np.int64)
    last = len(stop_ids) - 1
    for i in range(n_w):
        a, b = 0, last
        while a < b:
            mid = (a + b) >> 1
            if stop_ids[mid] < w[i]:
                a = mid + 1
            else:
                b = mid
        stops[i + 1] = stops[i] + (1 if stop_ids[a] == w[i] else 0)
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
    n = len(gi)
    for i in range(n):
        if gi[i] >= 0:
            t[gi[i]] = times[i]
    touched = np.empty(len(t), np.int64)
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
