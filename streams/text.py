"""One text path: every text is tokenised once, and every lexical engine reads the same tokens.

The published rule (metrics.md A1; Molt Dynamics B): URLs removed, lower case, word tokens.
Choice (the papers name nltk, whose ``word_tokenize`` needs punkt data that cannot be
downloaded): nltk's ``wordpunct_tokenize`` pattern ``\\w+|[^\\w\\s]+``, i.e. runs of word
characters and runs of punctuation, applied by one compiled regular expression. The n-gram
turnover (A1) uses every token, punctuation included, as nltk emits them; the cascades (B) and
the detectors use only the *word* tokens (the runs of word characters, which is exactly Molt
Dynamics' ``\\b\\w+\\b``), so a phrase is the same phrase whatever punctuation surrounds it.

Tokens are mapped to 64-bit ids (the first 8 bytes of blake2b, cached per distinct token) and
n-grams of ids to 64-bit ids by a polynomial rolling hash, vectorised over a whole text:
engines keep ids, never strings (expected colliding pairs ~N^2 / 2^65 for N distinct n-grams:
3e-6 at N = 10^7). :func:`ngram_text` turns the ids of a text back into the n-gram's words when
an engine must show one to a person.

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

URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
TOKEN_RE = re.compile(r"\w+|[^\w\s]+")
K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the rolling hash
MAX_N = 5  # n-gram lengths computed together (:meth:`Text.ngram_ids`); longer ones chained
_CACHE_MAX = 1_000_000  # distinct tokens remembered (~150 B each); cleared when full
# The token cache: a token's row, and by row its id (stored signed, so that arrays are built
# without Python's big-int path) and whether it is a word token. One dict look-up a token gives
# both (rows are only ever used right after they are looked up: a clear cannot stale them).
_rows: dict[str, int] = {}
_tid = np.zeros(1 << 12, np.int64)
_isword = np.zeros(1 << 12, bool)
# the weights of the rolling hash by offset in the window, for the lengths 2..MAX_N (rows)
_WEIGHTS = np.array([[pow(int(K), n - 1 - j, 1 << 64) if j < n else 0 for j in range(MAX_N)]
                     for n in range(2, MAX_N + 1)], np.uint64)
_MATMUL_MAX = 320  # up to this many tokens (both sequences) one product beats the chain


def tokenize(text: str) -> list[str]:
    """URLs removed, lower-cased, wordpunct tokens (the one published rule).

    >>> tokenize("Hello, World! see https://moltbook.com/p/1 now")
    ['hello', ',', 'world', '!', 'see', 'now']
    """
    text = text.lower()
    if "http" in text or "www." in text:  # the substitution scans: skip it when it cannot match
        text = URL_RE.sub(" ", text)
    return TOKEN_RE.findall(text)


def _lookup(tokens: list[str]) -> np.ndarray:
    """The cache rows of ``tokens`` (new tokens hashed and added): valid until the next call."""
    try:  # the common case, every token known: one C-level pass
        return np.fromiter(map(_rows.__getitem__, tokens), np.intp, len(tokens))
    except KeyError:
        pass
    global _tid, _isword
    if len(_rows) + len(tokens) > _CACHE_MAX:
        _rows.clear()
    for t in tokens:
        if t not in _rows:
            r = len(_rows)
            if r == len(_tid):
                _tid = np.concatenate((_tid, np.zeros_like(_tid)))
                _isword = np.concatenate((_isword, np.zeros_like(_isword)))
            _tid[r] = int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(),
                                     "little", signed=True)
            _isword[r] = t[:1].isalnum() or t[:1] == "_"  # runs of \w, not of punctuation
            _rows[t] = r
    return np.fromiter(map(_rows.__getitem__, tokens), np.intp, len(tokens))


def token_ids(tokens: list[str]) -> np.ndarray:
    """64-bit ids of tokens (stable across processes and runs: blake2b, not ``hash``)."""
    rows = _lookup(tokens)  # first: the look-up may grow the table
    return _tid[rows].view(np.uint64)


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
    """The tokens of one text and the views engines read, each computed at most once: one cache
    look-up a token gives the token ids and the word tokens; the n-grams of lengths 2..MAX_N
    of all tokens and of the words come together on the first :meth:`ngram_ids` (one product
    over both sequences), :meth:`word_ngram_ids` alone chains only the lengths it needs."""

    __slots__ = ("tokens", "_ids", "_mask", "_words", "_word_ids", "_grams", "_word_grams")

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self._ids: np.ndarray | None = None
        self._mask: np.ndarray | None = None
        self._words: list[str] | None = None
        self._word_ids: np.ndarray | None = None
        self._grams: dict[int, np.ndarray] = {}
        self._word_grams: dict[int, np.ndarray] = {}

    @classmethod
    def of(cls, text: str) -> Text:
        return cls(tokenize(text))

    def _resolve(self) -> None:
        rows = _lookup(self.tokens)
        ids = self._ids = _tid[rows].view(np.uint64)
        mask = self._mask = _isword[rows]
        self._word_ids = ids[mask]

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None:
            self._resolve()
        return self._ids  # type: ignore[return-value]

    @property
    def words(self) -> list[str]:
        """The word tokens (punctuation runs left out)."""
        if self._words is None:
            if self._mask is None:
                self._resolve()
            self._words = list(compress(self.tokens, self._mask.tolist()))  # type: ignore[union-attr]
        return self._words

    @property
    def word_ids(self) -> np.ndarray:
        if self._word_ids is None:
            self._resolve()
        return self._word_ids  # type: ignore[return-value]

    def ngram_ids(self, n: int) -> np.ndarray:
        """Ids of every n-gram of all tokens (punctuation included), in text order."""
        g = self._grams.get(n)
        if g is None:
            if n == 1:
                g = self._grams[1] = self.ids
            elif 2 not in self._grams:
                self._both()
                return self.ngram_ids(n)
            else:
                g = _chained(self._grams, self.ids, n)
        return g

    def word_ngram_ids(self, n: int) -> np.ndarray:
        """Ids of every n-gram of the word tokens, in text order (word ``i`` starts gram ``i``)."""
        g = self._word_grams.get(n)
        return g if g is not None else _chained(self._word_grams, self.word_ids, n)

    def _both(self) -> None:
        """The n-grams of lengths 2..MAX_N of the tokens and of the words, at once: both
        sequences in one zero-padded array (MAX_N - 1 zeros after each), every length's
        rolling hash a row of one product of the hash weights with the array's sliding
        windows (short texts) or chained row by row (long ones; the same values: windows
        reaching into the padding are cut off)."""
        ids, w = self.ids, self.word_ids
        nt, nw, pad = len(ids), len(w), MAX_N - 1
        m = nt + pad + nw
        base = np.zeros(m + pad, np.uint64)
        base[:nt] = ids
        base[nt + pad:m] = w
        if m <= _MATMUL_MAX:
            rows = _WEIGHTS @ np.ndarray((MAX_N, m), np.uint64, base, 0, (8, 8))
        else:
            rows = np.empty((MAX_N - 1, m), np.uint64)
            g = base[:m]
            for k in range(MAX_N - 1):
                g = np.multiply(g, K, out=rows[k])
                np.add(g, base[k + 1:k + 1 + m], out=g)
        for n in range(2, MAX_N + 1):
            g = rows[n - 2]
            self._grams[n] = g[:max(nt - n + 1, 0)]
            if n not in self._word_grams:
                self._word_grams[n] = g[nt + pad:nt + pad + max(nw - n + 1, 0)]


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
