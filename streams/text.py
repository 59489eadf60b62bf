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

import numpy as np

URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
TOKEN_RE = re.compile(r"\w+|[^\w\s]+")
K = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the rolling hash
_CACHE_MAX = 1_000_000  # distinct tokens remembered (~100 B each); cleared when full
_ids: dict[str, int] = {}


def tokenize(text: str) -> list[str]:
    """URLs removed, lower-cased, wordpunct tokens (the one published rule).

    >>> tokenize("Hello, World! see https://moltbook.com/p/1 now")
    ['hello', ',', 'world', '!', 'see', 'now']
    """
    text = text.lower()
    if "http" in text or "www." in text:  # the substitution scans: skip it when it cannot match
        text = URL_RE.sub(" ", text)
    return TOKEN_RE.findall(text)


def token_ids(tokens: list[str]) -> np.ndarray:
    """64-bit ids of tokens (stable across processes and runs: blake2b, not ``hash``)."""
    try:  # the common case, every token known: one C-level pass
        return np.fromiter(map(_ids.__getitem__, tokens), np.int64, len(tokens)).view(np.uint64)
    except KeyError:
        pass
    if len(_ids) > _CACHE_MAX:
        _ids.clear()
    for t in tokens:
        if t not in _ids:
            # stored signed so that the array is built without Python's big-int path
            _ids[t] = int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(),
                                     "little", signed=True)
    return np.fromiter(map(_ids.__getitem__, tokens), np.int64, len(tokens)).view(np.uint64)


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
    """The tokens of one text and the views engines read, each computed at most once."""

    __slots__ = ("tokens", "_ids", "_words", "_word_ids", "_grams", "_word_grams")

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self._ids: np.ndarray | None = None
        self._words: list[str] | None = None
        self._word_ids: np.ndarray | None = None
        self._grams: dict[int, np.ndarray] = {}
        self._word_grams: dict[int, np.ndarray] = {}

    @classmethod
    def of(cls, text: str) -> Text:
        return cls(tokenize(text))

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None:
            self._ids = token_ids(self.tokens)
        return self._ids

    @property
    def words(self) -> list[str]:
        """The word tokens (punctuation runs left out)."""
        if self._words is None:
            self._words = [t for t in self.tokens if t[0].isalnum() or t[0] == "_"]
        return self._words

    @property
    def word_ids(self) -> np.ndarray:
        if self._word_ids is None:
            self._word_ids = token_ids(self.words)
        return self._word_ids

    def ngram_ids(self, n: int) -> np.ndarray:
        """Ids of every n-gram of all tokens (punctuation included), in text order."""
        return _chained(self._grams, self.ids, n)

    def word_ngram_ids(self, n: int) -> np.ndarray:
        """Ids of every n-gram of the word tokens, in text order (word ``i`` starts gram ``i``)."""
        return _chained(self._word_grams, self.word_ids, n)


def _chained(cache: dict[int, np.ndarray], ids: np.ndarray, n: int) -> np.ndarray:
    """The n-gram ids, each length's rolling hash extended from the cached one below it (the
    engines that read every n = 1..5 pay one step a length; equal to :func:`ngram_ids`)."""
    g = cache.get(n)
    if g is None:
        if n == 1:
            g = ids
        else:
            below = _chained(cache, ids, n - 1)
            g = below[:-1] * K + ids[n - 1:] if len(below) > 1 else below[:0]
        cache[n] = g
    return g
