"""One text path: every text is tokenised once, and every lexical engine reads the same tokens.

The published rule (metrics.md A1; Molt Dynamics B): URLs removed, lower case, word tokens.
A URL is what ``(?:https?://|www\\.)\\S+`` (case-insensitive) matches in the lower-cased text,
as if replaced by a space (the compiled scan skips it: no regular expression pass; it
lower-cases the text itself too, as ``str.lower`` does, :mod:`streams.textscan`).
Choice (the papers name nltk, whose ``word_tokenize`` needs punkt data that cannot be
downloaded): nltk's ``wordpunct_tokenize`` pattern ``\\w+|[^\\w\\s]+``, i.e. runs of word
characters and runs of punctuation (``\\w`` and ``\\s`` exactly as the regular expression
engine has them; the scan itself is compiled, :mod:`streams.textscan`, one pass over the text's
UTF-8 bytes that also finds each token in the token cache). The n-gram turnover (A1) uses
every token, punctuation included, as nltk emits them; the cascades (B) and the detectors use
only the *word* tokens (the runs of word characters, which is exactly Molt Dynamics'
``\\b\\w+\\b``), so a phrase is the same phrase whatever punctuation surrounds it.

Tokens are mapped to 64-bit ids (the first 8 bytes of blake2b, cached per distinct token; the
token strings are the cache's own, shared by every text) and n-grams of ids to 64-bit ids by a
polynomial rolling hash, computed over a whole text at once: engines keep ids, never strings
(expected colliding pairs ~N^2 / 2^65 for N distinct n-grams: 3e-6 at N = 10^7).
:func:`ngram_text` turns the ids of a text back into the n-gram's words when an engine must
show one to a person.

>>> t = Text.of("Mint $CLAW now! https://x.io/a The CLAW is here.")
>>> t.tokens
['mint', '$', 'claw', 'now', '!', 'the', 'claw', 'is', 'here', '.']
>>> t.words
['mint', 'claw', 'now', 'the', 'claw', 'is', 'here']
>>> len(t.ngram_ids(2)), len(t.word_ngram_ids(3))
(9, 5)
>>> t.word_ngram_ids(1)[1] == t.word_ngram_ids(1)[4]  # 'claw' twice: one id
np.True_
>>> ngram_text(t.words, 3, 0)
'mint claw now'
"""

from __future__ import annotations

import hashlib
import re
from itertools import compress

import numpy as np

from streams import textscan

# the classes of the pattern \w+|[^\w\s]+, by the regular expression engine's own \w and \s
_WORD_RE = re.compile(r"\w")
_SPACE_RE = re.compile(r"\s")
K = textscan.K  # odd multiplier of the rolling hash
MAX_N = 5  # n-gram lengths computed together (:meth:`Text.ngram_ids`); longer ones chained
_CACHE_MAX = 1_000_000  # distinct tokens remembered (~100 B each); cleared when full
_FEW = 8  # tokens added one by one (a column write a token), more a column at once



def _classify(chars: str) -> None:
    """Enter the lower case of each code point of ``chars`` in the scan's lowering table
    (``str.lower`` of the code point alone: in context for U+03A3, whose lower case depends on
    its neighbours, U+0130, whose lower case is two code points, and surrogates, which UTF-8
    cannot hold), and the class of each and of its lower case (space, word, punctuation) in its
    class table, as the regular expression engine finds them."""
    points = "".join(set(chars))
    lowered = [c.lower() for c in points]
    _lower[np.frombuffer(points.encode("utf-32-le", "surrogatepass"), np.uint32)] = [
        ord(low) + 1 if len(low) == 1 and c != "\u03a3" and not "\ud800" <= c <= "\udfff"
        else textscan.LOWER_CONTEXT for c, low in zip(points, lowered, strict=True)]
    chars = points + "".join(lowered)
    for found, kind in ((chars, textscan.PUNCT), ("".join(_WORD_RE.findall(chars)), textscan.WORD),
                        ("".join(_SPACE_RE.findall(chars)), textscan.SPACE)):
        _cls[np.frombuffer(found.encode("utf-32-le", "surrogatepass"), np.uint32)] = kind


_cls = np.full(0x110000, textscan.UNKNOWN, np.uint8)  # by code point, classified when met
_lower = np.zeros(0x110000, np.uint32)  # by code point, its lower case + 1, entered when met
_classify("".join(map(chr, range(128))))


def is_word(token: str) -> bool:
    """Whether a token is a word token (a run of ``\\w``, not of punctuation): its first
    character is what the regular expression engine's ``\\w`` takes (``str.isalnum``, or
    ``_``)."""
    return token[:1].isalnum() or token[:1] == "_"


class _Vocab:
    """The token cache: per distinct token (a row) its string, 64-bit id (stored signed, so
    that arrays are built without Python's big-int path), whether it is a word token, its
    length in code points, whether it is all letters (``str.isalpha``), and its
    UTF-8 bytes in one flat array found through the hash table of :mod:`streams.textscan`. A
    full cache is replaced, never cleared in place, so rows stay valid in the cache they were
    looked up in: a :class:`Text` keeps that cache for its strings (engines hold texts only
    until their next flush, so a replaced cache is freed soon after)."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self.n = 0  # rows taken
        self.strs = np.empty(capacity, object)  # gathered by rows in C: no Python int per token
        self.tid = np.zeros(capacity, np.int64)
        self.ids = self.tid.view(np.uint64)  # the ids as engines read them (a view: no copy)
        self.isword = np.zeros(capacity, bool)
        self.nchars = np.zeros(capacity, np.int64)
        self.isalpha = np.zeros(capacity, bool)
        self.starts = np.zeros(capacity, np.int64)
        self.lens = np.zeros(capacity, np.int64)
        self.chars = np.zeros(capacity * 8, np.uint8)
        self.bytes = memoryview(self.chars)  # (written to from bytes without an array a token)
        self.used = 0  # bytes of ``chars`` taken
        # the hash table (two words a slot: :mod:`streams.textscan`), at most half full
        self.slots = np.zeros(2 * (capacity * 2), np.uint64)
        self.scanned = self.table()  # what the scan reads, made once a growth

    def table(self) -> tuple[np.ndarray, ...]:
        return self.slots, self.starts, self.lens, self.chars

    def add(self, tokens: list[str]) -> None:
        """Add distinct tokens the cache does not hold (each column filled at once, but for a
        few tokens, written one by one: a numpy call a column costs more than a write)."""
        r0 = self.n
        r1 = self.n = r0 + len(tokens)
        encoded = [t.encode("utf-8") for t in tokens]
        size = sum(map(len, encoded))
        if r1 > len(self.tid):
            grow = max(r1, 2 * len(self.tid)) - len(self.tid)
            for name in ("strs", "tid", "isword", "nchars", "isalpha", "starts", "lens"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.zeros(grow, a.dtype))))
            self.ids = self.tid.view(np.uint64)
        if self.used + size > len(self.chars):
            extra = max(self.used + size, 2 * len(self.chars)) - len(self.chars)
            self.chars = np.concatenate((self.chars, np.zeros(extra, np.uint8)))
            self.bytes = memoryview(self.chars)
        if len(tokens) <= _FEW:  # (a live text brings a token or two: one write a field)
            used = self.used
            for r, t, b in zip(range(r0, r1), tokens, encoded, strict=True):
                self.tid[r] = int.from_bytes(hashlib.blake2b(b, digest_size=8).digest(),
                                             "little", signed=True)
                self.isword[r], self.nchars[r], self.isalpha[r] = is_word(t), len(t), t.isalpha()
                self.starts[r], self.lens[r], self.strs[r] = used, len(b), t
                self.bytes[used:used + len(b)] = b
                used += len(b)
            self.used = used
        else:
            # the id: blake2b's first 8 bytes, little-endian, signed (no Python int a token)
            self.tid[r0:r1] = np.frombuffer(b"".join(
                [hashlib.blake2b(b, digest_size=8).digest() for b in encoded]), "<i8")
            self.isword[r0:r1] = [is_word(t) for t in tokens]
            self.nchars[r0:r1] = np.fromiter(map(len, tokens), np.int64, len(tokens))
            self.isalpha[r0:r1] = np.fromiter(map(str.isalpha, tokens), bool, len(tokens))
            lens = np.fromiter(map(len, encoded), np.int64, len(tokens))
            self.starts[r0:r1] = np.cumsum(lens) - lens + self.used
            self.lens[r0:r1] = lens
            self.chars[self.used:self.used + size] = np.frombuffer(b"".join(encoded), np.uint8)
            self.used += size
            self.strs[r0:r1] = tokens
        if 2 * r1 > len(self.slots) // 2:  # rehash every row into a table at most half full
            self.slots = np.zeros(2 << (2 * r1 - 1).bit_length(), np.uint64)
            r0 = 0
        textscan.index(self.slots, self.starts, self.lens, self.chars, self.isword, r0, r1)
        self.scanned = self.table()


_vocab = _Vocab()


def _fresh(rows: np.ndarray, v: _Vocab) -> tuple[np.ndarray, _Vocab]:
    """``rows`` (looked up in ``v``, some missing) and ``v``, or, if adding the text's tokens
    could overfill the cache, no rows and a new empty cache in its place."""
    global _vocab
    if v.n + len(rows) <= _CACHE_MAX:
        return rows, v
    _vocab = _Vocab()
    return np.full(len(rows), -1, np.int64), _vocab


def _scan(text: str) -> tuple[np.ndarray, np.ndarray, _Vocab, int]:
    """The cache rows of the tokens of a text (lower-cased, URLs left out; new tokens added),
    those of its word tokens, the cache they index (the rows are valid until the next call:
    views of the scan's scratch) and the text's flags (:func:`streams.textscan.scan`)."""
    global _buf, _out
    data = text.encode("utf-8", "surrogatepass")  # (a lone surrogate: lowered in context)
    v = _vocab
    while True:
        if 2 * len(data) > len(_buf):
            _buf = np.zeros(max(2 * len(data), 2 * len(_buf)), np.uint8)
            _out = np.zeros(5 * len(_buf), np.int64)  # (6 b: b <= 1.5 len(data))
        k, m, missing, b, flags = textscan.scan(np.frombuffer(data, np.uint8), _lower, _cls,
                                         *v.scanned, _buf, _out)
        if missing == textscan.UNMET:  # a code point met for the first time
            _classify(text)
        elif missing == textscan.CONTEXT:  # str.lower, then the scan lowers nothing (the
            text = text.lower()  # UTF-8 of a lone surrogate raises, as the rule's own)
            data = text.encode("utf-8")
        else:
            break
    rows = _out[2 * b:2 * b + k]
    if missing:  # the new tokens' rows are those they are added at (no second scan)
        rows, v = _fresh(rows, v)
        new = rows < 0
        raw = _buf[:b].tobytes()
        ends = _out[b:b + k][new].tolist()
        tokens = [raw[s:e].decode("utf-8") for s, e in zip(_out[:k][new].tolist(), ends,
                                                          strict=True)]
        distinct = list(dict.fromkeys(tokens))
        at = {t: v.n + i for i, t in enumerate(distinct)}
        v.add(distinct)
        rows[new] = [at[t] for t in tokens]
        return rows, rows[v.isword[rows]], v, flags
    return rows, _out[3 * b:3 * b + m], v, flags


# the scan's scratch (:func:`_scan`), grown as needed: the lower-cased text, the rows
_buf = np.zeros(1 << 14, np.uint8)
_out = np.zeros(5 << 14, np.int64)


def tokenize(text: str) -> list[str]:
    """URLs removed, lower-cased, wordpunct tokens (the one published rule).

    >>> tokenize("Hello, World! see https://moltbook.com/p/1 now")
    ['hello', ',', 'world', '!', 'see', 'now']
    """
    rows, _, v, _ = _scan(text)
    return v.strs[rows].tolist()  # type: ignore[no-any-return]


def token_ids(tokens: list[str]) -> np.ndarray:
    """64-bit ids of tokens (stable across processes and runs: blake2b, not ``hash``)."""
    rows, v = _rows(tokens)
    return v.ids[rows]


def _rows(tokens: list[str]) -> tuple[np.ndarray, _Vocab]:
    """The cache rows of any list of tokens (new ones added) and the cache they index."""
    encoded = [t.encode("utf-8") for t in tokens]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
    v = _vocab
    rows, missing = textscan.find_all(data, ends, *v.table())
    if missing:
        rows, v = _fresh(rows, v)
        v.add(list(dict.fromkeys(t for t, r in zip(tokens, rows.tolist(), strict=True)
                                 if r < 0)))
        rows, _ = textscan.find_all(data, ends, *v.table())
    return rows, v


def ngram_ids(ids: np.ndarray, n: int) -> np.ndarray:
    """Ids of the n-grams (in order) of a sequence of token ids: a rolling hash, so the id of an
    n-gram depends only on its tokens."""
    g = ids
    for k in range(1, n):
        if len(g) <= 1:
            return g[:0]
        g = g[:-1] * K + ids[k:]
    return g


def ngram_text(tokens: list[str], n: int, start: int) -> str:
    """The words of the n-gram that starts at ``start``."""
    return " ".join(tokens[start:start + n])


class Text:
    """The tokens of one text and the views engines read, each computed at most once:
    :meth:`of` scans the text once (compiled), one cache look-up a token giving the token
    ids, the word tokens' ids, lengths and all-letter mask; the token and word strings are
    gathered from the cache only when an engine reads them (most read ids only); the n-grams
    of lengths 2..MAX_N of all tokens come together on the first :meth:`ngram_ids` (one
    compiled pass; the word n-grams, which no engine of the pipeline reads, are not made
    with them), :meth:`word_ngram_ids` chains only the lengths it needs."""

    __slots__ = ("_tokens", "_ids", "_mask", "_words", "_word_ids", "_word_lens", "_word_alpha",
                 "_grams", "_word_grams", "_rows", "_word_rows", "_vocab", "flags")

    def __init__(self, tokens: list[str]) -> None:
        self._tokens: list[str] | None = tokens
        self._ids: np.ndarray | None = None
        self._mask: np.ndarray | None = None
        self._words: list[str] | None = None
        self._word_ids: np.ndarray | None = None
        self._word_lens: np.ndarray | None = None
        self._word_alpha: np.ndarray | None = None
        self._grams: dict[int, np.ndarray] = {}
        self._word_grams: dict[int, np.ndarray] = {}
        # the cache rows of the tokens and of the words (of :meth:`of`), and that cache: the
        # strings are gathered from it when first read (the cache object stays valid for
        # this text even once a full cache is replaced)
        self._rows: np.ndarray | None = None
        self._word_rows: np.ndarray | None = None
        self._vocab: _Vocab | None = None
        # what the cooperation engine asks of the text (:func:`streams.textscan.scan`), when
        # :meth:`of` scanned it (None: made from tokens, or unpickled)
        self.flags: int | None = None

    @classmethod
    def of(cls, text: str) -> Text:
        """The text tokenised: its token ids, its word tokens' ids, lengths and letter mask
        resolved at once (one compiled scan, then gathers of the cache), the strings kept as
        cache rows until read."""
        rows, word_rows, v, t_flags = _scan(text)
        t = _new(cls)  # each slot set once, here (no __init__ setting them first)
        t.flags = t_flags
        t._tokens = t._words = t._mask = None
        t._ids, t._word_ids = v.ids[rows], v.ids[word_rows]
        t._word_lens, t._word_alpha = v.nchars[word_rows], v.isalpha[word_rows]
        t._rows, t._word_rows, t._vocab = rows.copy(), word_rows.copy(), v
        t._grams, t._word_grams = {}, {}
        return t

    @property
    def tokens(self) -> list[str]:
        """Every token, punctuation runs included, in text order."""
        if self._tokens is None:
            self._tokens = self._vocab.strs[self._rows].tolist()  # type: ignore[union-attr]
        return self._tokens  # type: ignore[return-value]

    def token(self, i: int) -> str:
        """Token ``i`` alone: read from the token cache unless :attr:`tokens` was gathered
        (a reader of a few tokens of a long text need not gather them all)."""
        if self._tokens is not None:
            return self._tokens[i]
        return self._vocab.strs[self._rows[i]]  # type: ignore[union-attr,index,no-any-return]

    def _resolve(self) -> None:
        self._set(*_rows(self.tokens))

    def _set(self, rows: np.ndarray, v: _Vocab) -> None:
        """The views read from the cache rows of the tokens."""
        ids = self._ids = v.ids[rows]
        mask = self._mask = v.isword[rows]
        self._word_ids = ids[mask]
        word_rows = rows[mask]
        self._word_lens = v.nchars[word_rows]
        self._word_alpha = v.isalpha[word_rows]

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None:
            self._resolve()
        return self._ids  # type: ignore[return-value]

    @property
    def words(self) -> list[str]:
        """The word tokens (punctuation runs left out)."""
        if self._words is None:
            if self._word_rows is not None:
                self._words = self._vocab.strs[self._word_rows].tolist()  # type: ignore[union-attr]
            else:
                if self._mask is None:
                    self._resolve()
                self._words = list(compress(self.tokens, self._mask.tolist()))  # type: ignore[union-attr]
        return self._words  # type: ignore[return-value]

    @property
    def word_ids(self) -> np.ndarray:
        if self._word_ids is None:
            self._resolve()
        return self._word_ids  # type: ignore[return-value]

    @property
    def word_lengths(self) -> np.ndarray:
        """The length of each word token in code points (``len``), int64."""
        if self._word_lens is None:
            self._resolve_words()
        return self._word_lens  # type: ignore[return-value]

    @property
    def word_alpha(self) -> np.ndarray:
        """Whether each word token is all letters (``str.isalpha``), bool."""
        if self._word_alpha is None:
            self._resolve_words()
        return self._word_alpha  # type: ignore[return-value]

    def _resolve_words(self) -> None:
        rows, v = _rows(self.words)
        self._word_lens, self._word_alpha = v.nchars[rows], v.isalpha[rows]

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        """The strings and the ids (a detector's checkpoint holds some texts): the cache rows
        and the cache are not pickled, nor the words' lengths and letter mask (remade from the
        words when read)."""
        state = {k: getattr(self, k) for k in self.__slots__ if k not in _UNPICKLED}
        state["_tokens"], state["_words"] = self.tokens, self.words  # while the cache is at hand
        return None, state

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        self._word_lens = self._word_alpha = self.flags = None
        self._rows = self._word_rows = self._vocab = None
        for k, value in state[1].items():
            setattr(self, k, value)

    def ngram_ids(self, n: int) -> np.ndarray:
        """Ids of every n-gram of all tokens (punctuation included), in text order; lengths
        2..MAX_N come together on the first read of one of them (one compiled pass)."""
        g = self._grams.get(n)
        if g is None:
            if 2 <= n <= MAX_N and 2 not in self._grams:
                ids = self.ids
                rows = textscan.grams(ids, MAX_N)
                for k in range(2, MAX_N + 1):
                    self._grams[k] = rows[k - 2][:max(len(ids) - k + 1, 0)]
                return self._grams[n]
            g = _chained(self._grams, self.ids, n)
        return g

    def word_ngram_ids(self, n: int) -> np.ndarray:
        """Ids of every n-gram of the word tokens, in text order (word ``i`` starts gram ``i``)."""
        g = self._word_grams.get(n)
        return g if g is not None else _chained(self._word_grams, self.word_ids, n)


_new = object.__new__
_UNPICKLED = ("_word_lens", "_word_alpha", "_rows", "_word_rows", "_vocab", "flags")


def _chained(cache: dict[int, np.ndarray], ids: np.ndarray, n: int) -> np.ndarray:
    """The n-gram ids, each length's rolling hash extended from the cached one below it (the
    engines that read every n = 1..5 pay one step a length; equal to :func:`ngram_ids`)."""
    g = cache.get(n)
    if g is None:
        if n == 1:
            g = ids
        else:
            below = _chained(cache, ids, n - 1)
            if len(below) > 1:
                g = below[:-1] * K
                g += ids[n - 1:]
            else:
                g = below[:0]
        cache[n] = g
    return g
