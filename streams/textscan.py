"""Compiled kernels of the one text path (:mod:`streams.text`): the tokeniser's scan and the
token cache's hash table, over the UTF-8 bytes of a lower-cased text.

A token is a maximal run of word characters or a maximal run of punctuation characters
(``\\w+|[^\\w\\s]+``): each code point's class (``SPACE``, ``WORD``, ``PUNCT``; ``UNKNOWN`` until
:mod:`streams.text` classifies it with the regular expression's own ``\\w`` and ``\\s``) is read
from a table indexed by code point. The cache keeps each distinct token's UTF-8 bytes in one
flat array and finds a token's row by an FNV-1a hash of its bytes in an open-addressing table
(``slots``: row + 1, 0 empty; linear probing), the bytes compared in full: a row is only ever
found for the very same token. Every array is plain NumPy, owned and grown by
:mod:`streams.text`.

>>> import numpy as np
>>> cls = np.full(128, SPACE, np.uint8)
>>> cls[ord("a"):ord("z") + 1] = WORD
>>> cls[ord("!")] = PUNCT
>>> data = np.frombuffer(b"gm gm!!", np.uint8)
>>> bounds(data, cls).tolist()
[[0, 2], [3, 5], [5, 7]]
"""

from __future__ import annotations

import numba
import numpy as np

from streams.kernels import I64, INT, U8, U8_RO, U64

SPACE, WORD, PUNCT, UNKNOWN = 0, 1, 2, 3
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the n-grams' rolling hash


@numba.njit(cache=True)
def _char(data: np.ndarray, i: int) -> tuple[int, int]:
    """The code point starting at byte ``i`` of valid UTF-8, and its length in bytes."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return (((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6)
                | (np.int64(data[i + 2]) & 0x3F)), 3
    return (((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
            | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)), 4


@numba.njit(cache=True)
def _token(data: np.ndarray, i: int, cls: np.ndarray) -> tuple[int, int, np.uint64]:
    """The next token at or after byte ``i``: (start, end, hash of its bytes); (n, n, 0) when
    there is none, and (-1, -1, 0) at a code point not yet classified."""
    n = len(data)
    while i < n:
        c, w = _char(data, i)
        kind = cls[c]
        if kind == UNKNOWN:
            return -1, -1, _FNV_OFFSET
        if kind != SPACE:
            s = i
            h = _FNV_OFFSET
            while True:  # the run of one class, hashed as it is read
                for j in range(i, i + w):
                    h = (h ^ np.uint64(data[j])) * _FNV_PRIME
                i += w
                if i == n:
                    break
                c, w = _char(data, i)
                k = cls[c]
                if k == UNKNOWN:
                    return -1, -1, _FNV_OFFSET
                if k != kind:
                    break
            return s, i, h
        i += w
    return n, n, _FNV_OFFSET


@numba.njit(cache=True)
def _hash(data: np.ndarray, s: int, e: int) -> np.uint64:
    h = _FNV_OFFSET
    for i in range(s, e):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
    return h


@numba.njit(cache=True)
def _find(data: np.ndarray, s: int, e: int, h: np.uint64, slots: np.ndarray,
          hashes: np.ndarray, starts: np.ndarray, lens: np.ndarray, chars: np.ndarray) -> int:
    """The row of the token ``data[s:e]`` of hash ``h``, -1 if the cache does not hold it."""
    mask = len(slots) - 1
    i = np.int64(h & np.uint64(mask))
    n = e - s
    while True:
        v = slots[i]
        if v == 0:
            return -1
        r = v - 1
        if hashes[r] == h and lens[r] == n:
            a = starts[r]
            j = 0
            while j < n and chars[a + j] == data[s + j]:
                j += 1
            if j == n:
                return r
        i = (i + 1) & mask


@numba.njit([(U8_RO, U8, I64, U64, I64, I64, U8)], cache=True)
def scan(data: np.ndarray, cls: np.ndarray, slots: np.ndarray, hashes: np.ndarray,
         starts: np.ndarray, lens: np.ndarray, chars: np.ndarray) -> tuple[np.ndarray, int]:
    """The cache rows of the tokens of ``data`` (-1: not cached) and how many are missing;
    (empty, -1) if the text holds a code point not yet classified."""
    rows = np.empty(len(data), np.int64)
    k = 0
    missing = 0
    i = 0
    while True:
        s, e, h = _token(data, i, cls)
        if s < 0:
            return rows[:0], -1
        if s == e:
            return rows[:k], missing
        r = _find(data, s, e, h, slots, hashes, starts, lens, chars)
        missing += r < 0
        rows[k] = r
        k += 1
        i = e


@numba.njit([(U8_RO, U8)], cache=True)
def bounds(data: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """(start, end) bytes of each token of ``data`` (every code point classified)."""
    out = np.empty((len(data), 2), np.int64)
    k = 0
    i = 0
    while True:
        s, e, _ = _token(data, i, cls)
        if s == e:
            return out[:k]
        out[k, 0] = s
        out[k, 1] = e
        k += 1
        i = e


@numba.njit([(U8_RO, I64, I64, U64, I64, I64, U8)], cache=True)
def find_all(data: np.ndarray, ends: np.ndarray, slots: np.ndarray, hashes: np.ndarray,
             starts: np.ndarray, lens: np.ndarray, chars: np.ndarray) -> tuple[np.ndarray, int]:
    """The rows of the tokens ``data[ends[j - 1]:ends[j]]`` (a given token list, joined), -1
    where not cached, and how many are missing."""
    rows = np.empty(len(ends), np.int64)
    missing = 0
    s = 0
    for j in range(len(ends)):
        r = _find(data, s, ends[j], _hash(data, s, ends[j]), slots, hashes, starts, lens,
                  chars)
        missing += r < 0
        rows[j] = r
        s = ends[j]
    return rows, missing


@numba.njit([(I64, U64, I64, I64, U8, INT, INT)], cache=True)
def index(slots: np.ndarray, hashes: np.ndarray, starts: np.ndarray, lens: np.ndarray,
          chars: np.ndarray, r0: int, r1: int) -> None:
    """Enter rows r0..r1-1 (their bytes already in ``chars``) into the hash table."""
    mask = len(slots) - 1
    for r in range(r0, r1):
        h = _hash(chars, starts[r], starts[r] + lens[r])
        hashes[r] = h
        i = np.int64(h & np.uint64(mask))
        while slots[i] != 0:
            i = (i + 1) & mask
        slots[i] = r + 1


@numba.njit([(U64, U64, INT)], cache=True)
def grams(a: np.ndarray, b: np.ndarray, longest: int) -> np.ndarray:
    """The rolling hashes of lengths 2..longest over two id sequences at once: row n - 2 holds
    at position i the n-gram starting at i of ``a``, ``longest - 1`` zeros, then ``b`` (the
    positions whose window reaches past a sequence are the caller's to cut off)."""
    pad = longest - 1
    m = len(a) + pad + len(b)
    base = np.zeros(m + pad, np.uint64)
    base[:len(a)] = a
    base[len(a) + pad:m] = b
    out = np.empty((pad, m), np.uint64)
    for i in range(m):
        g = base[i]
        for j in range(pad):
            g = g * K + base[i + j + 1]
            out[j, i] = g
    return out
