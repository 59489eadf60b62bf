"""Compiled kernel of the cooperation engine (:mod:`streams.state.cooperation`): one pass over
a text's UTF-8 bytes gives both what the engine asks of it, whether it holds a technical
keyword and the four parts of its solution score, instead of one substring search a keyword,
the score's substring tests and regular expressions and a bracket check, each its own pass.

Keywords and the score's test needles (:data:`TEST_NEEDLES`) are ASCII and matched in the
bytes with ASCII letters lower-cased: a byte beyond ASCII matches no needle byte, as the
``?`` of :func:`~streams.state.cooperation.fold` matches none (the caller lower-cases a text
holding U+0130 or U+212A first, the two code points beyond ASCII whose lower case is ASCII).
They are looked up by their first two bytes: a table of 65536 slots (``index``; a letter's
either case entered), so a position whose two bytes start no needle costs one load; where a
slot names a needle, it and the others of its two bytes (chained) are compared in full. A
byte the score reads is found by a table of 256 roles, one load a byte. The score's regular
expressions are read as what they match: ```` ``` ```` or two backticks with something between
them (``\\`[^\\`]+\\```); ``#``, ``//``, or ``/*`` then ``*/`` later on the same line
(``/\\*.*\\*/``: ``.`` is anything but a newline); brackets ``()[]{}``
properly nested (a stack).

>>> import numpy as np
>>> scan = tables(("bug", "how to"))
>>> def flags(text): return assess(np.frombuffer(text, np.uint8), *scan, 2)
>>> [flags(t) & TECHNICAL != 0 for t in (b"a deBUG session", b"how  to", b"how to", b"bu", b"")]
[True, False, True, False, False]
>>> f = flags(b"use `x = f(y)`  # then TEST it")
>>> f & CODE != 0, f & COMMENTS != 0, f & TESTS != 0, f & BALANCED != 0
(True, True, True, True)
>>> flags(b"/* a\\n */ ([)]") & (COMMENTS | BALANCED)
0
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from streams.kernels import I64, INT, U8, U8_RO

U8_2D = types.Array(types.uint8, 2, "C")  # the needles' bytes, one a row (zero-padded)

TEST_NEEDLES = ("test", "assert", "expect")  # the score's "mentions tests" (lower-cased)
MAX_KEYWORDS = 63 - len(TEST_NEEDLES)  # one bit each in an int64 mask, the needles' after
# the flags of :func:`assess`: the four parts of the score (its index in a table of 16), then
CODE, COMMENTS, TESTS, BALANCED = 1, 2, 4, 8
TECHNICAL = 16  # a keyword


def index(b0: int, b1: int) -> int:
    """The table's slot of a needle starting with bytes ``b0``, ``b1``."""
    return (b0 << 8) | b1


# a byte's role in the score (0: none, most bytes), and its lower case (ASCII letters)
_ROLE = np.zeros(256, np.uint8)
for _b, _role in ((35, 1), (47, 2), (42, 3), (10, 4), (96, 5), (40, 6), (91, 6), (123, 6),
                  (41, 7), (93, 7), (125, 7)):
    _ROLE[_b] = _role
_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[65:91] += 32


def tables(keywords: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """The lookup tables of ASCII ``keywords`` (each of at least two characters, at most
    :data:`MAX_KEYWORDS` of them) followed by :data:`TEST_NEEDLES`: by a position's two bytes
    (either case of a letter) the first needle they start + 1 (0: none), each needle's next
    one of the same two bytes + 1, the needles' bytes and lengths, the bytes' roles and lower
    case (pass ``len(keywords)`` to :func:`assess`)."""
    if len(keywords) > MAX_KEYWORDS or any(len(k) < 2 for k in keywords):
        raise ValueError(f"at most {MAX_KEYWORDS} keywords of at least two characters")
    words = [k.encode("ascii") for k in (*keywords, *TEST_NEEDLES)]
    first = np.zeros(1 << 16, np.uint8)
    chain = np.zeros(len(words), np.uint8)
    needles = np.zeros((len(words), max(map(len, words))), np.uint8)
    for k in range(len(words) - 1, -1, -1):  # each slot's needles in order
        w = words[k]
        slot = index(w[0], w[1])
        chain[k] = first[slot]
        for b0 in {w[0], *bytes([w[0]]).upper()}:
            for b1 in {w[1], *bytes([w[1]]).upper()}:
                first[(b0 << 8) | b1] = k + 1
        needles[k, :len(w)] = np.frombuffer(w, np.uint8)
    return first, chain, needles, np.array([len(w) for w in words], np.int64), _ROLE, _LOWER


@numba.njit([(U8_RO, U8, U8, U8_2D, I64, U8, U8, INT)], cache=True)
def assess(text: np.ndarray, first: np.ndarray, chain: np.ndarray, needles: np.ndarray,
           lens: np.ndarray, role: np.ndarray, lower: np.ndarray, keywords: int) -> int:
    """The flags of ``text`` (UTF-8 bytes): :data:`TECHNICAL` if it holds one of the first
    ``keywords`` needles of :func:`tables`, :data:`TESTS` one of the test needles (both with
    ASCII letters lower-cased), and :data:`CODE`, :data:`COMMENTS`, :data:`BALANCED` (module
    doc)."""
    n = len(text)
    found = np.int64(0)  # needles found
    flags = 0
    tick = -2  # the last backtick
    opened = -1  # the first "/*" of the line, -1 none
    depth = 0
    stack = np.empty(n, np.uint8)  # the open brackets' closers
    nested = True
    pair = np.int64(text[0]) if n else 0  # the two bytes at i (the second one's in bits 0-7)
    for i in range(n):
        b = np.int64(text[i])
        r = role[b]
        if r:
            if r == 1:  # "#"
                flags |= COMMENTS
            elif r == 2:  # "/"
                if i + 1 < n:
                    if text[i + 1] == 47:
                        flags |= COMMENTS
                    elif text[i + 1] == 42 and opened < 0:
                        opened = i
            elif r == 3:  # "*": a "*/" closes a "/*" before it (not its own star)
                if opened >= 0 and i >= opened + 2 and i + 1 < n and text[i + 1] == 47:
                    flags |= COMMENTS
            elif r == 4:  # a newline
                opened = -1
            elif r == 5:  # "`"
                if i - tick > 1:  # something between this one and the last
                    if tick >= 0:
                        flags |= CODE
                elif i >= 2 and text[i - 2] == 96:  # (the last one is text[i - 1])
                    flags |= CODE
                tick = i
            elif nested:
                if r == 6:  # an opening bracket: its closer is 41 ")", 93 "]" or 125 "}"
                    stack[depth] = 41 if b == 40 else b + 2
                    depth += 1
                elif depth == 0 or stack[depth - 1] != b:
                    nested = False
                else:
                    depth -= 1
        if i + 1 < n:
            pair = ((pair << 8) | np.int64(text[i + 1])) & 0xFFFF
            k = np.int64(first[pair])
            while k:
                k -= 1
                if i + lens[k] <= n and not found & (np.int64(1) << k):
                    j = 2
                    while j < lens[k] and lower[text[i + j]] == needles[k, j]:
                        j += 1
                    if j == lens[k]:
                        found |= np.int64(1) << k
                k = np.int64(chain[k])
    if found & ((np.int64(1) << keywords) - 1):
        flags |= TECHNICAL
    if found >> keywords:
        flags |= TESTS
    if nested and depth == 0:
        flags |= BALANCED
    return flags
