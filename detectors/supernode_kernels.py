"""Compiled kernel of the super-node detector's snapshot (:mod:`detectors.supernode`): the
window's graph read from its slot arrays in one pass, for the PageRank, instead of a dozen
NumPy passes (masks, gathers, an index map) each snapshot.

>>> src, dst = np.array([0, 2, 3, 0], np.int32), np.array([2, 0, 0, 3], np.int32)
>>> w, degree = np.array([1, 0, 2, 3], np.int32), np.array([2, 0, 1, 2], np.int32)
>>> s, d, weights, nodes, start = window_graph(src, dst, w, degree, np.array([0.5, 0.1, 0.2]))
>>> s.tolist(), d.tolist(), weights.tolist(), nodes.tolist(), start.tolist()
([0, 2, 0], [1, 0, 2], [1.0, 2.0, 3.0], [0, 2, 3], [0.5, 0.2, 0.0])
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import F64, I32, I64

_GRAPH = numba.types.Tuple((I64, I64, F64, I64, F64))


@numba.njit(_GRAPH(I32, I32, I32, I32, F64), cache=True)
def window_graph(src: np.ndarray, dst: np.ndarray, w: np.ndarray, degree: np.ndarray,
                 last: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                            np.ndarray]:
    """The live slots (``w > 0``) in slot order: their ends renumbered over the nodes with
    live edges (``degree != 0``, numbered in index order) and their weights as floats; those
    nodes; and their values in ``last`` (by node index, 0 past its end): a warm start."""
    number = np.empty(len(degree), np.int64)
    count = 0
    for i in range(len(degree)):
        if degree[i] != 0:
            number[i] = count
            count += 1
    nodes = np.empty(count, np.int64)
    start = np.empty(count)
    for i in range(len(degree)):
        if degree[i] != 0:
            j = number[i]
            nodes[j] = i
            start[j] = last[i] if i < len(last) else 0.0
    live = 0
    for k in range(len(w)):
        if w[k] > 0:
            live += 1
    s = np.empty(live, np.int64)
    d = np.empty(live, np.int64)
    weights = np.empty(live)
    j = 0
    for k in range(len(w)):
        if w[k] > 0:
            s[j] = number[src[k]]
            d[j] = number[dst[k]]
            weights[j] = w[k]
            j += 1
    return s, d, weights, nodes, start
