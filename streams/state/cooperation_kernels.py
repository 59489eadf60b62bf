"""Compiled kernel of the cooperation engine (:mod:`streams.state.cooperation`): whether a
folded text holds any of the technical keywords, in one pass over its bytes instead of one
substring search a keyword (21 passes over a text that holds none, most of them).

The keywords are looked up by their first two bytes: a table of 4096 bit masks indexed by the
low six bits of each (``index``), so a position whose two bytes start no keyword costs one
load; where a mask is set, each keyword it names is compared in full (the first two bytes too:
the index is lossy).

>>> import numpy as np
>>> first, needles, lens = tables(("bug", "how to"))
>>> def holds(text): return holds_any(np.frombuffer(text, np.uint8), first, needles, lens)
>>> holds(b"a debug session"), holds(b"how  to"), holds(b"how to"), holds(b"bu"), holds(b"")
(True, False, True, False, False)
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from streams.kernels import I64, U8_RO

U8_2D = types.Array(types.uint8, 2, "C")  # the keywords' bytes, one a row (zero-padded)

MAX_KEYWORDS = 63  # one bit each in an int64 mask


def index(b0: int, b1: int) -> int:
    """The table's slot of a keyword starting with bytes ``b0``, ``b1``."""
    return ((b0 & 63) << 6) | (b1 & 63)


def tables(keywords: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lookup tables of ASCII ``keywords`` (each of at least two characters, at most
    :data:`MAX_KEYWORDS` of them): the masks by first two bytes, the keywords' bytes and
    lengths."""
    words = [k.encode("ascii") for k in keywords]
    if len(words) > MAX_KEYWORDS or any(len(w) < 2 for w in words):
        raise ValueError("at most 63 keywords of at least two characters")
    first = np.zeros(4096, np.int64)
    needles = np.zeros((len(words), max(map(len, words), default=2)), np.uint8)
    for k, w in enumerate(words):
        first[index(w[0], w[1])] |= 1 << k
        needles[k, :len(w)] = np.frombuffer(w, np.uint8)
    return first, needles, np.array([len(w) for w in words], np.int64)


@numba.njit([(U8_RO, I64, U8_2D, I64)], cache=True)
def holds_any(text: np.ndarray, first: np.ndarray, needles: np.ndarray,
              lens: np.ndarray) -> bool:
    """Whether any keyword of :func:`tables` occurs in ``text`` (bytes)."""
    n = len(text)
    for i in range(n - 1):
        b0, b1 = np.int64(text[i]), np.int64(text[i + 1])
        m = first[((b0 & 63) << 6) | (b1 & 63)]
        k = 0
        while m:
            if m & 1 and i + lens[k] <= n and b0 == needles[k, 0] and b1 == needles[k, 1]:
                j = 2
                while j < lens[k] and text[i + j] == needles[k, j]:
                    j += 1
                if j == lens[k]:
                    return True
            m >>= 1
            k += 1
    return False
