"""Compiled kernel of the surge detector's entity extraction (:mod:`detectors.surge`): one pass
over a text's token ids and its words' lengths and letter mask finds where each entity scan
has something to read, so that the Python scans run only on the few texts (and tokens) that
can hold an entity instead of on every text.

Candidates are found by token id (``"."`` then a known top-level domain, the ``tick`` key of an
inscription): equal tokens have equal ids, so no candidate is missed, and the caller compares
the tokens themselves before it uses one. The ids and the scan's bounds are constants compiled
in (a call passes only the text's three arrays: each argument costs the dispatcher time).

>>> from streams.text import Text
>>> text = Text.of("gm 0x" + "a" * 40 + " on mbc20.xyz tick")
>>> pos, n_template, n_long, n_dots, tick = candidates(text.ids, text.word_lengths,
...                                                    text.word_alpha)
>>> text.tokens
['gm', '0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'on', 'mbc20', '.', 'xyz', 'tick']
>>> pos.tolist(), n_template, n_long, n_dots, tick  # words gm on xyz tick; the address; the dot
([0, 2, 4, 5, 1, 4], 4, 1, 1, True)
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import B1, BOOL, I64, INT, U64
from streams.text import token_ids

TLDS = ("xyz", "com", "io", "ai", "fun", "app", "net", "org", "gg", "so", "co", "me", "lol",
        "meme")
TEMPLATE_SCAN, TEMPLATE_WORDS = 64, 40  # the template: first 40 all-letter of the first 64
CONTRACT_MIN = 32  # code points of the shortest contract (base58 32-44, EVM 42)
# "." then "tick" then the top-level domains (uint64 in one array: compared as uint64)
_IDS = token_ids([".", "tick", *TLDS])

_RESULT = numba.types.Tuple((I64, INT, INT, INT, BOOL))


@numba.njit(_RESULT(U64, I64, B1), cache=True)
def candidates(ids: np.ndarray, word_lens: np.ndarray, word_alpha: np.ndarray,
               ) -> tuple[np.ndarray, int, int, int, bool]:
    """Positions, in one array: the template's words (the first ``TEMPLATE_WORDS`` all-letter
    words among the first ``TEMPLATE_SCAN`` words), then the words at least ``CONTRACT_MIN``
    code points long, then the tokens ``i`` (1 <= i < n - 1) that are ``"."`` followed by one
    of ``TLDS``; the three counts; whether a token is ``tick``."""
    template_scan, template_words, long_word = TEMPLATE_SCAN, TEMPLATE_WORDS, CONTRACT_MIN
    dot, tick, domains = _IDS[0], _IDS[1], _IDS[2:]
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
