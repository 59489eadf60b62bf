"""Compiled kernel of the surge detector's entity extraction (:mod:`detectors.surge`): one pass
over a text's token ids and its words' lengths and letter mask finds where each entity scan
has something to read, so that the Python scans run only on the few texts (and tokens) that
can hold an entity instead of on every text.

Candidates are found by token id (``"."`` then a known top-level domain, the ``tick`` key of an
inscription): equal tokens have equal ids, so no candidate is missed, and the caller compares
the tokens themselves before it uses one. The ids and the scan's bounds are constants compiled
in (a call passes only the text's four arrays and the output: each argument costs the
dispatcher time).

The positions found are written into an array the caller passes (``out``), their count
returned, not returned as an array of their own: boxing a returned array costs a call more
than the scan of a text (most texts list none); a call that finds ``out`` too short writes
nothing and returns -1.

>>> from streams.text import Text
>>> text = Text.of("gm 0x" + "a" * 40 + " on mbc20.xyz tick")
>>> out = np.empty(64, np.int64)
>>> def scan(text):
...     return candidates(text.ids, text.word_ids, text.word_lengths, text.word_alpha, out)
>>> k, n_template, spread, n_long, n_dots, tick, key = scan(text)
>>> text.tokens
['gm', '0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'on', 'mbc20', '.', 'xyz', 'tick']
>>> out[:k].tolist(), n_template, spread, n_long, n_dots, tick  # the address; the dot; gm on..
([1, 4, 0, 2, 4, 5], 4, True, 1, 1, True)
>>> key == scan(Text.of("GM 42 on... mbc20 : xyz, tick"))[-1]  # the same template words
True
>>> text = Text.of("gm all . xyz")  # the template is the first words: not listed
>>> k, *counts = scan(text)[:-1]
>>> out[:k].tolist(), counts
([2], [3, False, 0, 1, False])
>>> candidates(text.ids, text.word_ids, text.word_lengths, text.word_alpha, out[:6])[0]
-1
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import B1, BOOL, I64, INT, U64, UINT
from streams.text import token_ids
from streams.textscan import K

TLDS = ("xyz", "com", "io", "ai", "fun", "app", "net", "org", "gg", "so", "co", "me", "lol",
        "meme")
TEMPLATE_SCAN, TEMPLATE_WORDS = 64, 40  # the template: first 40 all-letter of the first 64
CONTRACT_MIN = 32  # code points of the shortest contract (base58 32-44, EVM 42)
# "." then "tick" then the top-level domains (uint64 in one array: compared as uint64)
_IDS = token_ids([".", "tick", *TLDS])
# the tokens that are marks alone (a ticker's "$", a hashtag's or a heading's "#"), and the
# marks each holds
MARKS = ("$", "#", "##", "###", "####", "$$")
_MARK_IDS = token_ids(list(MARKS))
_MARK_COUNTS = np.array([len(m) for m in MARKS], np.int64)

_RESULT = numba.types.Tuple((INT, INT, BOOL, INT, INT, BOOL, UINT))
_MARKS_RESULT = numba.types.Tuple((INT, INT))


@numba.njit(_RESULT(U64, U64, I64, B1, I64), cache=True)
def candidates(ids: np.ndarray, word_ids: np.ndarray, word_lens: np.ndarray,
               word_alpha: np.ndarray, out: np.ndarray) -> tuple[int, int, bool, int, int, bool,
                                                                 int]:
    """Positions, written into ``out`` (their count returned; -1 when ``out`` is shorter than
    the words, the tokens and the template's longest count together): the words at least
    ``CONTRACT_MIN`` code points long, then the tokens ``i`` (1 <= i < n - 1) that are
    ``"."`` followed by one of ``TLDS``, then the template's words (the first
    ``TEMPLATE_WORDS`` all-letter words among the first ``TEMPLATE_SCAN`` words) unless they
    are the first words themselves (``spread`` False: the caller takes them as one slice, and
    the positions it converts stay few); the template's count, ``spread``, the other two
    counts; whether a token is ``tick``; the template's key (a rolling hash of its word ids,
    then of its count: equal templates, equal keys; two different ones of all the templates a
    process sees share one with odds ~N^2 / 2^65, as two n-grams share an id,
    :mod:`streams.text`)."""
    template_scan, template_words, long_word = TEMPLATE_SCAN, TEMPLATE_WORDS, CONTRACT_MIN
    dot, tick, domains = _IDS[0], _IDS[1], _IDS[2:]
    n, nw = len(ids), len(word_lens)
    pos = out
    if len(pos) < nw + n + min(nw, template_scan, template_words):
        return -1, 0, False, 0, 0, False, np.uint64(0)
    k = 0
    for w in range(nw):
        if word_lens[w] >= long_word:
            pos[k] = w
            k += 1
    n_long = k
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
    n_dots = k - n_long
    spread = False
    key = np.uint64(0)
    for w in range(min(nw, template_scan)):
        if word_alpha[w]:
            pos[k] = w
            key = key * K + word_ids[w]
            spread = spread or w != k - n_long - n_dots
            k += 1
            if k - n_long - n_dots == template_words:
                break
    n_template = k - n_long - n_dots
    key = key * K + np.uint64(n_template)
    return k if spread else n_long + n_dots, n_template, spread, n_long, n_dots, has_tick, key


@numba.njit(_MARKS_RESULT(U64, I64), cache=True)
def marks(ids: np.ndarray, out: np.ndarray) -> tuple[int, int]:
    """The positions of the tokens that are one of ``MARKS`` (written into ``out``, their
    count returned; -1 when ``out`` is shorter than ``ids``), and the ``$`` and ``#`` they
    hold: when the text holds no other (the caller counts its own), a token ending in a mark
    is one of these.

    >>> from streams.text import Text
    >>> text = Text.of("## GM $claw ($pepe")
    >>> out = np.empty(8, np.int64)
    >>> k, held = marks(text.ids, out)
    >>> text.tokens, out[:k].tolist(), held
    (['##', 'gm', '$', 'claw', '($', 'pepe'], [0, 2], 3)
    """
    mark_ids, counts = _MARK_IDS, _MARK_COUNTS
    pos = out
    if len(pos) < len(ids):
        return -1, 0
    k = held = 0
    for i in range(len(ids)):
        t = ids[i]
        for j in range(len(mark_ids)):
            if t == mark_ids[j]:
                pos[k] = i
                k += 1
                held += counts[j]
                break
    return k, held
