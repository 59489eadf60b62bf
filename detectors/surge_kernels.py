"""Compiled kernel of the surge detector's entity extraction (:mod:`detectors.surge`): one pass
over a text's token ids and its words' lengths and letter mask finds where each entity scan
has something to read, so that the Python scans run only on the few texts (and tokens) that
can hold an entity instead of on every text.

Candidates are found by token id (``"."`` then a known top-level domain, the ``tick`` key of an
inscription): equal tokens have equal ids, so no candidate is missed, and the caller compares
the tokens themselves before it uses one.

>>> import numpy as np
>>> ids = np.array([5, 1, 7, 9, 1, 8], np.uint64)  # "." is 1, the domains 7 and 8, tick 9
>>> # words 0, 2, 3 are all letters, word 1 is long; dots at tokens 1 and 4
>>> lens = np.array([3, 40, 2, 3], np.int64)
>>> alpha = np.array([True, False, True, True])
>>> pos, n_template, n_long, n_dots, tick = candidates(
...     ids, lens, alpha, np.array([7, 8], np.uint64), 1, 9, 64, 40, 32)
>>> pos.tolist(), n_template, n_long, n_dots, tick
([0, 2, 3, 1, 1, 4], 3, 1, 2, True)
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import B1, BOOL, I64, INT, U64, UINT

_RESULT = numba.types.Tuple((I64, INT, INT, INT, BOOL))


@numba.njit(_RESULT(U64, I64, B1, U64, UINT, UINT, INT, INT, INT), cache=True)
def candidates(ids: np.ndarray, word_lens: np.ndarray, word_alpha: np.ndarray,
               domains: np.ndarray, dot: int, tick: int, template_scan: int,
               template_words: int, long_word: int,
               ) -> tuple[np.ndarray, int, int, int, bool]:
    """Positions, in one array: the template's words (the first ``template_words`` all-letter
    words among the first ``template_scan`` words), then the words at least ``long_word`` code
    points long, then the tokens ``i`` (1 <= i < n - 1) whose id is ``dot`` followed by one of
    ``domains``; the three counts; whether a token's id is ``tick``."""
    n, nw = len(ids), len(word_lens)
    pos = np.empty(min(nw, template_scan, template_words) + nw + n, np.int64)
    k = 0
    for w in range(min(nw, template_scan)):
        if word_alpha[w]:
            pos[k] = w
            k += 1
            if k == template_words:
                break
    n_template = k
    for w in range(nw):
        if word_lens[w] >= long_word:
            pos[k] = w
            k += 1
    n_long = k - n_template
    has_tick = False
    for i in range(n):
        t = ids[i]
        if t == tick:
            has_tick = True
        elif t == dot and 1 <= i < n - 1:
            nxt = ids[i + 1]
            for d in domains:
                if nxt == d:
                    pos[k] = i
                    k += 1
                    break
    return pos[:k], n_template, n_long, k - n_template - n_long, has_tick
