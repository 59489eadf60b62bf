"""Compiled kernels of the cascade engine's merge (:mod:`streams.state.cascades`): searches
and insertions in its sorted adoption stores, one scalar loop each instead of NumPy passes
that build a temporary per step (a vectorised binary search is one pass per level; a masked
insertion writes every column through a mask).

The queries of a merge come sorted (the pairs in key order), so the searches gallop from the
previous answer (O(log gap), near the last read) and restart from the front when a query is
below its predecessor (pairs of n-grams that share a key prefix): any order gives the exact
leftmost positions of ``np.searchsorted``.

>>> import numpy as np
>>> arr = np.array([1, 3, 3, 7], np.uint64)
>>> [_gallop(arr, np.uint64(q), 0) for q in (3, 0, 8)], _gallop(arr, np.uint64(3), 2)
([1, 0, 4], 2)
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types

from streams.kernels import B1, F64, FLOAT, I32, I64, INT, U32, U64, UINT, prefetch

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


@numba.njit(cache=True, inline="always")
def _run_key(c: np.ndarray, x: np.ndarray, text_agent: np.ndarray, i: int) -> np.uint64:
    """(cascade, agent) of a run's ``i``-th adoption as one key; past its end, the largest
    key (cascade numbers are under 2^32)."""
    if i == len(c):
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return (np.uint64(c[i]) << np.uint64(32)) | np.uint64(text_agent[x[i]])


@numba.njit([(U32, U32, I64, U32, I64, I64, U32, I64, U32, U32)], cache=True)
def insert_runs(column: np.ndarray, indptr: np.ndarray, ca: np.ndarray, xa: np.ndarray,
                pa: np.ndarray, cb: np.ndarray, xb: np.ndarray, pb: np.ndarray,
                text_agent: np.ndarray, out: np.ndarray) -> None:
    """Two runs of adoptions (cascade numbers ``c``, texts ``x``, insertion points ``p`` in
    ``column``), each sorted by (cascade, the text's agent ``text_agent``), inserted into
    ``column`` (one level of the cascades' store, segment starts ``indptr``, moved in place
    by the insertions) in the merged order (on ties the first run's first): ``np.insert``
    of the merged run, whose insertion points do not decrease, in one pass, written into the
    first entries of ``out`` (room for them all; not ``column``'s buffer)."""
    na, nb = len(ca), len(cb)
    counts = np.zeros(len(indptr), np.int64)
    i, j, src = 0, 0, 0
    # each run's next key, made again only when that run moves on
    ka = _run_key(ca, xa, text_agent, 0)
    kb = _run_key(cb, xb, text_agent, 0)
    for o in range(na + nb):
        if ka <= kb:  # an exhausted run's key is above every other
            c, x, p = ca[i], xa[i], pa[i]
            i += 1
            ka = _run_key(ca, xa, text_agent, i)
        else:
            c, x, p = cb[j], xb[j], pb[j]
            j += 1
            kb = _run_key(cb, xb, text_agent, j)
        for q in range(src, p):  # a loop, not a slice: the gaps are mostly short
            out[q + o] = column[q]
        out[p + o] = x
        src = p
        counts[c + 1] += 1
    out[src + na + nb:len(column) + na + nb] = column[src:]
    run = 0
    for c in range(1, len(indptr)):
        run += counts[c]
        indptr[c] += np.uint32(run)


@numba.njit([U32(INT)], cache=True)
def level_buffer(size: int) -> np.ndarray:
    """A new buffer of ``size`` texts for a level of the cascades' store, allocated here, not
    by NumPy: NumPy asks for transparent huge pages for large arrays, whose faults (2 MB
    zeroed at once, compacted for) cost the merges that write a level's buffer about twice
    the small pages' system time (the buffers are written in order: huge pages save them
    no TLB miss)."""
    return np.empty(size, np.uint32)


MERGE_AHEAD = 16  # the merges ask for the agent of the text this many ahead in each run


@numba.njit([(U32, U32, U32, U32, U32, U32)], cache=True)
def merge_segments(ev: np.ndarray, indptr: np.ndarray, ev2: np.ndarray, indptr2: np.ndarray,
                   text_agent: np.ndarray, out: np.ndarray) -> None:
    """Two levels of the cascades' store (texts in segments ``indptr``, each sorted by the
    text's agent, no agent in both) as one: each segment of the result the merge of the two
    (one pass; its segment starts are ``indptr + indptr2``), written into the first entries
    of ``out`` (room for both levels' adoptions, neither's buffer: the room after them is
    left untouched, for :func:`merge_in_place`). The two runs' current texts and agents are
    held, each read again only when its run moves on (one text and one agent read an output,
    where reading both runs' at each step doubles the dependent reads); the agents' table
    misses the cache: each run asks for the agent of its text ``MERGE_AHEAD`` on as it moves
    (a hint, which changes no value)."""
    o = 0
    n1, n2 = len(ev) - MERGE_AHEAD, len(ev2) - MERGE_AHEAD
    for c in range(len(indptr) - 1):
        i, end = np.int64(indptr[c]), np.int64(indptr[c + 1])
        j, end2 = np.int64(indptr2[c]), np.int64(indptr2[c + 1])
        if i < end and j < end2:
            x, y = ev[i], ev2[j]
            ax, ay = text_agent[x], text_agent[y]
            while True:
                if ax < ay:
                    out[o] = x
                    o += 1
                    i += 1
                    if i == end:
                        break
                    if i < n1:
                        prefetch(text_agent, ev[i + MERGE_AHEAD])
                    x = ev[i]
                    ax = text_agent[x]
                else:
                    out[o] = y
                    o += 1
                    j += 1
                    if j == end2:
                        break
                    if j < n2:
                        prefetch(text_agent, ev2[j + MERGE_AHEAD])
                    y = ev2[j]
                    ay = text_agent[y]
        for q in range(i, end):  # loops, not slices: most segments are short
            out[o] = ev[q]
            o += 1
        for q in range(j, end2):
            out[o] = ev2[q]
            o += 1


@numba.njit([(U32, INT, U32, U32, U32, U32)], cache=True)
def merge_in_place(buf: np.ndarray, n: int, ev: np.ndarray, indptr: np.ndarray,
                   indptr2: np.ndarray, text_agent: np.ndarray) -> None:
    """:func:`merge_segments` of ``ev`` (segments ``indptr``) into the level held by the first
    ``n`` entries of ``buf`` (segments ``indptr2``), in place: ``buf[:n + len(ev)]`` becomes
    the merged level. Written from the back (the last segment first, each from its largest
    agent down), so an adoption of ``buf`` is read before its place is written (it only moves
    up, by the adoptions of ``ev`` before it); the segments before the first that ``ev``
    touches stay where they are. No new buffer: its pages are not faulted in again at every
    merge (a fresh level of 100 M adoptions costs ~0.2 s of page faults). Agents asked for
    ahead as :func:`merge_segments` asks."""
    o = n + len(ev)
    for c in range(len(indptr) - 2, -1, -1):
        i, i0 = np.int64(indptr[c + 1]), np.int64(indptr[c])
        if i == 0:  # nothing of ev left: the segments before are in place
            break
        j, j0 = np.int64(indptr2[c + 1]), np.int64(indptr2[c])
        if i > i0 and j > j0:
            x, y = ev[i - 1], buf[j - 1]
            ax, ay = text_agent[x], text_agent[y]
            while True:
                o -= 1
                if ax > ay:
                    buf[o] = x
                    i -= 1
                    if i == i0:
                        break
                    if i > MERGE_AHEAD:
                        prefetch(text_agent, ev[i - 1 - MERGE_AHEAD])
                    x = ev[i - 1]
                    ax = text_agent[x]
                else:
                    buf[o] = y
                    j -= 1
                    if j == j0:
                        break
                    if j > MERGE_AHEAD:  # below j: not written yet (o >= j)
                        prefetch(text_agent, buf[j - 1 - MERGE_AHEAD])
                    y = buf[j - 1]
                    ay = text_agent[y]
        while i > i0:
            o -= 1
            i -= 1
            buf[o] = ev[i]
        while j > j0:  # the rest of the segment moved up (o > j: ev has more before it)
            o -= 1
            j -= 1
            buf[o] = buf[j]


@numba.njit(cache=True, inline="always")
def _head(ev: np.ndarray, i: np.int64, i0: np.int64, text_agent: np.ndarray) -> np.int64:
    """The agent of ``ev[i - 1]``, -1 when ``i == i0`` (a segment read from the back, done)."""
    return np.int64(text_agent[ev[i - 1]]) if i > i0 else np.int64(-1)


@numba.njit([(U32, INT, U32, U32, U32, U32, U32, U32)], cache=True)
def merge3_in_place(buf: np.ndarray, n: int, ev: np.ndarray, indptr: np.ndarray,
                    ev2: np.ndarray, indptr2: np.ndarray, indptr3: np.ndarray,
                    text_agent: np.ndarray) -> None:
    """:func:`merge_in_place` of two levels at once (``ev`` and ``ev2``, segments ``indptr``
    and ``indptr2``) into the level held by the first ``n`` entries of ``buf`` (segments
    ``indptr3``): the level that :func:`merge_in_place` of ``ev`` into ``ev2``, then of the
    result into ``buf``, leaves, without writing the first merge out (no agent in two
    levels: each segment's order is the only one). From the back, as it; each step takes
    the largest of the three heads (-1: a segment's run done)."""
    o = n + len(ev) + len(ev2)
    for c in range(len(indptr) - 2, -1, -1):
        i, i0 = np.int64(indptr[c + 1]), np.int64(indptr[c])
        j, j0 = np.int64(indptr2[c + 1]), np.int64(indptr2[c])
        if i == 0 and j == 0:  # nothing of ev nor ev2 left: the segments before are in place
            break
        k, k0 = np.int64(indptr3[c + 1]), np.int64(indptr3[c])
        ax, ay, az = (_head(ev, i, i0, text_agent), _head(ev2, j, j0, text_agent),
                      _head(buf, k, k0, text_agent))
        while i > i0 or j > j0:
            o -= 1
            if ax > ay and ax > az:
                buf[o] = ev[i - 1]
                i -= 1
                if i > MERGE_AHEAD:
                    prefetch(text_agent, ev[i - 1 - MERGE_AHEAD])
                ax = _head(ev, i, i0, text_agent)
            elif ay > az:
                buf[o] = ev2[j - 1]
                j -= 1
                if j > MERGE_AHEAD:
                    prefetch(text_agent, ev2[j - 1 - MERGE_AHEAD])
                ay = _head(ev2, j, j0, text_agent)
            else:
                buf[o] = buf[k - 1]
                k -= 1
                if k > MERGE_AHEAD:  # below k: not written yet (o >= k)
                    prefetch(text_agent, buf[k - 1 - MERGE_AHEAD])
                az = _head(buf, k, k0, text_agent)
        while k > k0:  # the rest of the segment moved up (by the adoptions before it)
            o -= 1
            k -= 1
            buf[o] = buf[k]


@numba.njit([(U32, U32, I32, U32, U32, B1, I64, U32, F64)], cache=True)
def segment_find(ev: np.ndarray, indptr: np.ndarray, cno: np.ndarray, agent: np.ndarray,
                 text_agent: np.ndarray, found: np.ndarray, where: np.ndarray, cx: np.ndarray,
                 text_time: np.ndarray) -> None:
    """(cascade ``cno``, agent) pairs (sorted by cascade then agent) searched in the first
    level of the cascades' store: a binary search by agent in the cascade's segment
    ``ev[indptr[c]:indptr[c + 1]]`` (texts, sorted by their agent ``text_agent``); the next
    pair of the same cascade with a larger agent gallops from the previous answer (a
    cascade's first pair searches the whole segment: a gallop from its start would take
    twice the probes to reach a place anywhere in it). ``where``: each pair's place (a new
    pair's insertion point); a pair found is marked in ``found`` and its first use made the
    earlier of the stored text and its own (text ``cx[i]``; ``text_time``: the texts'
    times) in place (same agent: the order holds). The levels
    after the first: :func:`segment_find_some` (the same search, the loop written out in
    each: a shared inline helper measured 27 % slower)."""
    n = len(cno)
    pc, pa, pp = np.int64(-1), np.int64(-1), np.int64(0)  # the previous pair searched
    for i in range(n):
        c = np.int64(cno[i])
        lo, end = np.int64(indptr[c]), np.int64(indptr[c + 1])
        a = np.int64(agent[i])
        hi = end  # a cascade's first pair: a binary search over its segment
        if c == pc and a > pa:
            lo = pp
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
        pc, pa, pp = c, a, lo
        where[i] = lo
        if lo < end and text_agent[ev[lo]] == a:
            found[i] = True
            if text_time[cx[i]] < text_time[ev[lo]]:
                ev[lo] = cx[i]


@numba.njit([(B1, I64, I32, U32)], cache=True)
def new_adoptions(found: np.ndarray, where: np.ndarray, cno: np.ndarray, cx: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cascades' pairs not ``found`` (:func:`segment_find`) as a run to insert (cascade
    numbers, texts ``cx``, insertion points ``where`` in level 0; the filters count them,
    :func:`filter_pending`)."""
    n = len(found)
    k = 0
    for i in range(n):
        k += not found[i]
    cn = np.empty(k, np.int64)
    xn = np.empty(k, np.uint32)
    pn = np.empty(k, np.int64)
    o = 0
    for i in range(n):
        if found[i]:
            continue
        cn[o], xn[o], pn[o] = cno[i], cx[i], where[i]
        o += 1
    return cn, xn, pn


NO_BLOCK = 0xFFFFFFFF  # a free block's link at the end of its class's free list
RADIX_BITS = 12  # sorted_pairs' digits: at most this wide (a bucket's 4097 counts a pass)
AHEAD, RING = 16, 32  # merge_pairs reads a block's first agent AHEAD n-grams early (RING > it)


@numba.njit([(U64, I32, U64, UINT, INT)], cache=True)
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


@numba.njit(cache=True, inline="always")
def _block(pool: np.ndarray, used: int, heads: np.ndarray, caps: np.ndarray, c: int,
           ) -> tuple[np.ndarray, int, int]:
    """A block of class ``c``: the first of its free list, else at the end of the pool
    (``used`` entries; grown by a quarter when full). Returns the pool, its used entries and
    the block."""
    if heads[c] >= 0:
        nb = heads[c]
        link = pool[nb]
        heads[c] = -1 if link == NO_BLOCK else np.int64(link)
        heads[-1] -= caps[c]
        return pool, used, nb
    if used + caps[c] > len(pool):
        grown = np.empty(max(used + caps[c], used + used // 4 + 1024), np.uint32)
        grown[:used] = pool[:used]
        pool = grown
    return pool, used + caps[c], used


@numba.njit(cache=True, inline="always")
def _free(pool: np.ndarray, heads: np.ndarray, caps: np.ndarray, b: int, c: int) -> None:
    """Block ``b`` of class ``c`` onto its class's free list (threaded through its first
    entry; ``heads[-1]``: the free entries)."""
    pool[b] = NO_BLOCK if heads[c] < 0 else np.uint32(heads[c])
    heads[c] = b
    heads[-1] += caps[c]


@numba.njit([(U32, U64, U32, I64, F64, INT, U64, U64, U32, F64, U32, U32, INT, I64, I64,
              I64, U32, F64, INT)], cache=True)
def merge_pairs(agu: np.ndarray, gu: np.ndarray, best: np.ndarray, by_time: np.ndarray,
                times: np.ndarray, base: int, cids: np.ndarray, keys: np.ndarray,
                size: np.ndarray, last: np.ndarray, blk: np.ndarray, pool: np.ndarray,
                used: int, heads: np.ndarray, caps: np.ndarray, cls_of: np.ndarray,
                text_agent: np.ndarray, text_time: np.ndarray, m: int,
                ) -> tuple[np.ndarray | int, ...]:
    """A merge's distinct (agent ``agu``, id ``gu``) pairs (as :func:`sorted_pairs` gives
    them, by id then agent: ``best``, the rank in time order ``by_time`` of their
    earliest text among the batch's, at ``times``, the first of which is text ``base`` of the
    table) merged into the n-gram table (``keys`` sorted, adopters ``size``, last adoption
    ``last``, block ``blk`` in ``pool``: ``used`` entries, free lists ``heads``, classes
    ``caps`` and ``cls_of``, as :class:`streams.state.cascades._Pool` keeps them) in one pass,
    an n-gram at a time. An n-gram that is not a cascade (not in ``cids``): a pair whose agent
    its block holds is seen (its first use made the earlier of the two in place), the others
    are new adoptions: counted (size, last), then put into its block (a block that fills up
    moves to one of the next class, taken before the old one is freed), or, when they make it
    a cascade (``m`` adopters), all its adoptions leave the pool (its block freed after the
    pass, in id order) and it leaves the table (which holds no cascade). The table is
    rewritten after the pass only when n-grams enter it (the unseen ones that are not
    cascades at once) or leave it (the crossed ones). The n-grams are found first (their
    places, one pass), then taken in turn, each block's first agent read ``AHEAD`` n-grams
    early (the blocks are scattered over the pool: those reads overlap, where a block read
    at its turn waits for memory). Returns the table (the same arrays
    when no n-gram is unseen), the pool and its used entries; the cascades' pairs as (text
    of first use, cascade number, agent: 12 bytes a pair, its time the text's in
    ``text_time``; a cascade's row is neither searched nor updated: its adopters are counted
    by the store's filters); the new adoptions of the other n-grams; the n-grams
    that became cascades (by id), the pair of the first new adoption of each, its adoptions
    taken from the pool (``had`` each, one block after another) and those the merge adds
    (text of first use, crossed n-gram's number)."""
    n = len(gu)
    tu = np.empty(n, np.float64)  # each pair's first use (time, text)
    xu = np.empty(n, np.uint32)
    cx = np.empty(n, np.uint32)
    cno = np.empty(n, np.int32)
    ag = np.empty(n, np.uint32)
    fresh = np.empty(n, np.int64)
    cross_g = np.empty(n, np.uint64)
    cross_f = np.empty(n, np.int64)
    cross_h = np.empty(n, np.int64)
    cross_b = np.empty(n, np.int64)
    jt = np.empty(n, np.uint32)
    jx = np.empty(n, np.int64)
    ug = np.empty(n, np.uint64)
    upos = np.empty(n, np.int64)
    dpos = np.empty(n, np.int64)  # the rows of the n-grams that crossed (ascending)
    uc = np.empty(n, np.uint32)
    ut = np.empty(n, np.float64)
    ub = np.empty(n, np.uint32)
    nc, nk = len(cids), len(keys)
    # the n-grams (runs of equal ids): their places in the table and among the cascades
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    rows = np.empty(n, np.int64)
    held = np.empty(n, np.bool_)  # in the table, not a cascade: its block is read
    c, ng, lo_c, lo_k = 0, 0, 0, 0
    i = 0
    while i < n:
        q = gu[i]
        end = i + 1
        while end < n and gu[end] == q:
            end += 1
        lo_c = _gallop(cids, q, lo_c)
        if lo_c < nc and cids[lo_c] == q:  # a cascade's row is not read: no search
            for p in range(i, end):
                cx[c], cno[c], ag[c] = by_time[best[p]] + base, lo_c, agu[p]
                c += 1
        else:
            lo_k = _gallop(keys, q, lo_k)
            for p in range(i, end):
                e = by_time[best[p]]
                tu[p], xu[p] = times[e], np.uint32(e + base)
            starts[ng], ends[ng], rows[ng] = i, end, lo_k
            held[ng] = lo_k < nk and keys[lo_k] == q
            ng += 1
        i = end
    # the others, an n-gram at a time; the agent of the first text of the block AHEAD n-grams
    # on is read first (kept in a ring): the blocks are scattered over the pool, and the
    # misses of these independent reads overlap where a block read as its turn comes stalls
    ring = np.empty(RING, np.uint32)
    for r in range(min(AHEAD, ng)):
        if held[r]:
            ring[r % RING] = text_agent[pool[blk[rows[r]]]]
    x, u, j, adopted, nd = 0, 0, 0, 0, 0
    for r in range(ng):
        ahead = r + AHEAD
        if ahead < ng and held[ahead]:
            ring[ahead % RING] = text_agent[pool[blk[rows[ahead]]]]
        i, end, lo_k = starts[r], ends[r], rows[r]
        q = gu[i]
        f = 0
        had = 0
        b = 0
        if held[r]:
            b = np.int64(blk[lo_k])
            had = np.int64(size[lo_k])
            first = ring[r % RING]  # text_agent[pool[b]], read AHEAD n-grams before
            for p in range(i, end):
                a = agu[p]
                seen = False
                for s in range(b, b + had):
                    if (first if s == b else text_agent[pool[s]]) == a:
                        seen = True
                        if tu[p] < text_time[pool[s]]:
                            pool[s] = xu[p]
                        break
                if not seen:
                    fresh[f] = p
                    f += 1
        else:
            for p in range(i, end):
                fresh[f] = p
                f += 1
        if f == 0:
            continue
        adopted += f
        t = tu[fresh[0]]
        for v in range(1, f):
            t = max(t, tu[fresh[v]])
        fill = had + f
        if fill >= m:  # a cascade now: its adoptions join the cascades' store
            if held[r]:
                dpos[nd] = lo_k
                nd += 1
            cross_g[x], cross_f[x], cross_h[x], cross_b[x] = q, fresh[0], had, b
            for v in range(f):
                jt[j], jx[j] = xu[fresh[v]], x
                j += 1
            x += 1
            continue
        if held[r]:
            size[lo_k] = np.uint32(fill)
            last[lo_k] = max(last[lo_k], t)
        else:
            ug[u], upos[u], uc[u], ut[u] = q, lo_k, np.uint32(f), t
            u += 1
        cl = cls_of[fill]
        if had == 0 or cls_of[had] != cl:
            pool, used, nb = _block(pool, used, heads, caps, cl)
            if had:
                for s in range(had):  # a loop, not a slice: a block holds a few texts
                    pool[nb + s] = pool[b + s]
                _free(pool, heads, caps, b, cls_of[had])
            b = nb
            if held[r]:
                blk[lo_k] = np.uint32(b)
            else:
                ub[u - 1] = np.uint32(b)
        for v in range(f):
            pool[b + had + v] = xu[fresh[v]]
    # the crossed n-grams' blocks taken (in id order), then freed
    h = 0
    for r in range(x):
        h += cross_h[r]
    moved = np.empty(h, np.uint32)
    o = 0
    for r in range(x):
        f = cross_h[r]
        if f:
            b = cross_b[r]
            moved[o:o + f] = pool[b:b + f]
            o += f
            _free(pool, heads, caps, b, cls_of[f])
    if u == 0 and nd == 0:
        return (keys, size, last, blk, pool, used, cx[:c], cno[:c], ag[:c], adopted,
                cross_g[:x], cross_f[:x], cross_h[:x], moved, jt[:j], jx[:j])
    # the unseen n-grams inserted, the crossed ones' rows dropped (both in id order: their
    # places ascend; an n-gram inserted before a dropped row at its place)
    nk2 = nk + u - nd
    keys2 = np.empty(nk2, np.uint64)
    size2 = np.empty(nk2, np.uint32)
    last2 = np.empty(nk2, np.float64)
    blk2 = np.empty(nk2, np.uint32)
    s, o, v, d = 0, 0, 0, 0
    while True:
        pi = upos[v] if v < u else nk
        pd = dpos[d] if d < nd else nk
        p = min(pi, pd)
        keys2[o:o + p - s] = keys[s:p]
        size2[o:o + p - s] = size[s:p]
        last2[o:o + p - s] = last[s:p]
        blk2[o:o + p - s] = blk[s:p]
        o += p - s
        s = p
        if v < u and pi <= pd:
            keys2[o], size2[o], last2[o], blk2[o] = ug[v], uc[v], ut[v], ub[v]
            o += 1
            v += 1
        elif d < nd:
            s += 1
            d += 1
        else:
            break
    return (keys2, size2, last2, blk2, pool, used, cx[:c], cno[:c], ag[:c], adopted,
            cross_g[:x], cross_f[:x], cross_h[:x], moved, jt[:j], jx[:j])


@numba.njit([(U32, I64, I64, I64, U32, I64)], cache=True)
def pool_take(pool: np.ndarray, heads: np.ndarray, caps: np.ndarray, cls_of: np.ndarray,
              blocks: np.ndarray, fills: np.ndarray) -> np.ndarray:
    """The texts of the blocks ``blocks`` (holding ``fills`` each; none: no block), one block
    after another, and the blocks freed (onto their class's free list, as :func:`merge_pairs`
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
        _free(pool, heads, caps, b, cls_of[f])
    return out


@numba.njit([(U32, I64, I64, U32, U32)], cache=True)
def pool_compact(pool: np.ndarray, caps: np.ndarray, cls_of: np.ndarray, blk: np.ndarray,
                 size: np.ndarray) -> np.ndarray:
    """The pool without its free blocks (exactly sized): the blocks of the table's n-grams
    (``size`` adoptions each) one after another in table order, ``blk`` updated in place."""
    total = 0
    for e in range(len(size)):
        total += caps[cls_of[size[e]]]
    out = np.empty(total, np.uint32)
    o = 0
    for e in range(len(size)):
        f = np.int64(size[e])
        b = np.int64(blk[e])
        out[o:o + f] = pool[b:b + f]
        blk[e] = np.uint32(o)
        o += caps[cls_of[f]]
    return out


@numba.njit([(I64, U32, INT, U32)], cache=True)
def joined_run(jc: np.ndarray, jt: np.ndarray, na: int, text_agent: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray]:
    """The new cascades' adoptions (cascade numbers ``jc``, texts ``jt``: the first ``na``
    the merge's, sorted by (cascade, the text's agent ``text_agent``); the rest taken from
    the pool, by cascade, one block each, not sorted by agent: a few texts a cascade) as one
    run sorted by (cascade, agent): each block sorted by insertion, then the two runs merged
    (O(adoptions), where a sort of them all by (cascade, agent) took up to 8 radix passes).
    A cascade's agents are distinct: the order is the only one."""
    n = len(jc)
    bt = jt[na:].copy()
    s = 0
    while s < n - na:  # each block of the second run sorted by agent
        e = s + 1
        while e < n - na and jc[na + e] == jc[na + s]:
            e += 1
        for q in range(s + 1, e):
            t = bt[q]
            a = text_agent[t]
            r = q
            while r > s and text_agent[bt[r - 1]] > a:
                bt[r] = bt[r - 1]
                r -= 1
            bt[r] = t
        s = e
    oc = np.empty(n, np.int64)
    ot = np.empty(n, np.uint32)
    i, j = 0, 0
    for o in range(n):
        if j == n - na or (i < na and (jc[i] < jc[na + j] or (
                jc[i] == jc[na + j] and text_agent[jt[i]] < text_agent[bt[j]]))):
            oc[o], ot[o] = jc[i], jt[i]
            i += 1
        else:
            oc[o], ot[o] = jc[na + j], bt[j]
            j += 1
    return oc, ot


@numba.njit([(U64, I64, U64, INT, INT, FLOAT, UINT)], cache=True)
def batch_ngrams(w: np.ndarray, lens: np.ndarray, stop_ids: np.ndarray, lo: int, hi: int,
                 max_stop_share: float, k: np.uint64,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The word n-grams (n in lo..hi, by n then position) of texts whose word ids ``w`` are
    concatenated (``lens`` words each), windows across two texts left out, those with more
    than ``max_stop_share`` stop words (ids in ``stop_ids``) dropped: (ids, start
    word in ``w`` and text, int32; end of each n's part). An id is the rolling hash
    ``(... (w0 * k + w1) * k ...) + w(n-1)`` mod 2^64, as
    :meth:`streams.text.Text.word_ngram_ids` has it."""
    n_w = len(w)
    size = 0
    for n in range(lo, hi + 1):
        size += max(n_w - n + 1, 0)
    g = np.empty(size, np.uint64)
    where = np.empty(size, np.int32)  # int32: fewer bytes written and read after
    text_of = np.empty(size, np.int32)
    stops = np.empty(n_w + 1, np.int32)
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
    stops[0] = 0
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
    part_ends = np.empty(hi - lo + 1, np.int64)
    out = 0
    for n in range(1, hi + 1):
        if n > 1:
            for i in range(n_w - n + 1):
                grams[i] = grams[i] * k + w[i + n - 1]
        if n < lo:
            continue
        most = np.int64(math.floor(max_stop_share * n))  # stop words an n-gram keeps at most
        at = 0
        for t in range(len(lens)):  # each text's windows (none across two)
            for i in range(at, at + lens[t] - n + 1):  # written, then kept or not: no branch
                g[out], where[out], text_of[out] = grams[i], i, t  # to mispredict
                out += stops[i + n] - stops[i] <= most
            at += lens[t]
        part_ends[n - lo] = out
    return g[:out], where[:out], text_of[:out], part_ends


@numba.njit([(U64, I32, U64, I64, INT)], cache=True)
def sorted_pairs(g: np.ndarray, text_of: np.ndarray, agents: np.ndarray, rank: np.ndarray,
                 agent_bits: int,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The sort of n-gram uses (ids ``g`` in texts ``text_of`` by ``agents``) by their
    :func:`pair_keys` (``agent_bits`` bits to the agent; made here, not read from an array)
    then :func:`distinct_pairs` in one (two ids under one key refused): the uses split by
    their key's top bits (8, more when a bucket would not fit the packing below) into
    buckets in one pass, each use written as the rest of its key packed with its place in
    its bucket (one word: a radix pass moves 8 bytes, not 16), its id's low bits packed with
    its text's rank (the id's top bits are the key's) and its index carried beside it in one
    16-byte record (read in order, where a gather after the sort reads them at random; one
    write stream a bucket, and one line read a use after the sort); then each bucket,
    small enough to stay in cache, sorted by the rest of its key (least significant digit
    radix, stable, in as few passes of up to ``RADIX_BITS`` bits as the rest's bits need:
    4 of 12 where 8-bit digits took 6; a pass skipped when every key has the same digit there)
    and its distinct pairs read off. The same order and figures as the two (a stable sort by
    key); the agents, not the keys, returned (uint32, as the indices and ranks), ranks under
    2^32. False (and nothing else) for two ids under one key, or where the packing does not
    fit even 16 top bits: the caller sorts by key then id."""
    n = len(g)
    ab = np.uint64(agent_bits)
    down = np.uint64(AGENT_BITS - agent_bits)
    prefix = ~np.uint64((1 << AGENT_BITS) - 1)
    bits = 64 - AGENT_BITS + agent_bits  # every key below 2^bits
    tb = min(8, bits)
    while True:  # the top bits split on: a bucket's places in the bits the rest leaves
        shift = np.uint64(bits - tb)
        counts = np.zeros((1 << tb) + 1, np.int64)
        for i in range(n):
            counts[((((g[i] & prefix) >> down) | agents[text_of[i]]) >> shift) + 1] += 1
        widest = 0
        for d in range(1 << tb):
            widest = max(widest, counts[d + 1])
        ib = 0
        while (1 << ib) < widest:
            ib += 1
        if bits - tb + ib <= 64:
            break
        if tb >= 16:  # over 2^16 uses under one key's top 16 bits (agents over 2^25)
            return (np.empty(0, np.uint32), np.empty(0, np.uint64), np.empty(0, np.uint32),
                    np.empty(0, np.uint32), False)
        tb += 4
    nb = 1 << tb
    for d in range(1, nb + 1):
        counts[d] += counts[d - 1]
    fill = counts[:nb].copy()
    rest_mask = (np.uint64(1) << shift) - np.uint64(1)
    ibu = np.uint64(ib)
    id_low = np.uint64((1 << AGENT_BITS) - 1)
    bk = np.empty(n, np.uint64)
    pay = np.empty((n, 2), np.uint64)  # one record a use: one write stream a bucket, not two
    for i in range(n):
        t = text_of[i]
        k = ((g[i] & prefix) >> down) | agents[t]
        d = k >> shift
        at = fill[d]
        fill[d] = at + 1
        bk[at] = ((k & rest_mask) << ibu) | np.uint64(at - counts[d])
        pay[at, 0] = ((g[i] & id_low) << np.uint64(32)) | np.uint64(rank[t])
        pay[at, 1] = i
    passes = max((bits - tb + RADIX_BITS - 1) // RADIX_BITS, 1)
    dbits = (bits - tb + passes - 1) // passes  # the digits' width: as few passes as can be
    mask = np.uint64((1 << dbits) - 1)
    kt = np.empty(widest, np.uint64)
    c = np.empty((passes, (1 << dbits) + 1), np.int64)
    places = np.uint64((1 << ib) - 1)
    low = np.uint64((1 << agent_bits) - 1)
    ag = np.empty(n, np.uint32)
    gu = np.empty(n, np.uint64)
    src = np.empty(n, np.uint32)
    best = np.empty(n, np.uint32)
    m = -1
    last = np.uint64(0)
    for d in range(nb):
        s, e = counts[d], counts[d + 1]
        size = e - s
        a, b = bk[s:e], kt[:size]
        c[:] = 0
        for q in range(size):  # every pass's digit counts in one read
            v = a[q] >> ibu
            for p in range(passes):
                c[p, ((v >> np.uint64(dbits * p)) & mask) + 1] += 1
        for p in range(passes):
            cp = c[p]
            if cp.max() == size:
                continue
            for q in range(1, 1 << dbits):
                cp[q] += cp[q - 1]
            sh = np.uint64(dbits * p) + ibu
            for q in range(size):
                v = a[q]
                dd = (v >> sh) & mask
                at = cp[dd]
                cp[dd] = at + 1
                b[at] = v
            a, b = b, a
        top = np.uint64(d) << shift
        for q in range(size):
            v = a[q]
            k, o = top | (v >> ibu), s + np.int64(v & places)
            x = pay[o, 0]
            gg = ((k >> ab) << np.uint64(AGENT_BITS)) | (x >> np.uint64(32))
            r = np.uint32(x & np.uint64(0xFFFFFFFF))
            if m >= 0 and k == last:
                if gg == gu[m]:
                    best[m] = min(best[m], r)
                    continue
                return ag[:0], gu[:0], src[:0], best[:0], False
            m += 1
            last = k
            ag[m], gu[m], src[m], best[m] = np.uint32(k & low), gg, np.uint32(pay[o, 1]), r
    m += 1
    return ag[:m], gu[:m], src[:m], best[:m], True


@numba.njit([(U32, U64, U32, U32)], cache=True)
def ids_in_order(agu: np.ndarray, gu: np.ndarray, src: np.ndarray, best: np.ndarray) -> None:
    """Pairs sorted by key (the id's top bits, then agent) put in id order, then agent, in
    place: each run of pairs whose ids share their top bits (the others are in id order
    already) sorted stably by id where it is not (a few runs a merge: ``np.argsort(gu,
    kind="stable")`` of the whole, without its passes over every pair)."""
    n = len(gu)
    top = ~np.uint64((1 << AGENT_BITS) - 1)
    s = 0
    while s < n:
        e = s + 1
        ordered = True
        while e < n and gu[e] & top == gu[s] & top:
            ordered = ordered and gu[e - 1] <= gu[e]
            e += 1
        if not ordered:
            o = s + np.argsort(gu[s:e], kind="mergesort")
            agu[s:e], gu[s:e], src[s:e], best[s:e] = agu[o], gu[o], src[o], best[o]
        s = e


@numba.njit([(types.Array(types.uint8, 1, "C", readonly=True), I64, I64)], cache=True)
def word_bytes(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The bytes ``buf[start[i]:start[i] + length[i]]`` one after another, each newline (the
    words' separator in ``buf``) a space."""
    out = np.empty(length.sum(), np.uint8)
    o = 0
    for i in range(len(start)):
        for q in range(start[i], start[i] + length[i]):
            c = buf[q]
            out[o] = 32 if c == 10 else c
            o += 1
    return out


@numba.njit([(I64, U64, U64, I32, I64, INT)], cache=True)
def distinct_pairs(order: np.ndarray, sorted_keys: np.ndarray, g: np.ndarray,
                   text_of: np.ndarray, rank: np.ndarray, agent_bits: int,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (key, id) pairs of n-gram uses in ``order`` (sorted by key then id;
    ``sorted_keys``: their keys in that order, packed: the id prefix shifted down to leave
    ``agent_bits`` bits to the agent) as :func:`sorted_pairs` gives them: (agent, id, first
    use in ``order``, earliest rank of their texts' ``rank``)."""
    n = len(order)
    ag = np.empty(n, np.uint32)
    gu = np.empty(n, np.uint64)
    src = np.empty(n, np.uint32)
    best = np.empty(n, np.uint32)
    low = np.uint64((1 << agent_bits) - 1)
    m = -1
    last = np.uint64(0)
    for i in range(n):
        j = order[i]
        k, gg, r = sorted_keys[i], g[j], np.uint32(rank[text_of[j]])
        if m >= 0 and k == last and gg == gu[m]:
            best[m] = min(best[m], r)
            continue
        m += 1
        last = k
        ag[m], gu[m], src[m], best[m] = np.uint32(k & low), gg, j, r
    m += 1
    return ag[:m], gu[:m], src[:m], best[:m]


@numba.njit(cache=True, inline="always")
def _exposed(gi: np.ndarray, times: np.ndarray, indptr: np.ndarray, dst: np.ndarray,
             tail_ptr: np.ndarray, tail_dst: np.ndarray, t: np.ndarray, k: np.ndarray,
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
        for e in range(tail_ptr[s], tail_ptr[s + 1]):
            d = tail_dst[e]
            if ts < t[d]:
                if k[d] == 0:
                    touched[m] = d
                    m += 1
                k[d] += 1
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
              tail_ptr: np.ndarray, tail_dst: np.ndarray, t: np.ndarray, k: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    """Exposures to one cascade: k(a) = edges j -> a with j an adopter before a (a
    non-adopter: ever), read from the adopters' out-edges only (a CSR ``indptr``/``dst`` of
    the edges indexed by source, and one of the newer ones, ``tail_ptr``/``tail_dst``, over
    every node). ``gi``: the adopters' graph nodes (-1: not in the graph), adopted at ``times``.
    ``t`` (inf) and ``k`` (0) are graph-sized work arrays, left as found. Returns each
    adopter's exposure (0 outside the graph) and the exposures >= 1 of the non-adopters."""
    return _exposed(gi, times, indptr, dst, tail_ptr, tail_dst, t, k,
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


@numba.njit([(I32, I32, INT)], cache=True)
def by_source(src: np.ndarray, dst: np.ndarray, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Edges ``src -> dst`` grouped by source (a CSR: ``indptr`` over ``nodes``, the
    destinations in edge order within a source, as a stable sort by source gives them), by
    counting: O(edges + nodes), where a comparison sort took O(edges log edges)."""
    indptr = np.zeros(nodes + 1, np.int64)
    for s in src:
        indptr[s + 1] += 1
    for v in range(nodes):
        indptr[v + 1] += indptr[v]
    fill = indptr[:-1].copy()
    out = np.empty(len(src), np.int64)
    for i in range(len(src)):
        s = src[i]
        out[fill[s]] = dst[i]
        fill[s] += 1
    return indptr, out


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
                   dst: np.ndarray, tail_ptr: np.ndarray, tail_dst: np.ndarray, t: np.ndarray,
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
        k_ad, others = _exposed(gi, times, indptr, dst, tail_ptr, tail_dst, t, k, touched)
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


# ----------------------------------------------------------------------------------------------
# the cascades' adopter filters: a blocked Bloom filter a cascade (:class:`_Cascades`)
# ----------------------------------------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _agent_hash(a: np.int64) -> np.uint64:
    """An agent index mixed into 64 bits (splitmix64's finaliser): the word of a cascade's
    run from the top bits, the two bits set in it from the low 12."""
    z = np.uint64(a) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def _agent_bits(h: np.uint64) -> np.uint64:
    """The three bits of a hashed agent in its word."""
    m = np.uint64(63)
    return ((np.uint64(1) << (h & m)) | (np.uint64(1) << ((h >> np.uint64(6)) & m))
            | (np.uint64(1) << ((h >> np.uint64(12)) & m)))


FILTER_AHEAD = 16  # filter_pending asks for the word of the pair this many ahead


@numba.njit(cache=True, inline="always")
def _word(start: np.ndarray, size: np.ndarray, c: np.int64, h: np.uint64) -> np.int64:
    """The word of cascade ``c``'s filter (``size[c]`` words from ``start[c]``, a power of
    two) that a hashed agent ``h`` sets: by the hash's top bits."""
    return start[c] + np.int64((h >> np.uint64(40)) & np.uint64(size[c] - 1))


@numba.njit([(U64, I64, U32, U32, I32, U32, B1)], cache=True)
def filter_pending(words: np.ndarray, start: np.ndarray, size: np.ndarray, count: np.ndarray,
                   cno: np.ndarray, agent: np.ndarray, found: np.ndarray) -> np.ndarray:
    """The pairs (cascade ``cno``, agent) not ``found`` that the cascades' filters (cascade
    c's: ``size[c]`` words of ``words`` from ``start[c]``, a power of two) may hold: every
    pair held passes (no false negative), so the others are certainly new adoptions and
    need no search: they are set in their filters and counted in ``count`` (in place) here,
    the pairs returned by :func:`filter_adopt` once searched. In pair order (cascade order:
    the runs mostly read forward)."""
    n = len(cno)
    out = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        if i + FILTER_AHEAD < n:  # a big cascade's word, or a run left behind, misses the
            j = i + FILTER_AHEAD  # cache: asked for a few pairs ahead
            prefetch(words, _word(start, size, np.int64(cno[j]),
                                  _agent_hash(np.int64(agent[j]))))
        if found[i]:
            continue
        c = np.int64(cno[i])
        h = _agent_hash(np.int64(agent[i]))
        bits = _agent_bits(h)
        at = _word(start, size, c, h)
        w = words[at]
        if w & bits == bits:
            out[k] = i
            k += 1
        else:
            words[at] = w | bits
            count[c] += np.uint32(1)
    return out[:k]


@numba.njit([(U32, U32, I64, I32, U32, U32, B1, U32, F64)], cache=True)
def segment_find_some(ev: np.ndarray, indptr: np.ndarray, idx: np.ndarray, cno: np.ndarray,
                      agent: np.ndarray, text_agent: np.ndarray, found: np.ndarray,
                      cx: np.ndarray, text_time: np.ndarray) -> None:
    """:func:`segment_find` of a level after the first for the pairs ``idx`` only (increasing:
    those a filter may hold) that are not found yet (a pair is in one level at most)."""
    pc, pa, pp = np.int64(-1), np.int64(-1), np.int64(0)  # the previous pair searched
    for i in idx:
        if found[i]:
            continue
        c = np.int64(cno[i])
        lo, end = np.int64(indptr[c]), np.int64(indptr[c + 1])
        a = np.int64(agent[i])
        hi = end
        if c == pc and a > pa:
            lo = pp
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
        pc, pa, pp = c, a, lo
        if lo < end and text_agent[ev[lo]] == a:
            found[i] = True
            if text_time[cx[i]] < text_time[ev[lo]]:
                ev[lo] = cx[i]


@numba.njit([(U64, I64, U32, U32, I64, I32, U32, B1)], cache=True)
def filter_adopt(words: np.ndarray, start: np.ndarray, size: np.ndarray, count: np.ndarray,
                 idx: np.ndarray, cno: np.ndarray, agent: np.ndarray, found: np.ndarray,
                 ) -> None:
    """The pairs ``idx`` (cascade ``cno``, agent) not ``found`` (new adoptions) set in their
    cascades' filters and counted in ``count``, in place."""
    for i in idx:
        if found[i]:
            continue
        c = np.int64(cno[i])
        h = _agent_hash(np.int64(agent[i]))
        words[_word(start, size, c, h)] |= _agent_bits(h)
        count[c] += np.uint32(1)


@numba.njit([(U64, I64, U32, I64, U32, U32)], cache=True)
def filter_set(words: np.ndarray, start: np.ndarray, size: np.ndarray, cno: np.ndarray,
               texts: np.ndarray, text_agent: np.ndarray) -> None:
    """The adoptions (cascade ``cno``, text ``texts``: its agent ``text_agent[texts]``) set
    in their cascades' filters, in place."""
    for i in range(len(cno)):
        h = _agent_hash(np.int64(text_agent[texts[i]]))
        words[_word(start, size, cno[i], h)] |= _agent_bits(h)


@numba.njit([(U32, U32, I64, INT, INT)], cache=True)
def filter_layout(size: np.ndarray, count: np.ndarray, new: np.ndarray, fill: int,
                  most: int) -> tuple[np.ndarray, np.ndarray]:
    """The new cascades' adoptions (cascade numbers ``new``) counted in ``count`` (in place);
    then the cascades whose filters are to be made anew: those over ``most`` adopters a word
    (a new one: no word), each with its new size, the largest power of two of words that
    gives each ``fill`` adopters or more (one at least)."""
    for c in new:
        count[c] += np.uint32(1)
    k = 0
    for c in range(len(count)):
        k += np.int64(count[c]) > most * np.int64(size[c])
    numbers = np.empty(k, np.int64)
    sizes = np.empty(k, np.int64)
    k = 0
    for c in range(len(count)):
        if np.int64(count[c]) > most * np.int64(size[c]):
            q = max(np.int64(count[c]) // fill, 1)
            w = 1
            while 2 * w <= q:
                w *= 2
            numbers[k], sizes[k] = c, w
            k += 1
    return numbers, sizes


@numba.njit([(U64, I64, U32, I64, U32, U32, U32)], cache=True)
def filter_fill(words: np.ndarray, start: np.ndarray, size: np.ndarray, numbers: np.ndarray,
                ev: np.ndarray, indptr: np.ndarray, text_agent: np.ndarray) -> None:
    """The adoptions of the cascades ``numbers`` in one level of the store (texts ``ev`` in
    segments ``indptr``; agent ``text_agent`` of a text) set in their filters, in place."""
    m, last = len(numbers), len(ev) - 1
    for k in range(m):
        if k + 8 < m:  # the segments of a big level are far apart: their starts asked for
            prefetch(indptr, numbers[k + 8])  # a few cascades ahead, and their first texts
        if k + 4 < m:
            prefetch(ev, min(np.int64(indptr[numbers[k + 4]]), last))
        c = numbers[k]
        end = np.int64(indptr[c + 1])
        for q in range(np.int64(indptr[c]), end):
            if q + 16 < end:  # the agents' table misses the cache: ask a few texts ahead
                prefetch(text_agent, ev[q + 16])
            h = _agent_hash(np.int64(text_agent[ev[q]]))
            words[_word(start, size, c, h)] |= _agent_bits(h)


@numba.njit([(I64, U32, U32, B1)], cache=True)
def filter_grow(start: np.ndarray, size: np.ndarray, count: np.ndarray, old: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cascades' filter starts, sizes and adopter counts renumbered: the cascades that
    were are where ``old`` is True, in order; the new ones have no word and no adopter."""
    n = len(old)
    start2 = np.empty(n, np.int64)
    size2 = np.empty(n, np.uint32)
    count2 = np.empty(n, np.uint32)
    j = 0
    for c in range(n):
        if old[c]:
            start2[c], size2[c], count2[c] = start[j], size[j], count[j]
            j += 1
        else:
            start2[c], size2[c], count2[c] = 0, 0, 0
    return start2, size2, count2


@numba.njit([(U32, B1)], cache=True)
def segments_grow(indptr: np.ndarray, old: np.ndarray) -> np.ndarray:
    """One level's segment starts renumbered: the cascades that were are where ``old`` is
    True, in order; the new ones' segments empty (one pass, where NumPy takes five)."""
    out = np.empty(len(old) + 1, np.uint32)
    out[0] = 0
    j = 0
    for c in range(len(old)):
        if old[c]:
            out[c + 1] = out[c] + (indptr[j + 1] - indptr[j])
            j += 1
        else:
            out[c + 1] = out[c]
    return out
