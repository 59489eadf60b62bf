"""Compiled kernels of the PageRank power iteration (:mod:`streams.state.pagerank`) and of
Brandes' betweenness (:mod:`streams.state.roles`, :func:`brandes`).

One iteration in NumPy is about eight passes and as many temporary arrays (the sparse product,
the dangling mass, the teleport, the L1 change); here it is one pass over the edges and two
over the nodes, with no allocation. The floats are NumPy's own: the product sums each target's
terms in edge order (as ``scipy``'s COO product and ``np.bincount`` do), and every sum NumPy
would take (``p[dangling].sum()``, ``np.abs(new - p).sum()``) is taken by :func:`pairwise_sum`,
NumPy's pairwise summation step for step (blocks of 8 accumulators up to 128 elements, halved
at a multiple of 8 above), so the vectors are bit-identical to the NumPy iteration they replace
(tests/unit/test_pagerank.py holds them equal).

>>> import numpy as np
>>> a = np.random.default_rng(0).random(1000)
>>> bool(pairwise_sum(a, 0, len(a)) == a.sum())
True
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import B1, BOOL, F64, FLOAT, I32, I64, INT


@numba.njit(cache=True)
def _block_sum(a: np.ndarray, lo: int, n: int) -> float:
    """NumPy's pairwise summation of at most 128 elements: a plain loop under 8, else eight
    accumulators over the whole blocks of 8 and the rest added one by one."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    whole = n - n % 8
    i = 8
    while i < whole:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit([(F64, INT, INT)], cache=True)
def pairwise_sum(a: np.ndarray, lo: int, n: int) -> float:
    """``a[lo:lo + n].sum()`` as NumPy computes it (its pairwise summation): above 128
    elements the range splits at half (rounded down to a multiple of 8) and the two halves'
    sums are added. The recursion is walked with an explicit stack (a recursive function
    does not survive numba's on-disk cache)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    los = np.empty(64, np.int64)  # each level halves the range: 64 levels are plenty
    ns = np.empty(64, np.int64)
    left = np.empty(64)
    on_right = np.zeros(64, np.bool_)
    top = 0
    los[0], ns[0], on_right[0] = lo, n, False
    while True:
        m = ns[top]
        if m > 128:  # descend into the left half
            half = m // 2
            half -= half % 8
            los[top + 1], ns[top + 1], on_right[top + 1] = los[top], half, False
            top += 1
            continue
        res = _block_sum(a, los[top], m)
        while True:  # climb while this was a right half, adding it to its left sibling
            if top == 0:
                return res
            if on_right[top]:
                top -= 1
                res = left[top] + res
                continue
            break
        # a left half is done: keep it at its parent, then do the right half
        left[top - 1] = res
        half = ns[top]
        los[top], ns[top], on_right[top] = los[top - 1] + half, ns[top - 1] - half, True


@numba.njit([(I64, F64, INT, BOOL)], cache=True, error_model="numpy")
def transitions(src: np.ndarray, w: np.ndarray, n: int,
                skip_empty: bool) -> tuple[np.ndarray, np.ndarray]:
    """(each node's out-weight, each edge's coefficient ``w / outweight[src]``) in two passes
    and no temporary: the out-weights are ``np.bincount(src, weights=w, minlength=n)`` (added
    in edge order, as it adds), the coefficients NumPy's division, 0.0 where ``w`` is not
    positive when ``skip_empty`` (``np.divide(..., where=w > 0)`` into zeros: an emptied slot).
    ``src`` must lie in 0..n-1."""
    outw = np.zeros(n)
    for k in range(len(src)):
        outw[src[k]] += w[k]
    coef = np.empty(len(src))
    for k in range(len(src)):
        coef[k] = 0.0 if skip_empty and not w[k] > 0 else w[k] / outw[src[k]]
    return outw, coef


@numba.njit([(I64, I64, F64, F64, I64, F64, FLOAT, INT, FLOAT, INT)], cache=True)
def power_iterate(src: np.ndarray, dst: np.ndarray, coef: np.ndarray, p: np.ndarray,
                  dangling: np.ndarray, teleport: np.ndarray, alpha: float, n: int,
                  tol: float, max_iter: int) -> tuple[np.ndarray, int]:
    """Iterate ``new = alpha * (P^T p) + (alpha * p[dangling].sum() + 1 - alpha) / n *
    teleport`` from ``p`` until ``|new - p|_1 < tol`` or ``max_iter`` iterations; ``P^T p``
    sums ``coef[k] * p[src[k]]`` into ``dst[k]`` in edge order. Returns (p, iterations)."""
    size = len(p)
    new = np.empty(size)
    diff = np.empty(size)
    held = np.empty(len(dangling))
    prod = np.empty(size)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is returned)
        for i in range(len(dangling)):
            held[i] = p[dangling[i]]
        c = (alpha * pairwise_sum(held, 0, len(held)) + 1.0 - alpha) / n
        prod[:] = 0.0
        for k in range(len(src)):
            prod[dst[k]] += coef[k] * p[src[k]]
        for i in range(size):
            new[i] = alpha * prod[i] + c * teleport[i]
            diff[i] = abs(new[i] - p[i])
        change = pairwise_sum(diff, 0, size)
        p, new = new, p
        if change < tol:
            break
    return p, it


@numba.njit([(I32, I32, INT, I64)], cache=True)
def brandes(indptr: np.ndarray, indices: np.ndarray, n: int,
            sources: np.ndarray) -> np.ndarray:
    """Unscaled Brandes dependencies of a directed unweighted graph (CSR of out-edges, no
    duplicate pairs; int32, scipy's own) summed over ``sources`` in order: a BFS a source,
    level by level, the frontier in ascending node order and each node's edges in CSR order,
    path counts and then dependencies added edge by edge in that order: the additions, so the
    floats, of the level-synchronous NumPy version (``np.add.at`` over each level's edges) it
    replaces. Node ids, levels and the kept edges are int32: half the bytes the BFS streams
    and scatters of int64 (10 % less time on a 448k-pair graph)."""
    bc = np.zeros(n)
    dist = np.empty(n, np.int32)
    sigma = np.empty(n)
    delta = np.empty(n)
    esrc = np.empty(len(indices), np.int32)  # each edge is kept at most once a BFS
    edst = np.empty(len(indices), np.int32)
    ends = np.empty(n + 1, np.int64)  # where each level's edges end
    frontier = np.empty(n, np.int32)
    for s in sources:
        dist[:] = -1
        sigma[:] = 0.0
        dist[s], sigma[s] = 0, 1.0
        frontier[0] = s
        width, d, kept, levels = 1, 0, 0, 0
        while width:
            fresh = 0
            nd = d + 1
            for f in range(width):
                u = frontier[f]
                su = sigma[u]
                for k in range(indptr[u], indptr[u + 1]):
                    v = indices[k]
                    dv = dist[v]
                    if dv < 0:  # reached first at this level
                        dist[v] = dv = nd
                        frontier[width + fresh] = v
                        fresh += 1
                    if dv == nd:
                        sigma[v] += su
                        esrc[kept], edst[kept] = u, v
                        kept += 1
            ends[levels] = kept
            levels += 1
            frontier[:fresh] = np.sort(frontier[width:width + fresh])
            width = fresh
            d += 1
        delta[:] = 0.0
        for lv in range(levels - 1, -1, -1):
            for k in range(ends[lv - 1] if lv else 0, ends[lv]):
                u, v = esrc[k], edst[k]
                delta[u] += sigma[u] / sigma[v] * (1.0 + delta[v])
        delta[s] = 0.0
        for i in range(n):
            bc[i] += delta[i]
    return bc


@numba.njit(cache=True)
def _node_of(a: int, node_of: np.ndarray, agent: np.ndarray, deg: np.ndarray,
             free_nodes: np.ndarray, p: np.ndarray, alive: np.ndarray,
             counts: np.ndarray) -> int:
    """Agent key ``a``'s node id: its own, else the last freed id, else a new one."""
    u = node_of[a]
    if u >= 0:
        return u
    if counts[1]:  # free ids: a stack
        counts[1] -= 1
        u = free_nodes[counts[1]]
    else:
        u = counts[0]
        counts[0] += 1
        deg[u] = 0
    agent[u] = a
    node_of[a] = u
    p[u] = 0.0  # a fresh node starts from the uniform share (WindowPageRank.vector)
    alive[u] = True
    counts[6] += 1
    return u


@numba.njit([(I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, F64,
              F64, B1, I64)], cache=True)
def window_apply(keys: np.ndarray, units: np.ndarray, src: np.ndarray, dst: np.ndarray,
                 slot_of: np.ndarray, node_of: np.ndarray, agent: np.ndarray,
                 deg: np.ndarray, free_nodes: np.ndarray, free_slots: np.ndarray,
                 slot_key: np.ndarray, slot_seq: np.ndarray, es: np.ndarray, ed: np.ndarray,
                 ew: np.ndarray, p: np.ndarray, alive: np.ndarray, counts: np.ndarray) -> bool:
    """One batch of :class:`streams.state.pagerank.WindowPageRank`: edge key ``keys[i]``
    (``src[i] -> dst[i]``, agent keys) changes by ``units[i]``. New edges take a slot from
    the top of ``free_slots`` (the caller made room) in batch order, their source's then
    their target's node id; edges whose weight falls to 0 free their slot, then their
    source's and target's ids once unused, in batch order. ``counts``: node ids ever, free
    ids, free slots, high-water mark, creation sequence, live edges, live nodes (updated).
    Returns whether a weight changed. Negative weights are the caller's to refuse first."""
    m = len(keys)
    slots = np.empty(m, np.int64)
    for i in range(m):
        k, d = keys[i], units[i]
        s = slot_of[k]
        if d == 0 or (s < 0 and src[i] == dst[i]):
            slots[i] = -1  # changes nothing
            continue
        if s < 0:
            u = _node_of(src[i], node_of, agent, deg, free_nodes, p, alive, counts)
            v = _node_of(dst[i], node_of, agent, deg, free_nodes, p, alive, counts)
            counts[2] -= 1
            s = free_slots[counts[2]]
            slot_of[k] = s
            if s >= counts[3]:
                counts[3] = s + 1
            slot_key[s], slot_seq[s] = k, counts[4]
            counts[4] += 1
            es[s], ed[s], ew[s] = u, v, 0.0
            deg[u] += 1
            deg[v] += 1
            counts[5] += 1
        slots[i] = s
    changed = False
    for i in range(m):
        s = slots[i]
        if s >= 0:
            ew[s] += float(units[i])
            changed = True
    for i in range(m):  # edges that left: their slots, then their nodes
        s = slots[i]
        if s >= 0 and ew[s] == 0.0:
            slot_of[slot_key[s]] = -1
            slot_key[s] = -1
            free_slots[counts[2]] = s
            counts[2] += 1
            counts[5] -= 1
    for i in range(m):
        s = slots[i]
        if s >= 0 and ew[s] == 0.0:
            for x in (es[s], ed[s]):
                deg[x] -= 1
                if deg[x] == 0:
                    node_of[agent[x]] = -1
                    agent[x] = -1
                    free_nodes[counts[1]] = x
                    counts[1] += 1
                    p[x] = 0.0
                    alive[x] = False
                    counts[6] -= 1
    return changed
