"""Lexical burst: a new phrase adopted by many distinct agents within hours is caught whether
they weave it into varied posts or paste near-identical texts, with its readable phrase; common
phrases, warm-up vocabulary and unknown authors are not adopters; memory stays bounded."""

from __future__ import annotations

import pickle
import random
from datetime import UTC, datetime

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from detectors.burst import BurstConfig, BurstDetector
from streams.events import PostEvent
from streams.state.base import Item

VOCAB = ["".join(random.Random(k).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
         for k in range(300)]


def chatter(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(8, 16)))


def item(i: int, t: float, author: str | None, text: str, thread: str | None = None) -> Item:
    when = datetime.fromtimestamp(t, UTC)
    it = Item.of(PostEvent(id=f"post:{i}", event_time=when, observed_at=when,
                           post_id=thread or f"p{i}", author="x", content=text))
    it.author = author  # None: a post whose author the platform no longer names
    return it


def feed(d: BurstDetector, hours: float, seed: int, phrase: str | None = None,
         from_h: float = 4.0, share: float = 0.3, copy: bool = False,
         anonymous: float = 0.0, threads: int = 0, judge_every: int = 5,
         checkpoint_every: int = 0) -> list:
    """Drive ``d`` over a chatter stream; with ``checkpoint_every`` it is replaced by a pickled
    copy of itself every that many evaluations, as the reducer's checkpoint restores it."""
    rng = random.Random(seed)
    found, t, i = [], 0.0, 0
    while t < hours * 3600:
        t += 12.0
        i += 1
        text = chatter(rng)
        if phrase and t >= from_h * 3600 and rng.random() < share:
            text = f"{phrase} is the best" if copy else f"{text[:30]} {phrase} {chatter(rng)}"
        author = None if rng.random() < anonymous else f"agent{rng.randrange(500)}"
        thread = f"hot{i % threads}" if threads and phrase and phrase in text else None
        d.update(item(i, t, author, text, thread))
        if i % judge_every == 0:
            d.expire(t)
            found += [(t, f) for f in d.findings(t)] if checkpoint_every else d.findings(t)
            if checkpoint_every and i % (judge_every * checkpoint_every) == 0:
                d = pickle.loads(pickle.dumps(d))
    return found


def test_phrase_is_the_batch_word_trigram_and_readable() -> None:
    # the one text path: lower-cased word tokens (punctuation runs left out), 3 in a row
    found = feed(BurstDetector(), 8, seed=1, phrase="Glorbix, VANTAL doctrine!")
    assert {f.key for f in found} == {"ngram:glorbix vantal doctrine"}
    # n-grams over half stop-words are never reported, however widely adopted
    assert feed(BurstDetector(), 8, seed=1, phrase="glorbix of the") == []
    assert sum(w in ENGLISH_STOP_WORDS for w in ["glorbix", "of", "the"]) == 2


def test_new_phrase_spreading_through_varied_texts_is_caught_once() -> None:
    found = feed(BurstDetector(), 8, seed=1, phrase="glorbix vantal doctrine")
    assert len({f.key for f in found}) == 1
    first = found[0].evidence
    assert first["ngram"] == "glorbix vantal doctrine"
    assert first["adopters"] >= 12 and first["growth_rate_per_h"] >= 6
    assert first["born_at"] >= 4 * 3600 and len(first["agents"]) == first["adopters"]
    # evidence: the adopters' texts use the phrase; the timeline is the adopters in order,
    # led by the agent whose text gave it birth
    assert first["exemplars"] and all("glorbix vantal doctrine" in x["text"]
                                      for x in first["exemplars"])
    assert first["clusters"] == []  # varied texts: no near-duplicates
    tl = first["timeline"]
    assert tl["agents"] == first["adopters"] and tl["start"] == first["born_at"]
    assert [x["agent"] for x in tl["entries"]] == first["agents"][:30]
    assert [x["role"] for x in tl["entries"]][:1] == ["leader"]


def test_pasted_near_identical_texts_are_a_burst_too() -> None:
    found = feed(BurstDetector(), 8, seed=3, phrase="glorbix vantal doctrine", copy=True)
    assert {f.key for f in found} == {"ngram:glorbix vantal doctrine"}
    assert "vantal doctrine is" in found[0].evidence["related_ngrams"]
    # pasted texts: one near-duplicate cluster of the adopters' texts kept
    [cluster] = found[0].evidence["clusters"]
    assert cluster["size"] >= 2 and cluster["text"] == "glorbix vantal doctrine is the best"


def test_background_and_warmup_vocabulary_are_not_bursts() -> None:
    assert feed(BurstDetector(), 8, seed=2) == []
    # a phrase already in use during the warm-up is not new
    assert feed(BurstDetector(), 8, seed=4, phrase="glorbix vantal doctrine", from_h=0.0,
                share=0.05) == []


def test_phrase_repeated_within_few_threads_is_not_a_burst() -> None:
    assert feed(BurstDetector(), 8, seed=1, phrase="glorbix vantal doctrine", threads=4) == []
    found = feed(BurstDetector(), 8, seed=1, phrase="glorbix vantal doctrine", threads=5)
    assert {f.key for f in found} == {"ngram:glorbix vantal doctrine"}
    assert found[0].evidence["threads"] == 5


def test_unknown_authors_count_as_texts_not_adopters() -> None:
    d = BurstDetector()
    found = feed(d, 8, seed=1, phrase="glorbix vantal doctrine", anonymous=0.3)
    assert found and all(None not in f.evidence["agents"] for f in found)
    assert d.snapshot().value("burst_texts_unknown_author_total") > 0
    # everyone anonymous: nothing is adopted, nothing bursts, nothing crashes
    assert feed(BurstDetector(), 8, seed=1, phrase="glorbix vantal doctrine", anonymous=1.0) == []


def test_memory_is_bounded() -> None:
    cfg = BurstConfig(max_age_s=1800, memory_s=3600)
    d = BurstDetector(cfg)
    feed(d, 5, seed=5)
    per_text = 16  # at most 16 words, so at most 14 trigrams a text
    texts = lambda s: s / 12  # noqa: E731 - one text every 12 s
    # the seen table holds at most 6x (the n-grams of memory_s + one batch) slots, 2/3 used
    assert len(d._table.keys) <= 6 * (texts(3600) * per_text + cfg.batch)
    assert 3 * d._table.count <= 2 * len(d._table.keys)
    assert len(d._young) <= texts(1800) * per_text
    assert len(d._records) <= texts(1800) + 1


def findings_of(cfg: BurstConfig, seed: int) -> list:
    d = BurstDetector(cfg)
    return [(f.key, f.evidence) for f in feed(d, 9, seed=seed, phrase="glorbix vantal doctrine",
                                              share=0.1, anonymous=0.1)]


def test_batches_change_nothing_but_latency() -> None:
    """One text at a time (batch=1) and one vectorised batch a tick (flush_s=0) give the same
    findings, evidence included; batching over flush_s only delays them."""
    one = findings_of(BurstConfig(batch=1), 7)
    assert one and one == findings_of(BurstConfig(flush_s=0.0), 7)
    assert {k for k, _ in findings_of(BurstConfig(), 7)} == {k for k, _ in one}


def test_record_numbers_start_again_changing_nothing(monkeypatch) -> None:  # noqa: ANN001
    """The seen table keeps record numbers in 30 bits: renumbered from 1 whenever they near
    the limit (here 1500: once in the run, past the 1368th), the findings are the same."""
    cfg = BurstConfig(max_age_s=1800, min_adopters=6)  # 30 minutes of records: room to renumber
    whole = findings_of(cfg, 7)
    monkeypatch.setattr(BurstDetector, "_rec_limit", 1500)
    calls = []
    renumber = BurstDetector._renumber
    monkeypatch.setattr(BurstDetector, "_renumber", lambda d: calls.append(1) or renumber(d))
    assert whole and findings_of(cfg, 7) == whole and calls


def test_a_checkpoint_changes_nothing() -> None:
    """Judged at every text and pickled and restored at every 7th (checkpoints taken with texts
    still buffered), the detector reports the same findings at the same times as one never
    pickled (a checkpoint that flushed the buffer shifted the later flushes, and so a burst's
    start, live after a restore)."""
    def run(every: int) -> list:
        return [(t, f.key, f.evidence) for t, f in feed(
            BurstDetector(), 9, seed=7, phrase="glorbix vantal doctrine", share=0.1,
            judge_every=1, checkpoint_every=every)]
    whole = run(10**9)
    assert whole and run(7) == whole


def test_seen_table_is_a_set() -> None:
    import numpy as np

    from detectors.burst import _SeenTable

    rng = np.random.default_rng(0)
    table, ref = _SeenTable(bits=12), set()  # grown, then rebuilt (nothing dead)
    for _ in range(60):
        keys = np.unique(rng.integers(1, 9000, 300).astype(np.uint64))
        table.reserve(len(keys), 0.0, 1e9, 10**9)
        slot = table.find(keys)
        assert ((slot >= 0) == np.isin(keys, np.array(sorted(ref), np.uint64))).all()
        table.insert(keys[slot < 0])
        ref.update(keys.tolist())
        assert (table.find(keys) >= 0).all()
        assert table.count == len(ref) and 3 * table.count <= 2 * len(table.keys)


def test_seen_table_pickles_its_used_slots_only() -> None:
    """A checkpoint holds the used slots (20 bytes each), not the table; restored, it finds the
    same keys with the same fields and goes on inserting as the original does."""
    import numpy as np

    from detectors.burst import _SeenTable

    rng = np.random.default_rng(1)
    table = _SeenTable(bits=16)
    keys = np.unique(rng.integers(1, 2**63, 2000).astype(np.uint64))
    table.reserve(len(keys), 0.0, 1e9, 10**9)
    slot = table.insert(keys)
    table.last[slot] = rng.random(len(keys))
    table.ry[slot] = 2 * rng.integers(-1, 100, len(keys)) + (rng.random(len(keys)) < 0.5)
    blob = pickle.dumps(table)
    assert len(blob) < 30 * len(keys) + 1000 < table.nbytes()
    copy = pickle.loads(blob)
    assert (copy.bits, copy.count) == (table.bits, table.count)
    for f in ("last", "ry"):
        assert (getattr(copy, f)[copy.find(keys)] == getattr(table, f)[slot]).all()
    more = np.unique(rng.integers(1, 2**63, 500).astype(np.uint64))
    for t in (table, copy):
        assert not t.reserve(len(more), 0.0, 1e9, 10**9)  # more slots, no rebuild
    assert (copy.locate(more)[1] == table.locate(more)[1]).all()
    assert copy.count == table.count and (copy.find(more) >= 0).all()


def test_seen_table_rebuild_keeps_the_live_and_the_most_recently_seen() -> None:
    """A rebuild drops the entries unseen within ``memory_s`` and, over ``max_seen``, the least
    recently seen (ties by key); the others keep their fields."""
    import numpy as np

    from detectors.burst import _SeenTable

    keys = np.arange(1, 801, dtype=np.uint64)
    last = np.repeat(np.arange(8.0), 100)  # 100 keys last seen at each of 0, 1, ..., 7

    def filled() -> _SeenTable:
        table = _SeenTable(bits=12)
        slot = table.insert(keys)
        table.last[slot] = last
        table.ry[slot] = 2 * np.arange(800) + (keys % 3 == 0)  # record, young flag
        return table

    table = filled()  # under max_seen: the dead go, the live keep their fields
    table.reserve(0, 10.0, 5.0, 10**6, force=True)
    at = table.find(keys[500:])
    assert table.count == 300 and (table.find(keys[:500]) == -1).all() and (at >= 0).all()
    assert (table.last[at] == last[500:]).all() and (table.ry[at] >> 1 == np.arange(500, 800)).all()
    table = filled()
    table.reserve(0, 10.0, 5.0, 250, force=True)
    # dead: last seen before 10 - 5 (keys 1..500); of the 300 live, the 50 least recently
    # seen go (last seen at 5, the smallest keys first: 501..550)
    assert table.count == 250 and (table.find(keys[:550]) == -1).all()
    at = table.find(keys[550:])
    assert (at >= 0).all()
    assert (table.last[at] == last[550:]).all()
    assert (table.ry[at] >> 1 == np.arange(550, 800)).all()
    assert (table.young(at) == (keys[550:] % 3 == 0)).all()
    assert 3 * (table.count + 10**6) > 2 * len(table.keys)  # and it grows for what is to come
    table.reserve(10**6, 10.0, 5.0, 250)
    assert 3 * (table.count + 10**6) <= 2 * len(table.keys)
    assert (table.find(keys[550:]) >= 0).all()


def test_a_young_ngram_dropped_from_the_seen_table_still_adopts() -> None:
    """A young n-gram unseen for memory_s leaves the seen table at the sweep but stays young
    (max_age_s later): seen again, its first text makes it born anew (no use), the next agent
    adopts it (it is not promoted afresh: its adopters and uses carry on)."""
    from streams.text import Text

    d = BurstDetector(BurstConfig(warmup_s=0, warmup_texts=0, memory_s=600, max_age_s=7200,
                                  batch=1))
    phrase = "zorblax quintal plamber"
    [g] = Text.of(phrase).word_ngram_ids(3).tolist()
    d.update(item(1, 0.0, "a1", phrase))
    d.update(item(2, 10.0, "a2", phrase))  # a second agent: young
    d.expire(20.0)  # the first sweep: nothing dead yet
    assert g in d._young and (d._table.find(np.array([g], np.uint64)) >= 0).all()
    d.expire(700.0)  # unseen since 10: out of the table, young still
    assert g in d._young and (d._table.find(np.array([g], np.uint64)) < 0).all()
    d.update(item(3, 800.0, "a3", phrase))  # born anew: its first use is no use
    d.update(item(4, 810.0, "a4", phrase))
    y = d._young[g]
    assert list(y.adopters) == ["a1", "a2", "a4"] and y.uses == 3  # type: ignore[union-attr]
    assert y.born == 0.0 and y.posts == ["p1", "p2", "p4"]  # type: ignore[union-attr]
