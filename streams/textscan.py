"""Compiled kernels of the one text path (:mod:`streams.text`): the tokeniser's scan and the
token cache's hash table, over the UTF-8 bytes of a text lower-cased here, URLs left out.

The scan lower-cases the text itself, code point by code point (``str.lower`` of a text is the
lower case of each of its code points, but for U+03A3, whose lower case depends on the letters
around it, and U+0130, whose lower case is two code points: a text holding either, or a lone
surrogate, is lower-cased by :mod:`streams.text` before the scan): ASCII by arithmetic, any
other code point by a table of lowered code points (0 until :mod:`streams.text` enters it).

A token is a maximal run of word characters or a maximal run of punctuation characters
(``\\w+|[^\\w\\s]+``): each code point's class (``SPACE``, ``WORD``, ``PUNCT``; ``UNKNOWN``
until :mod:`streams.text` classifies it with the regular expression's own ``\\w`` and ``\\s``)
is read from a table indexed by code point; a text's tokens are found without a branch on where
they start and end (:func:`_runs`; :func:`_url_runs` in a text where a URL may start). The
cache keeps each distinct token's UTF-8 bytes in one flat array and finds a token's row by a
hash of its bytes (read 8 at a time) in an open-addressing table (linear probing) whose slot is
two words: a tag (row + 1 in bits 0-31, 0 empty; the length in bytes, capped at 255, in bits
32-39; whether the token is a word in bit 40; its marks in bits 41-43, below; the hash's top 20
bits above) and the token's first 8 bytes (little-endian, zero-padded). A token of at most 8
bytes is thus found and compared within its slot, one memory access (the look-up of every token
of every text, against a cache the engines' state keeps pushing out of the CPU's caches); a
longer one compares the rest of its bytes in ``chars``: a row is only ever found for the very
same token. A URL
(``(?:https?://|www\\.)\\S+``, the rule's) is skipped where it starts, even inside a run,
exactly as replacing it by a space before the scan would. Every array is plain NumPy, owned and
grown by :mod:`streams.text`.

The same scan gives the flags the cooperation engine asks of every post and comment
(:mod:`streams.state.cooperation`: a technical keyword; the solution score's code, comment
marks, test words and balanced brackets; a backtick), so that it neither encodes nor reads the
text again: a word token's tag marks whether it holds a keyword or a test word (and whether it
ends with "how", the first word of "how to"), set once when the token enters the cache, and the
score's marks (punctuation, newlines) are read from the bytes between the word tokens only; a
text that may hold a URL, whose tokens leave the URL out, is read whole.

>>> import numpy as np
>>> lower = np.zeros(0x250, np.uint32)
>>> lower[[0xc9, 0x23a]] = [0xe9 + 1, 0x2c65 + 1]
>>> buf = np.zeros(32, np.uint8)
>>> n = lowered(np.frombuffer("GM ÉȺ!".encode(), np.uint8), lower, buf)
>>> buf[:n].tobytes().decode()
'gm éⱥ!'
>>> cls = np.full(128, SPACE, np.uint8)
>>> cls[ord("a"):ord("z") + 1] = WORD
>>> cls[ord("!")] = PUNCT
>>> empty, none, out = np.zeros(4, np.uint64), np.zeros(0, np.int64), np.zeros(128, np.int64)
>>> def tokens(text):  # (start, end) of each token, against an empty cache
...     k, _, missing, b, flags = scan(np.frombuffer(text, np.uint8), lower, cls, empty, none,
...                                    none, np.zeros(0, np.uint8), buf, out)
...     return list(zip(out[:k].tolist(), out[b:b + k].tolist())), missing, flags
>>> tokens(b"GM gm!!")
([(0, 2), (3, 5), (5, 7)], 3, 8)
>>> tokens(b"gmhttp://xio y")  # the URL skipped
([(0, 2), (13, 14)], 2, 10)
>>> cls[np.frombuffer(b"`()[]", np.uint8)] = PUNCT
>>> tokens(b"how to")[2] == TECHNICAL | BALANCED, tokens(b"`x` (]")[2] == CODE | TICK
(True, True)
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from streams.kernels import B1, I64, INT, U8, U8_RO, U32, U64, prefetch

SPACE, WORD, PUNCT, UNKNOWN = 0, 1, 2, 3
UNMET, CONTEXT = -1, -2  # the scan's codes: a code point not yet met, one lowered in context
URL = -3  # :func:`_runs`' code: the text may hold a URL
LOWER_CONTEXT = np.uint32(0xFFFFFFFF)  # the lowering table's entry of such a code point
_MUL = np.uint64(0x9E3779B97F4A7C15)  # the token hash's (:func:`_hash`) odd multiplier
_ALL = np.uint64((1 << 64) - 1)
K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the n-grams' rolling hash
# a slot's tag (module doc): row + 1, length, word bit, the hash's top bits
_ROW = np.uint64(0xFFFFFFFF)
_LEN_SHIFT = np.uint64(32)
_LEN_CAP = 255
_WORD_BIT = np.uint64(1 << 40)
# a token's marks (:func:`_marks`): a keyword, a test word, the head of the spaced keyword, a
# byte the solution score reads
_KEY_BIT, _TEST_BIT = np.uint64(1 << 41), np.uint64(1 << 42)
_HEAD_BIT, _ROLE_BIT = np.uint64(1 << 43), np.uint64(1 << 44)
_READ = _HEAD_BIT | _ROLE_BIT  # a token whose bytes the flags read
_INFO = _WORD_BIT | _KEY_BIT | _TEST_BIT | _READ | _ROW  # what a slot's tag says of its row
_HASH_MASK = np.uint64(((1 << 64) - 1) ^ ((1 << 45) - 1))

#: The public code's list (Molt Dynamics' rq3_collaboration.py), matched as lower-cased
#: substrings: the cooperation engine's technical keywords (:mod:`streams.state.cooperation`),
#: whose verdict the scan gives for every text (:func:`scan`'s flags).
TECHNICAL_KEYWORDS: tuple[str, ...] = (
    "error", "bug", "fix", "issue", "problem", "help", "solution", "solve", "debug", "crash",
    "exception", "fail", "broken", "stuck", "how to", "implement", "code", "function",
    "method", "class", "api", "library",
)
TEST_WORDS = ("test", "assert", "expect")  # the solution score's "mentions tests"
# the flags of a text (:func:`scan`): the four parts of the cooperation solution score (its
# index in a table of 16, as :mod:`streams.state.cooperation_kernels` has them), a technical
# keyword, a backtick
CODE, COMMENTS, TESTS, BALANCED, TECHNICAL, TICK = 1, 2, 4, 8, 16, 32


# a byte's letter (a-z: 1-26; 0 any other byte): every needle starts with two letters
_LETTER = np.zeros(256, np.int64)
_LETTER[97:123] = np.arange(1, 27)


def _needle_tables(keywords: tuple[str, ...], tests: tuple[str, ...]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The needles (the keywords that hold no other keyword, which match only where that one
    does, then the test words) by their first two letters (a table of 27 x 27, a byte's
    letter by :data:`_LETTER`: small enough to stay in the CPU's nearest cache): the first
    needle + 1 (0: none), each needle's next of the same two letters + 1, their bytes
    (zero-padded) and lengths, and how many keywords lead."""
    keys = [k for k in keywords if not any(o != k and o in k for o in keywords)]
    words = [w.encode("ascii") for w in (*keys, *tests)]
    first = np.zeros(27 * 27, np.uint8)
    chain = np.zeros(len(words), np.uint8)
    needles = np.zeros((len(words), max(map(len, words))), np.uint8)
    for k in range(len(words) - 1, -1, -1):  # each slot's needles in order
        w = words[k]
        slot = 27 * _LETTER[w[0]] + _LETTER[w[1]]
        assert _LETTER[w[0]] and _LETTER[w[1]], w
        chain[k] = first[slot]
        first[slot] = k + 1
        needles[k, :len(w)] = np.frombuffer(w, np.uint8)
    return first, chain, needles, np.array([len(w) for w in words], np.int64), len(keys)


_FIRST, _CHAIN, _NEEDLES, _NEEDLE_LENS, _KEYS = _needle_tables(TECHNICAL_KEYWORDS, TEST_WORDS)
# the one keyword of two words ("how to"): its first word ends a word token, the space and its
# second word follow (every other keyword lies within one word token)
((_HEAD, _TAIL),) = (k.split(" ") for k in TECHNICAL_KEYWORDS if " " in k)
_HEAD_BYTES = np.frombuffer(_HEAD.encode(), np.uint8).copy()
_TAIL_BYTES = np.frombuffer((" " + _TAIL).encode(), np.uint8).copy()
# a byte's role in the score (0: none, most bytes; :mod:`streams.state.cooperation_kernels`)
_ROLE = np.zeros(256, np.uint8)
for _b, _role in ((35, 1), (47, 2), (42, 3), (10, 4), (96, 5), (40, 6), (91, 6), (123, 6),
                  (41, 7), (93, 7), (125, 7)):
    _ROLE[_b] = _role


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
def _put(buf: np.ndarray, p: int, c: int) -> int:
    """Write code point ``c`` as UTF-8 at byte ``p`` of ``buf``; returns the byte after it."""
    if c < 0x80:
        buf[p] = c
        return p + 1
    if c < 0x800:
        buf[p] = 0xC0 | (c >> 6)
        buf[p + 1] = 0x80 | (c & 0x3F)
        return p + 2
    if c < 0x10000:
        buf[p] = 0xE0 | (c >> 12)
        buf[p + 1] = 0x80 | ((c >> 6) & 0x3F)
        buf[p + 2] = 0x80 | (c & 0x3F)
        return p + 3
    buf[p] = 0xF0 | (c >> 18)
    buf[p + 1] = 0x80 | ((c >> 12) & 0x3F)
    buf[p + 2] = 0x80 | ((c >> 6) & 0x3F)
    buf[p + 3] = 0x80 | (c & 0x3F)
    return p + 4


@intrinsic
def _load8(typingctx: object, arr: types.Array, i: types.Integer) -> tuple[object, object]:
    """The 8 bytes of a byte array from ``arr[i]`` as one little-endian word, read at once
    (any alignment; the caller's to hold ``i + 8 <= len(arr)``): numba's own indexing reads
    byte by byte, each read with its negative-index check, which no compiler merges."""
    def codegen(context: object, builder: ir.IRBuilder, signature: object,
                args: tuple[object, object]) -> object:
        ary = context.make_array(arr)(context, builder, args[0])  # type: ignore[attr-defined]
        ptr = cgutils.get_item_pointer(context, builder, arr, ary, [args[1]])
        word = builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
        return word
    return types.uint64(arr, i), codegen


@intrinsic
def _store8(typingctx: object, arr: types.Array, i: types.Integer, word: types.Integer
            ) -> tuple[object, object]:
    """Write ``word`` as the 8 bytes of a byte array from ``arr[i]``, little-endian, at once
    (any alignment; the caller's to hold ``i + 8 <= len(arr)``): :func:`_load8`'s store."""
    def codegen(context: object, builder: ir.IRBuilder, signature: object,
                args: tuple[object, object, object]) -> object:
        ary = context.make_array(arr)(context, builder, args[0])  # type: ignore[attr-defined]
        ptr = cgutils.get_item_pointer(context, builder, arr, ary, [args[1]])
        builder.store(args[2], builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()  # type: ignore[attr-defined]
    return types.void(arr, i, types.uint64), codegen


_HIGH = np.uint64(0x8080808080808080)  # each byte's top bit
_FROM_A = np.uint64(0x3F3F3F3F3F3F3F3F)  # + 0x3F: an ASCII byte's top bit set from "A" on
_PAST_Z = np.uint64(0x2525252525252525)  # + 0x25: from the byte after "Z" on


@numba.njit([(U8_RO, U32, U8)], cache=True)
def lowered(data: np.ndarray, lower: np.ndarray, buf: np.ndarray) -> int:
    """Write ``data`` (UTF-8) lower-cased to ``buf`` (``lower``: by code point, the lowered
    code point + 1; 0 not yet met; :data:`LOWER_CONTEXT` lowered in context); returns the bytes
    written (at most 1.5 ``len(data)``: U+023A and U+023E take a byte more), or :data:`UNMET` /
    :data:`CONTEXT` at the first such code point. Eight ASCII bytes are lowered at once (one
    word: no byte carries into the next, each below 0x80), A-Z by their 0x20 bit."""
    n = len(data)
    i = 0
    p = 0
    while i < n:
        if i + 8 <= n:  # (``buf`` holds 2 n, p <= 1.5 i: the word fits)
            w = _load8(data, i)
            if not w & _HIGH:
                upper = (w + _FROM_A) & ~(w + _PAST_Z) & _HIGH
                _store8(buf, p, w | (upper >> np.uint64(2)))
                i += 8
                p += 8
                continue
        b = data[i]
        if b < 0x80:
            buf[p] = b + 32 if 65 <= b <= 90 else b  # A-Z, the only ASCII str.lower changes
            i += 1
            p += 1
            continue
        c, w = _char(data, i)
        e = lower[c]
        if e == 0:
            return UNMET
        if e == LOWER_CONTEXT:
            return CONTEXT
        if e - 1 == c:
            for j in range(w):
                buf[p + j] = data[i + j]
            p += w
        else:
            p = _put(buf, p, e - 1)
        i += w
    return p


@numba.njit(cache=True)
def _url_end(data: np.ndarray, i: int, cls: np.ndarray) -> int:
    """The byte after the URL (``(?:https?://|www\\.)\\S+``, case-insensitive, on a lower-cased
    text) that starts at byte ``i``; ``i`` if none starts there, -1 if a code point not yet
    classified decides. The pattern's letters match only themselves in a lower-cased text,
    but ``s`` also matches U+017F (long s, UTF-8 C5 BF), as the regular expression has it."""
    n = len(data)
    if data[i] == 104:  # "http", an optional "s", "://"
        if i + 4 > n or data[i + 1] != 116 or data[i + 2] != 116 or data[i + 3] != 112:
            return i
        j = i + 4
        if j + 1 < n and data[j] == 0xC5 and data[j + 1] == 0xBF:
            j += 2
        elif j < n and data[j] == 115:
            j += 1
        if j + 3 > n or data[j] != 58 or data[j + 1] != 47 or data[j + 2] != 47:
            return i
        j += 3
    elif data[i] == 119:  # "www."
        if i + 4 > n or data[i + 1] != 119 or data[i + 2] != 119 or data[i + 3] != 46:
            return i
        j = i + 4
    else:
        return i
    start = j
    while j < n:  # then every code point up to a space, at least one
        c, w = _char(data, j)
        k = cls[c]
        if k == UNKNOWN:
            return -1
        if k == SPACE:
            break
        j += w
    return j if j > start else i


@numba.njit(cache=True, inline="always")
def _word(data: np.ndarray, s: int, n: int) -> np.uint64:
    """Bytes ``s..s+n-1`` of ``data`` (``n`` 1 to 8) packed little-endian, zero-padded: one
    8-byte read where ``data`` holds 8 bytes from ``s``, else byte by byte."""
    if s + 8 <= len(data):
        return _load8(data, s) & (_ALL >> np.uint64(64 - 8 * n))
    w = np.uint64(0)
    for j in range(n):
        w |= np.uint64(data[s + j]) << np.uint64(8 * j)
    return w


@numba.njit(cache=True, inline="always")
def _hash(data: np.ndarray, s: int, e: int) -> tuple[np.uint64, np.uint64]:
    """The hash of the token ``data[s:e]`` (its bytes read 8 at a time, then multiplied: the
    tag keeps the product's top bits, the slot is its low bits, into which the top half is
    folded) and its first 8 bytes packed."""
    n = e - s
    head = _word(data, s, min(n, 8)) if n > 0 else np.uint64(0)
    h = head
    q = s + 8
    while q < e:
        h = (h ^ (h >> np.uint64(29))) * _MUL + _word(data, q, min(e - q, 8))
        q += 8
    h = (h ^ (np.uint64(n) << np.uint64(56))) * _MUL  # (the top bits mixed, for the tag)
    h ^= h >> np.uint64(32)  # (and into the low bits, for the slot)
    return h, head


@numba.njit(cache=True, inline="always")
def _find(data: np.ndarray, s: int, e: int, h: np.uint64, head: np.uint64, slots: np.ndarray,
          starts: np.ndarray, lens: np.ndarray, chars: np.ndarray) -> tuple[int, np.uint64]:
    """The row of the token ``data[s:e]`` (hash ``h``, first bytes ``head``), -1 if the cache
    does not hold it, and its slot's tag (0 if not held): whether it is a word token, its
    marks (:func:`_marks`)."""
    mask = (len(slots) >> 1) - 1
    i = np.int64(h & np.uint64(mask))
    n = e - s
    want = (h & _HASH_MASK) | (np.uint64(min(n, _LEN_CAP)) << _LEN_SHIFT)
    while True:
        tag = slots[2 * i]
        if tag == 0:
            return -1, tag
        if (tag & ~_INFO) == want and slots[2 * i + 1] == head:
            r = np.int64(tag & _ROW) - 1
            if n <= 8:
                return r, tag
            if n < _LEN_CAP or lens[r] == n:  # (the tag holds a length below the cap)
                a = starts[r]
                j = 8
                while j < n and chars[a + j] == data[s + j]:
                    j += 1
                if j == n:
                    return r, tag
        i = (i + 1) & mask


@numba.njit(cache=True)
def _needles(a: np.ndarray, s: int, e: int) -> int:
    """:data:`TECHNICAL` if ``a[s:e]`` (lower-cased) holds a technical keyword, :data:`TESTS`
    if it holds a test word (each position's two letters looked up: most start no needle)."""
    found = 0
    for i in range(s, e - 1):
        k = np.int64(_FIRST[27 * _LETTER[a[i]] + _LETTER[a[i + 1]]])
        while k:
            k -= 1
            size = _NEEDLE_LENS[k]
            if i + size <= e:
                j = 2
                while j < size and a[i + j] == _NEEDLES[k, j]:
                    j += 1
                if j == size:
                    found |= TECHNICAL if k < _KEYS else TESTS
            k = np.int64(_CHAIN[k])
    return found


@numba.njit(cache=True)
def _holds(a: np.ndarray, i: int, word: np.ndarray) -> bool:
    """Whether the bytes ``word`` are those of ``a`` from byte ``i``."""
    m = len(word)
    if i + m > len(a):
        return False
    j = 0
    while j < m and a[i + j] == word[j]:
        j += 1
    return j == m


@numba.njit(cache=True)
def _ends_head(a: np.ndarray, s: int, e: int) -> bool:
    """Whether the token ``a[s:e]`` ends with the first word of the spaced keyword."""
    return e - s >= len(_HEAD_BYTES) and _holds(a, e - len(_HEAD_BYTES), _HEAD_BYTES)


@numba.njit(cache=True)
def _tail_at(a: np.ndarray, e: int) -> bool:
    """Whether the space and the second word of the spaced keyword start at byte ``e``."""
    return _holds(a, e, _TAIL_BYTES)


@numba.njit(cache=True)
def _marks(a: np.ndarray, s: int, e: int) -> np.uint64:
    """A token's marks in its slot's tag: whether it holds a technical keyword or a test word,
    whether it ends with the spaced keyword's first word, whether it holds a byte the solution
    score reads (:data:`_ROLE`)."""
    found = _needles(a, s, e)
    m = np.uint64(0)
    if found & TECHNICAL:
        m |= _KEY_BIT
    if found & TESTS:
        m |= _TEST_BIT
    if _ends_head(a, s, e):
        m |= _HEAD_BIT
    for i in range(s, e):
        if _ROLE[a[i]]:
            m |= _ROLE_BIT
            break
    return m


@numba.njit(cache=True)
def _flags(a: np.ndarray, out: np.ndarray, k: int, url: bool) -> int:
    """The flags of the lower-cased text ``a`` (:func:`scan`) from its ``k`` tokens (starts
    at ``out[:k]``, ends at ``out[n:]``, tags at ``out[4 n:]``; ``out[5 n:]`` free, the open
    brackets' closers), :mod:`.cooperation_kernels`' rule byte for byte: a cached token's
    keywords and test words are read from its tag, and only the bytes of the tokens whose tag
    says the flags read them (a byte the score reads, the first word of "how to") or that are
    not cached are read. The score's marks are punctuation, but a newline, which matters only
    after a ``/*``: then the bytes up to the next bytes read are searched for one too. In a
    text that may hold a URL, the tokens leave the URLs out: every stretch between two tokens
    longer than one byte (a space, or a URL) is read too, its keywords searched with as many
    bytes around it as a keyword can reach (a keyword within no token overlaps such a
    stretch: it is letters and at most one space, and "how to" over a one-byte space is read
    by the tags)."""
    n = len(a)
    reach = _NEEDLES.shape[1] - 1
    stack = 5 * n
    marks = np.uint64(0)  # the tags' marks, or-ed
    flags = 0
    tick = -2  # the last backtick
    opened = -1  # the first "/*" of the line, -1 none
    depth = 0
    nested = True
    e = 0  # the end of the last bytes read
    j = 0
    while j <= k:
        if url:  # the stretch before token j (after the last token when j == k)
            lo = out[n + j - 1] if j else 0
            hi = out[j] if j < k else n
            gap = hi - lo > 1
        else:
            gap = False
            while j < k:  # (most tokens: their tags alone)
                tag = np.uint64(out[4 * n + j])
                marks |= tag
                if tag == 0 or tag & _READ:
                    break
                j += 1
            if j == k:
                break
        for part in range(2):  # the stretch before the token, if read, then the token
            if part == 0:
                if not gap:
                    continue
                s, t = lo, hi
                flags |= _needles(a, max(lo - reach, 0), min(hi + reach, n))
            else:
                if j == k:
                    break
                tag = np.uint64(out[4 * n + j])
                if url:
                    marks |= tag
                    if tag != 0 and not tag & _READ:
                        break
                s, t = out[j], out[n + j]
                if tag == 0:  # not cached
                    flags |= _needles(a, s, t)
                    if _ends_head(a, s, t) and _tail_at(a, t):
                        flags |= TECHNICAL
                elif tag & _HEAD_BIT and _tail_at(a, t):
                    flags |= TECHNICAL
            if opened >= 0:  # a newline since the last bytes read ends the "/*"'s line
                for i in range(e, s):
                    if a[i] == 10:
                        opened = -1
            e = t
            for i in range(s, t):
                b = np.int64(a[i])
                r = _ROLE[b]
                if r:
                    if r == 1:  # "#"
                        flags |= COMMENTS
                    elif r == 2:  # "/"
                        if i + 1 < n:
                            if a[i + 1] == 47:
                                flags |= COMMENTS
                            elif a[i + 1] == 42 and opened < 0:
                                opened = i
                    elif r == 3:  # "*": a "*/" closes a "/*" before it (not its own star)
                        if opened >= 0 and i >= opened + 2 and i + 1 < n and a[i + 1] == 47:
                            flags |= COMMENTS
                    elif r == 4:  # a newline
                        opened = -1
                    elif r == 5:  # "`"
                        flags |= TICK
                        if i - tick > 1:  # something between this one and the last
                            if tick >= 0:
                                flags |= CODE
                        elif i >= 2 and a[i - 2] == 96:  # (the last one is a[i - 1])
                            flags |= CODE
                        tick = i
                    elif nested:
                        if r == 6:  # an opening bracket: its closer is ")", "]" or "}"
                            out[stack + depth] = 41 if b == 40 else b + 2
                            depth += 1
                        elif depth == 0 or out[stack + depth - 1] != b:
                            nested = False
                        else:
                            depth -= 1
        j += 1
    if marks & _KEY_BIT:
        flags |= TECHNICAL
    if marks & _TEST_BIT:
        flags |= TESTS
    if nested and depth == 0:
        flags |= BALANCED
    return flags


@numba.njit(cache=True)
def _runs(data: np.ndarray, cls: np.ndarray, out: np.ndarray) -> int:
    """The tokens of ``data`` (``n`` bytes), starts to ``out[:k]`` and ends to ``out[n:n + k]``
    (``out`` holds ``4 n``); returns k, :data:`UNMET` at a code point not yet classified, or
    :data:`URL` if ``data`` holds ``"://"`` or ``"www."`` (a URL may start there: the caller
    scans it by :func:`_url_runs`). Branch-free but for the bytes past ASCII: each byte's class
    is read and the class changes written down (position * 4 + class, at ``out[2 n:]``)
    whether or not one happens, then the runs of a class other than space taken from them
    the same way (a token's edges are where branches mispredict: a text has one every few
    bytes). The bytes before a "/" or a "." only are read for a URL's start (a branch taken
    for ~2 % of the bytes: cheaper than a window of the last four bytes kept at every byte)."""
    n = len(data)
    t = 2 * n
    prev = SPACE
    url = False
    for i in range(n):
        b = data[i]
        if b < 0x80:
            if (b == 47 or b == 46) and i >= 2:  # "/" ending "://", "." ending "www."
                if b == 47:
                    url |= data[i - 1] == 47 and data[i - 2] == 58
                else:
                    url |= (i >= 3 and data[i - 1] == 119 and data[i - 2] == 119
                            and data[i - 3] == 119)
            kind = np.int64(cls[b])
        elif b < 0xC0:  # a continuation byte: the code point's class
            kind = prev
        else:
            c, _ = _char(data, i)
            kind = np.int64(cls[c])
            if kind == UNKNOWN:
                return UNMET
        out[t] = 4 * i + kind
        t += kind != prev
        prev = kind
    if url:
        return URL
    return _edges(out, n, t)


@numba.njit(cache=True)
def _url_runs(data: np.ndarray, cls: np.ndarray, out: np.ndarray) -> int:
    """:func:`_runs`' tokens of a text that may hold a URL (every code point classified), each
    URL's bytes taken as spaces (the rule's replacement; a URL ends the token it starts in): a
    URL is looked for at each "h" or "w" outside one, as the pattern's left-to-right search
    does (neither is ever a continuation byte)."""
    n = len(data)
    t = 2 * n
    prev = SPACE
    until = 0  # the end of the last URL
    for i in range(n):
        b = data[i]
        if i >= until and (b == 104 or b == 119):
            until = _url_end(data, i, cls)  # (i if none starts here)
        if i < until:
            kind = SPACE
        elif b < 0x80:
            kind = np.int64(cls[b])
        elif b < 0xC0:
            kind = prev
        else:
            c, _ = _char(data, i)
            kind = np.int64(cls[c])
        out[t] = 4 * i + kind
        t += kind != prev
        prev = kind
    return _edges(out, n, t)


@numba.njit(cache=True, inline="always")
def _edges(out: np.ndarray, n: int, t: int) -> int:
    """The tokens from the class changes at ``out[2 n:t]`` (:func:`_runs`): starts to
    ``out[:k]``, ends to ``out[n:n + k]``; returns k."""
    out[t] = 4 * n + SPACE
    k = 0
    for j in range(2 * n, t):
        v = out[j]
        out[k] = v >> 2
        out[n + k] = out[j + 1] >> 2
        k += (v & 3) != SPACE
    return k


@numba.njit(cache=True)
def _scan_rows(data: np.ndarray, cls: np.ndarray, slots: np.ndarray, starts: np.ndarray,
               lens: np.ndarray, chars: np.ndarray, out: np.ndarray
               ) -> tuple[int, int, int, int]:
    """:func:`scan` on the lower-cased bytes: every token first (:func:`_runs`, or
    :func:`_url_runs` where a URL may be), then its hash and head (kept in ``out``, which holds
    ``6 len(data)``), its slot's cache line asked for as it is hashed, then every look-up
    (between two texts the engines push the table out of the CPU's caches: the fetches
    overlap the hashing instead of stalling a look-up each), each token's tag kept for the
    text's flags (:func:`_flags`)."""
    n = len(data)
    mask = (len(slots) >> 1) - 1
    k = _runs(data, cls, out)
    if k == UNMET:
        return 0, 0, UNMET, 0
    url = k == URL
    if url:
        k = _url_runs(data, cls, out)
    for j in range(k):
        h, head = _hash(data, out[j], out[n + j])
        prefetch(slots, 2 * np.int64(h & np.uint64(mask)))
        out[2 * n + j] = np.int64(h)  # (the same 64 bits)
        out[3 * n + j] = np.int64(head)
    m = 0
    missing = 0
    for j in range(k):  # each row over the hash it was found by, each word row over a head
        r, tag = _find(data, out[j], out[n + j], np.uint64(out[2 * n + j]),
                       np.uint64(out[3 * n + j]), slots, starts, lens, chars)
        out[2 * n + j] = r
        out[3 * n + m] = r  # (kept only if a word: no branch on which a token is)
        out[4 * n + j] = np.int64(tag)
        m += (tag & _WORD_BIT) != 0
        missing += r < 0
    return k, m, missing, _flags(data, out, k, url)


@numba.njit([(U8_RO, U32, U8, U64, I64, I64, U8, U8, I64)], cache=True)
def scan(data: np.ndarray, lower: np.ndarray, cls: np.ndarray, slots: np.ndarray,
         starts: np.ndarray, lens: np.ndarray, chars: np.ndarray, buf: np.ndarray,
         out: np.ndarray) -> tuple[int, int, int, int, int]:
    """The text ``data`` lower-cased into ``buf`` (:func:`lowered`; ``buf`` holds
    ``1.5 len(data)``), then the tokens of those ``b`` bytes: their starts written to
    ``out[:k]``, their ends to ``out[b:][:k]``, their cache rows (-1: not cached) to
    ``out[2 b:][:k]`` and the rows of the word tokens to ``out[3 b:][:m]`` (``out`` holds ``6
    b``: the caller's scratch, so that no array is made here; the bytes of the tokens not cached
    are at hand without a second scan); returns k, m, how many rows are missing, b and the
    text's flags (what the cooperation engine asks of a text, as
    :func:`streams.state.cooperation_kernels.assess` finds it in the text's bytes with
    :data:`TECHNICAL_KEYWORDS`, and :data:`TICK`: lower-casing keeps every ASCII byte the
    flags read and makes one of no other byte but U+0130's and U+212A's letters, which that
    kernel's caller lower-cases too), or (0, 0, code, 0, 0): :data:`UNMET` if the text holds a
    code point not yet classified or lowered, :data:`CONTEXT` if one it holds is lowered in
    context."""
    b = lowered(data, lower, buf)
    if b < 0:
        return 0, 0, b, 0, 0
    k, m, missing, flags = _scan_rows(buf[:b], cls, slots, starts, lens, chars, out)
    return k, m, missing, b, flags


@numba.njit([(U8_RO, I64, U64, I64, I64, U8)], cache=True)
def find_all(data: np.ndarray, ends: np.ndarray, slots: np.ndarray, starts: np.ndarray,
             lens: np.ndarray, chars: np.ndarray) -> tuple[np.ndarray, int]:
    """The rows of the tokens ``data[ends[j - 1]:ends[j]]`` (a given token list, joined), -1
    where not cached, and how many are missing."""
    rows = np.empty(len(ends), np.int64)
    missing = 0
    s = 0
    for j in range(len(ends)):
        h, head = _hash(data, s, ends[j])
        r, _ = _find(data, s, ends[j], h, head, slots, starts, lens, chars)
        missing += r < 0
        rows[j] = r
        s = ends[j]
    return rows, missing


@numba.njit([(U64, I64, I64, U8, B1, INT, INT)], cache=True)
def index(slots: np.ndarray, starts: np.ndarray, lens: np.ndarray, chars: np.ndarray,
          isword: np.ndarray, r0: int, r1: int) -> None:
    """Enter rows r0..r1-1 (their bytes already in ``chars``, ``isword`` set) into the hash
    table, a word's marks (:func:`_marks`) in its tag."""
    mask = (len(slots) >> 1) - 1
    for r in range(r0, r1):
        h, head = _hash(chars, starts[r], starts[r] + lens[r])
        tag = ((h & _HASH_MASK) | (np.uint64(min(lens[r], _LEN_CAP)) << _LEN_SHIFT)
               | np.uint64(r + 1))
        tag |= _marks(chars, starts[r], starts[r] + lens[r])
        if isword[r]:
            tag |= _WORD_BIT
        i = np.int64(h & np.uint64(mask))
        while slots[2 * i] != 0:
            i = (i + 1) & mask
        slots[2 * i] = tag
        slots[2 * i + 1] = head


@numba.njit([(U64, INT)], cache=True)
def grams(ids: np.ndarray, longest: int) -> np.ndarray:
    """The rolling hashes of lengths 2..longest over an id sequence: row n - 2 holds at
    position i the n-gram starting at i (the last n - 1 positions, whose window reaches past
    the end, hold shorter ones: the caller's to cut off)."""
    m = len(ids)
    out = np.empty((longest - 1, m), np.uint64)
    for i in range(m):
        g = ids[i]
        for j in range(longest - 1):
            if i + j + 1 < m:
                g = g * K + ids[i + j + 1]
            out[j, i] = g
    return out
