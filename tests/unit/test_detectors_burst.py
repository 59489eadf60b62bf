"""Lexical burst: n-grams against a plain batch tokenisation, a new phrase spreading through
varied texts is caught, common phrases, copy-paste floods and warm-up vocabulary are not."""

from __future__ import annotations

import random
import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from detectors.burst import BurstConfig, BurstDetector, ngrams

VOCAB = ["".join(random.Random(k).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
         for k in range(300)]


def chatter(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(8, 16)))


def feed(d: BurstDetector, hours: float, seed: int, phrase: str | None = None,
         from_h: float = 4.0, share: float = 0.3, copy: bool = False) -> list:
    rng = random.Random(seed)
    found, t, i = [], 0.0, 0
    while t < hours * 3600:
        t += 12.0
        i += 1
        text = chatter(rng)
        if phrase and t >= from_h * 3600 and rng.random() < share:
            text = f"{phrase} is the best" if copy else f"{text[:30]} {phrase} {chatter(rng)}"
        d.observe_text(t, f"agent{rng.randrange(500)}", f"p{i}", text)
        if i % 5 == 0:
            found += d.findings(t)
    return found


def test_ngrams_match_a_batch_definition() -> None:
    text = "The Zorblax lattice is here: https://x.io/y and the lattice is HERE again, friends"
    words = re.findall(r"[a-z][a-z'-]*", re.sub(r"https?://\S+", " ", text.lower()))
    batch = {" ".join(words[i:i + 3]) for i in range(len(words) - 2)
             if sum(w in ENGLISH_STOP_WORDS for w in words[i:i + 3]) <= 1}
    assert ngrams(text) == batch


def test_new_phrase_spreading_is_caught_once() -> None:
    found = feed(BurstDetector(), 8, seed=1, phrase="glorbix vantal doctrine")
    keys = {f.key for f in found}
    assert len(keys) == 1 and "glorbix" in next(iter(keys))
    first = found[0].evidence
    assert first["adopters"] >= 12 and first["growth_rate_per_h"] >= 6
    assert first["born_at"] >= 4 * 3600 and len(first["agents"]) == first["adopters"]


def test_background_copy_paste_and_warmup_vocabulary_are_not_bursts() -> None:
    assert feed(BurstDetector(), 8, seed=2) == []
    # a copy-pasted flood is the surge detector's business
    assert feed(BurstDetector(), 8, seed=3, phrase="glorbix vantal doctrine", copy=True) == []
    # a phrase already in use during the warm-up is not new
    assert feed(BurstDetector(), 8, seed=4, phrase="glorbix vantal doctrine", from_h=0.0,
                share=0.05) == []


def test_memory_is_bounded_by_the_young_window() -> None:
    d = BurstDetector(BurstConfig(max_age_s=1800, memory_s=3600))
    feed(d, 5, seed=5)
    assert len(d._young) + len(d._single) <= 1800 / 12 * 16  # n-grams born in max_age_s
    assert len(d._seen) <= 3600 / 12 * 16
