"""The one tokeniser and its cached views, held against a plain implementation of the rule on
every real post and comment text of the shared archive: tokens (URLs removed, lower case,
wordpunct), token ids (blake2b of each token), word tokens (runs of word characters) and the
n-gram ids (the rolling hash, one length at a time), whatever order the views are read in,
across a clear of the token cache, for texts long and short, and after a pickle round trip."""

from __future__ import annotations

import hashlib
import pickle
import random
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import streams.text as text_module
from service.sources.archive import open_archive
from streams import textscan
from streams.events import CommentEvent, PostEvent
from streams.text import Text, ngram_ids, token_ids, tokenize

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"
K = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1


@cache
def real_texts() -> tuple[str, ...]:
    texts = {e.text for e in open_archive([DATA]) if isinstance(e, PostEvent | CommentEvent)}
    return tuple(sorted(texts))


def plain_tokens(text: str) -> list[str]:
    text = re.sub(r"(?:https?://|www\.)\S+", " ", text.lower(), flags=re.IGNORECASE)
    return re.findall(r"\w+|[^\w\s]+", text)


def plain_id(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


def plain_grams(tokens: list[str], n: int) -> list[int]:
    """The rolling hash in Python integers: sum of id(token i + j) K^(n-1-j), mod 2^64."""
    ids = [plain_id(t) for t in tokens]
    out = []
    for i in range(len(ids) - n + 1):
        h = 0
        for j in range(n):
            h = (h * K + ids[i + j]) & M64
        out.append(h)
    return out


ORDERS = ("grams_first", "words_first", "word_grams_first", "ids_first")


def read(t: Text, order: str, n_max: int) -> dict[str, object]:
    """Every view of ``t``, the first one read as ``order`` says."""
    out: dict[str, object] = {}
    if order == "grams_first":
        out["g3"] = t.ngram_ids(3)
    elif order == "words_first":
        out["words"] = t.words
    elif order == "word_grams_first":
        out["w3"] = t.word_ngram_ids(3)
    out |= {"ids": t.ids, "words": t.words, "word_ids": t.word_ids}
    for n in range(1, n_max + 1):
        out[f"g{n}"] = t.ngram_ids(n)
        out[f"w{n}"] = t.word_ngram_ids(n)
    return out


def check(text: str, views: dict[str, object], n_max: int) -> None:
    tokens = plain_tokens(text)
    words = [t for t in tokens if re.fullmatch(r"\w+", t)]
    assert views["words"] == words, text
    assert np.array_equal(views["ids"], np.array([plain_id(t) for t in tokens], np.uint64))
    assert np.array_equal(views["word_ids"], np.array([plain_id(t) for t in words], np.uint64))
    for n in range(1, n_max + 1):
        for key, seq in ((f"g{n}", tokens), (f"w{n}", words)):
            got = views[key]
            assert isinstance(got, np.ndarray) and got.dtype == np.uint64
            assert got.tolist() == plain_grams(seq, n), (key, text[:80])


def test_tokens_are_the_published_rule_on_every_real_text() -> None:
    texts = real_texts()
    assert len(texts) > 2000
    for s in texts:
        assert tokenize(s) == plain_tokens(s)
        assert Text.of(s).tokens == plain_tokens(s)


@pytest.mark.parametrize("order", ORDERS)
def test_views_equal_the_plain_rule_on_real_texts(order: str) -> None:
    texts = real_texts()[ORDERS.index(order)::12]  # a different twelfth of the texts an order
    for s in texts:
        check(s, read(Text.of(s), order, 7), 7)  # lengths past MAX_N chain on


def test_long_short_and_empty_texts() -> None:
    """The longest real text and the edges: no token, a single one, punctuation only, words
    only, fewer words than an n-gram's length."""
    longest = max(real_texts(), key=len)
    assert len(tokenize(longest)) > 1000
    for s in ("", "   ", "!", "gm", "...!!", "gm gm gm", "a, b", longest, longest[:400],
              "_under_score ünïcode ÉTÉ 42 a_b-c", "http://x.io only-url www.y.com",
              "ΟΔΟΣ ΣΑΣ Σ. ΑΣ-Β", "İSTANBUL İ", "ȺȾ \u212a ẞ ǅ HTTP://Ⱥ.IO"):
        for order in ORDERS:
            check(s, read(Text.of(s), order, 6), 6)


def test_tokens_sharing_their_first_bytes_each_find_their_own_row() -> None:
    """The cache's slot compares a token's length and first 8 bytes, then the rest: tokens of
    1 to 300 bytes that share prefixes (and lengths past the slot's 255 cap) each keep their
    own id and string, in a fresh cache and once cached."""
    words = ["a" * n for n in range(1, 301)] + ["a" * n + "b" for n in range(7, 300, 7)]
    words += ["é" * n for n in range(1, 140)] + ["aaaaaaab", "aaaaaaaab", "b" + "a" * 299]
    s = " ".join(words)
    for _ in range(2):
        t = Text.of(s)
        assert t.words == words
        assert t.ids.tolist() == [plain_id(w) for w in words]


def test_free_functions_agree_with_the_views() -> None:
    for s in real_texts()[::50]:
        t = Text.of(s)
        assert np.array_equal(token_ids(t.tokens), t.ids)
        for n in range(1, 7):
            assert np.array_equal(ngram_ids(t.ids, n), t.ngram_ids(n))
            assert np.array_equal(ngram_ids(token_ids(t.words), n), t.word_ngram_ids(n))


def test_cache_clear_keeps_every_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny token cache, cleared over and over (and its tables grown), gives the same ids."""
    monkeypatch.setattr(text_module, "_CACHE_MAX", 50)
    monkeypatch.setattr(text_module, "_vocab", text_module._Vocab(capacity=4))
    grown = 0
    for i, s in enumerate(real_texts()[::40]):
        t = Text.of(s)
        first = t.words if i % 2 else t.word_ngram_ids(2)  # some views now, the rest after
        other = plain_tokens(real_texts()[-1 - i])  # another text between: clears, reuses rows
        assert token_ids(other).tolist() == [plain_id(w) for w in other]
        views = read(t, ORDERS[i % len(ORDERS)], 5)
        assert first is (views["words"] if i % 2 else views["w2"])
        check(s, views, 5)
        grown = max(grown, len(text_module._vocab.tid))
    longest = max(map(len, map(tokenize, real_texts())))
    assert grown > 4 and text_module._vocab.n < 50 + longest


def test_pickle_round_trip_at_any_point() -> None:
    for s in real_texts()[::200]:
        for order in ORDERS:
            t = Text.of(s)
            read(t, order, 2)
            t2 = pickle.loads(pickle.dumps(t))
            check(s, read(t2, order, 6), 6)


def test_one_token_read_alone_is_the_rules_token() -> None:
    """``Text.token(i)`` before the token list is gathered (from the cache rows), after it,
    and on a pickled text, on real texts."""
    for s in real_texts()[::50]:
        want = tokenize(s)
        t = Text.of(s)
        assert [t.token(i) for i in range(len(want))] == want
        assert t.tokens == want and [t.token(i) for i in range(len(want))] == want
        t2 = pickle.loads(pickle.dumps(Text.of(s)))
        assert [t2.token(i) for i in range(len(want))] == want


def test_every_code_point_is_classed_as_the_pattern_classes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan's class table against the regular expression's own \\w and \\s on all of
    Unicode (surrogates cannot be UTF-8), its lowering table against ``str.lower`` of each code
    point alone (U+03A3 and U+0130 lowered with the whole text), and the tokens of texts made
    of every code point, in order, shuffled and upper-cased."""
    monkeypatch.setattr(text_module, "_vocab", text_module._Vocab())
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    chars = "".join(map(chr, points))
    text_module._classify(chars)
    want = np.full(0x110000, textscan.PUNCT, np.uint8)
    want[[ord(c) for c in re.findall(r"\w", chars)]] = textscan.WORD
    want[[ord(c) for c in re.findall(r"\s", chars)]] = textscan.SPACE
    assert np.array_equal(text_module._cls[points], want[points])
    lowered = [ord(chr(c).lower()) + 1 if c not in (0x3A3, 0x130) else textscan.LOWER_CONTEXT
               for c in points]
    assert text_module._lower[points].tolist() == lowered
    shuffled = "".join(random.Random(0).sample(chars, 100_000))
    for s in (chars, shuffled, shuffled.upper()):
        assert tokenize(s) == plain_tokens(s)
        assert Text.of(s).words == [t for t in plain_tokens(s) if re.fullmatch(r"\w+", t)]


def test_a_lone_surrogate_raises_as_the_rules_utf8_does() -> None:
    for s in ("a\ud800", "İx\udfffY", "ΣA\ud800"):
        with pytest.raises(UnicodeEncodeError) as want:
            s.lower().encode("utf-8")
        with pytest.raises(UnicodeEncodeError) as got:
            Text.of(s)
        assert str(got.value) == str(want.value)


def check_word_views(s: str, t: Text) -> None:
    words = [w for w in plain_tokens(s) if re.fullmatch(r"\w+", w)]
    lens, alpha = t.word_lengths, t.word_alpha
    assert lens.dtype == np.int64 and alpha.dtype == bool
    assert lens.tolist() == [len(w) for w in words], s[:80]
    assert alpha.tolist() == [w.isalpha() for w in words], s[:80]
    # the strings, gathered on first read from the cache the text was scanned with
    assert t.words == words and t.tokens == plain_tokens(s), s[:80]


def test_word_lengths_and_letter_mask_on_real_texts() -> None:
    """The words' lengths and all-letter mask, read from the token cache, against len and
    str.isalpha of the plain rule's words: from :meth:`Text.of`, from tokens alone, and after a
    pickle round trip (which leaves them out and remakes them)."""
    for s in (*real_texts()[::7], "", "!", "_x ünïcode ÉTÉ 42 a_b ǅ ß" + "z" * 40):
        t = Text.of(s)
        check_word_views(s, t)
        check_word_views(s, Text(t.tokens))
        back = pickle.loads(pickle.dumps(t))
        check_word_views(s, back)
        check(s, read(back, "ids_first", 3), 3)


def test_pickled_text_holds_the_views_it_held_before_the_word_masks() -> None:
    t = Text.of("Mint $CLAW now 0x" + "ab" * 20)
    t.ngram_ids(2)
    state = t.__reduce_ex__(4)[2]
    assert state[0] is None
    # the strings gathered, not the cache rows nor the cache they index
    assert sorted(state[1]) == sorted(["_tokens", "_ids", "_mask", "_words", "_word_ids",
                                       "_grams", "_word_grams"])
    assert t.word_lengths.tolist() == [4, 4, 3, 42]  # (the pickle did not drop them here)
    back = pickle.loads(pickle.dumps(t))
    assert back.tokens == ["mint", "$", "claw", "now", "0x" + "ab" * 20]
    assert back.words == ["mint", "claw", "now", "0x" + "ab" * 20]
    assert back.word_lengths.tolist() == [4, 4, 3, 42]
    assert back.ids.tolist() == t.ids.tolist()


def test_word_views_across_cache_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_module, "_CACHE_MAX", 50)
    monkeypatch.setattr(text_module, "_vocab", text_module._Vocab(capacity=4))
    for i, s in enumerate(real_texts()[::40]):
        t = Text.of(s)
        Text.of(real_texts()[-1 - i])  # another text between: clears, reuses rows
        check_word_views(s, t)


def test_urls_are_left_out_exactly_as_the_pattern_removes_them() -> None:
    """The scan skips URLs itself (no regular expression pass): against the pattern's
    substitution on the edges (a URL inside a run, no character after the prefix, a prefix
    broken or doubled, U+017F, which the case-insensitive pattern takes for "s", Unicode
    spaces ending a URL) and on random strings of those pieces."""
    edges = ("xhttp://a b", "http://", "http:// x", "https://x", "httpſ://x", "HTTPſ://X.io",
             "wwww.x", "www.", "www. x", "aawww.b.c!d e", "http://a\u3000b", "http://é\u0085z",
             "http://a http://b", "hhttp://x", "http:/x", "httpss://x", "ftp://x",
             "..https://x.io/a?b=1)), rest", "https://ſ", "see.www.x.io/a", "İhttp://x")
    pieces = ("http", "https", "httpſ", "://", ":/", "www", "ww", ".", "s", "ſ", " ", "a",
              "\u3000", "é", "!", "h", "w", ":", "/", "İ", "\u0085", "WWW.", "Http")
    rng = random.Random(1)
    fuzz = ["".join(rng.choices(pieces, k=rng.randint(1, 12))) for _ in range(20_000)]
    for s in (*edges, *fuzz):
        assert tokenize(s) == plain_tokens(s), s
        assert Text.of(s).words == [t for t in plain_tokens(s) if re.fullmatch(r"\w+", t)], s
