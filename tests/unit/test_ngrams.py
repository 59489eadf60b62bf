"""N-gram births and deaths held against a plain set-based lifecycle on real Moltbook posts:
the live grace rule, and the paper's batch rule kept beside it for replays."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest

from service.sources.archive import open_archive
from streams.events import PostEvent
from streams.state.base import Item
from streams.state.ngram_kernels import BUCKETS
from streams.state.ngrams import BYTES_PER_NGRAM, NgramTracker, day_index, day_label, ngrams
from streams.text import tokenize

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


@cache
def real_posts() -> tuple[PostEvent, ...]:
    """Every real post of the shared archive (API answers and observatory rows), time order."""
    return tuple(e for e in open_archive([DATA]) if isinstance(e, PostEvent))


@pytest.fixture(scope="module")
def posts() -> list[Item]:
    return [Item.of(e) for e in real_posts()]


@pytest.fixture(scope="module")
def tokens(posts) -> list[tuple[int, list[str]]]:
    """(day, tokens) of every post for the references, tokenised again from the raw text."""
    return [(day_index(it.t), tokenize(it.event.text)) for it in posts]


def feed(tr: NgramTracker, items: list[Item]) -> NgramTracker:
    for it in items:
        tr.update(it)
    return tr


_memo: dict = {}


def paper_rates(tokens: list[tuple[int, list[str]]], n: int) -> list[dict]:
    key = ("paper", id(tokens), len(tokens), n)
    if key not in _memo:
        _memo[key] = plain_paper_rates(tokens, n)
    return _memo[key]


def plain_paper_rates(tokens: list[tuple[int, list[str]]], n: int) -> list[dict]:
    """metrics.md A1 literally: O_t sets, global frequency >= 2, first/last, A_t, rates."""
    seen: dict[int, set] = defaultdict(set)
    freq: Counter = Counter()
    for day, toks in tokens:
        grams = ngrams(toks, n)
        seen[day].update(grams)
        freq.update(grams)
    keep = {g for g, c in freq.items() if c >= 2}
    first: dict = {}
    last: dict = {}
    for d in sorted(seen):
        for g in seen[d] & keep:
            first.setdefault(g, d)
            last[g] = d
    lives = [(first[g], last[g]) for g in keep]
    return rates_from_lives(lives, min(seen), max(seen))


def lives_rates(tokens: list[tuple[int, list[str]]], n: int, grace: int
                ) -> tuple[list[dict], set]:
    key = ("lives", id(tokens), len(tokens), n, grace)
    if key not in _memo:
        _memo[key] = plain_lives_rates(tokens, n, grace)
    return _memo[key]


def plain_lives_rates(tokens: list[tuple[int, list[str]]], n: int, grace: int
                      ) -> tuple[list[dict], set]:
    """The live rule: each n-gram's occurrences split where the gap exceeds grace days; a life
    qualifies with >= 2 occurrences. Also returns the n-grams whose last day is within reach."""
    occ: dict = defaultdict(Counter)
    for day, toks in tokens:
        for g in ngrams(toks, n):
            occ[g][day] += 1
    lives = []
    for days in occ.values():
        run: list[int] = []
        for d in sorted(days):
            if run and d - run[-1] > grace:
                if sum(days[x] for x in run) >= 2:
                    lives.append((run[0], run[-1]))
                run = []
            run.append(d)
        if sum(days[x] for x in run) >= 2:
            lives.append((run[0], run[-1]))
    lo, hi = tokens[0][0], tokens[-1][0]
    alive = {g for g, days in occ.items() if max(days) + grace >= hi - 1}
    return rates_from_lives(lives, lo, hi), alive


def rates_from_lives(lives: list[tuple[int, int]], lo: int, hi: int) -> list[dict]:
    """A_t = (A_(t-1) minus the lives that ended on t-1) plus the lives born on t; rates."""
    born: dict[int, set] = defaultdict(set)
    ended: dict[int, set] = defaultdict(set)
    for i, (f, la) in enumerate(lives):
        born[f].add(i)
        ended[la].add(i)
    out = []
    prev: set = set()
    for t in range(lo, hi + 1):
        active = (prev - ended[t - 1]) | born[t]
        died = prev & ended[t - 1]
        out.append({"day": day_label(t), "active": len(active), "births": len(born[t]),
                    "birth_rate": len(born[t]) / len(active) if active else None,
                    "death_rate": len(died) / len(prev) if prev else None})
        prev = active
    return out


def assert_series_equal(got: list[dict], want: list[dict]) -> None:
    assert [r["day"] for r in got] == [r["day"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert (g["active"], g["births"]) == (w["active"], w["births"]), g["day"]
        for key in ("birth_rate", "death_rate"):
            if w[key] is None:
                assert g[key] is None, (g["day"], key)
            else:
                assert g[key] == pytest.approx(w[key], abs=1e-12), (g["day"], key)


@pytest.fixture(scope="module")
def unbounded(posts) -> NgramTracker:
    return feed(NgramTracker(grace_days=None, flush_every=50_000), posts)


def test_real_posts_span_many_days(tokens) -> None:
    assert len(tokens) > 2000 and len({d for d, _ in tokens}) > 20


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_paper_rule_exact_on_real_posts(tokens, unbounded, n) -> None:
    assert_series_equal(unbounded.series(n), paper_rates(tokens, n))


@pytest.fixture(scope="module")
def live(posts) -> NgramTracker:
    return feed(NgramTracker(grace_days=7, lateness_days=1, flush_every=30_000, batch=True),
                posts)


@pytest.fixture(scope="module")
def live_details(live) -> dict:
    return live.snapshot().details["ngrams"]


def test_live_grace_rule_exact_and_bounded(posts, tokens, live) -> None:
    for n in (1, 3, 5):
        want, alive = lives_rates(tokens, n, grace=7)
        assert_series_equal(live.series(n), want)
        assert live.tracked(n) == len(alive)  # everything older was dropped
    snap = live.snapshot()
    d = snap.details["ngrams"]
    assert d["report_day"] == day_label(day_index(posts[-1].t) - 7)
    # the columns' bytes a tracked n-gram, and each table that holds any its bucket offsets
    tracked = [live.tracked(n) for n in range(1, 6)]
    held = BYTES_PER_NGRAM * sum(tracked) + 8 * (BUCKETS + 1) * sum(map(bool, tracked))
    assert d["bytes_per_tracked_ngram"] == pytest.approx(held / sum(tracked))
    assert snap.value("ngrams_tracked", n="5") == live.tracked(5)
    json.dumps(snap.as_dict(), allow_nan=False)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_batch_rule_beside_the_live_one(tokens, live_details, n) -> None:
    """Replay's report: the paper's batch rates (last(g) final at the archive's end) under
    ``series_batch``, the live grace rule's under ``series``; on real posts they differ."""
    d = live_details
    want = paper_rates(tokens, n)
    assert_series_equal(d["series_batch"][str(n)], want)
    assert_series_equal(d["series"][str(n)], lives_rates(tokens, n, grace=7)[0])
    differ = [a["day"] for a, b in zip(d["series"][str(n)], want, strict=True)
              if a["death_rate"] != b["death_rate"]]
    assert differ  # the grace rule is not the published one on this archive


def test_batch_rule_counts_late_posts(posts, tokens) -> None:
    """A post older than the lateness bound is skipped by the live rule, not by the batch."""
    shuffled = posts[:]
    random.Random(1).shuffle(shuffled)
    tr = feed(NgramTracker(grace_days=7, batch=True, flush_every=20_000), shuffled)
    assert tr.late_total > 100
    for n in (1, 4):
        assert_series_equal(tr.series_batch(n), paper_rates(tokens, n))
    with pytest.raises(ValueError):
        NgramTracker().series_batch(1)


def test_order_does_not_matter_for_the_paper_rule(posts, tokens) -> None:
    """The busiest two days, shuffled: the paper's rule does not depend on arrival order."""
    count = Counter(d for d, _ in tokens)
    busy_days = {d for d, _ in count.most_common(2)}
    keep = [d in busy_days for d, _ in tokens]
    busy = [p for p, k in zip(posts, keep, strict=True) if k]
    random.Random(0).shuffle(busy)
    tr = feed(NgramTracker(grace_days=None, flush_every=10_000), busy)
    for n in (1, 2, 4):
        assert_series_equal(tr.series(n), paper_rates(
            [tk for tk, k in zip(tokens, keep, strict=True) if k], n))


def post(t: datetime, text: str, admitted: bool = True) -> Item:
    it = Item.of(PostEvent(id=f"post:{t}{text}", event_time=t, observed_at=t, post_id=text,
                           author=None, content=text))
    it.admitted = admitted
    return it


def test_gauges_late_events_and_settled_days() -> None:
    t0 = datetime(2026, 2, 1, 12, tzinfo=UTC)
    tr = NgramTracker(max_n=2, grace_days=2, lateness_days=1)
    for i, text in enumerate(["alpha beta", "alpha beta gamma", "beta gamma", "delta", "delta"]):
        tr.update(post(t0 + timedelta(days=i), text))
    tr.update(post(t0 + timedelta(days=1), "too late"))  # current is day 4, lateness 1
    tr.update(post(t0 + timedelta(days=4), "excluded excluded", admitted=False))
    assert tr.late_total == 1 and tr.texts_total == 5
    snap = tr.snapshot()
    s = {r["day"]: r for r in tr.series(1)}
    assert snap.details["ngrams"]["report_day"] == "2026-02-03"
    assert [r["settled"] for r in s.values()] == [True, True, True, False, False]
    # 2026-02-03: active = beta (02-01..03), gamma (02-02..03): no birth; died on 02-02: alpha
    assert s["2026-02-03"]["active"] == 2
    assert snap.value("ngram_birth_rate", n="1") == 0.0
    assert snap.value("ngram_death_rate", n="1") == pytest.approx(1 / 3)
    assert snap.value("ngram_birth_rate_mean") == pytest.approx(
        (0.0 + snap.value("ngram_birth_rate", n="2")) / 2)
    # alpha (last 02-02) may still continue its life while 02-02 + grace >= watermark
    assert tr.tracked(1) == 4
    tr.expire((t0 + timedelta(days=4, hours=6)).timestamp())  # same day: nothing to drop
    assert tr.tracked(1) == 4
    tr.expire((t0 + timedelta(days=5)).timestamp())  # watermark 02-05: alpha is done
    assert tr.tracked(1) == 3  # beta, gamma, delta
    with pytest.raises(ValueError):
        NgramTracker(grace_days=0, lateness_days=1)


def test_max_tracked_evicts_old_singletons_within_the_bound(posts, tokens) -> None:
    """Over ``max_tracked`` the singletons of the oldest days go, whole days at a time; each
    evicted n-gram moves a day's births, deaths or active count by at most one, so the series
    stays within ``ngram_evicted_total`` of the exact grace rule; the tables stay bounded."""
    bound = 60_000
    tr = NgramTracker(grace_days=7, lateness_days=1, flush_every=2_000, max_tracked=bound)
    over = 0
    for it in posts:
        tr.update(it)
        tables = tr._live.tables
        if sum(len(t) for t in tables) > bound:  # then only what may not be evicted is held
            over += 1
            assert not any(((t.counts() < 2) & (t.lasts() < tr.current)).any() for t in tables)
    assert tr.evicted_total > 0 and tr.evicted_through is not None and over
    worst = 0
    for n in (1, 3, 5):
        want = lives_rates(tokens, n, grace=7)[0]
        got = tr.series(n)
        assert [r["day"] for r in got] == [r["day"] for r in want]
        for g, w in zip(got, want, strict=True):
            for key in ("active", "births"):
                assert abs(g[key] - w[key]) <= tr.evicted_total, (g["day"], key)
                worst = max(worst, abs(g[key] - w[key]))
    assert worst > 0  # the bound is exercised, not vacuous
    snap = tr.snapshot()
    assert snap.value("ngram_evicted_total") == tr.evicted_total
    assert snap.details["ngrams"]["evicted_through"] == day_label(tr.evicted_through)


def test_repeated_texts_exact(posts, tokens) -> None:
    """Copies of a text on one day (a third copy is skipped without n-gram work): the same
    series as the plain lifecycle of every copy, live rule and batch rule; and the counters
    count every copy."""
    rng = random.Random(2)
    items: list[Item] = []
    toks: list[tuple[int, list[str]]] = []
    for it, tk in zip(posts[:1500], tokens[:1500], strict=True):
        copies = rng.choice((1, 1, 2, 3, 5))
        for c in range(copies):
            dup = Item.of(it.event.model_copy(update={"id": f"{it.event.id}#{c}"}))
            items.append(dup)
            toks.append(tk)
    live = feed(NgramTracker(grace_days=3, lateness_days=1, flush_every=5_000, batch=True),
                items)
    once = feed(NgramTracker(grace_days=3, lateness_days=1, batch=True), posts[:1500])
    assert live.texts_total == len(items) - live.late_total
    assert live.occurrences_total > once.occurrences_total
    for n in (1, 3, 5):
        assert_series_equal(live.series(n), plain_lives_rates(toks, n, 3)[0])
        assert_series_equal(live.series_batch(n), plain_paper_rates(toks, n))


def test_in_place_table_edits(monkeypatch) -> None:
    """The tables grow and shrink in place, a chunk at a time (tiny chunks here): the same
    arrays as a sorted merge and a mask, arrays restored from a pickle included."""
    import pickle

    import numpy as np

    from streams.state import ngrams as mod

    monkeypatch.setattr(mod, "CHUNK", 7)
    rng = np.random.default_rng(0)
    for _ in range(200):
        col = np.sort(rng.choice(1000, int(rng.integers(0, 40)), replace=False)).astype(
            np.uint64)
        rest = np.setdiff1d(np.arange(1000, dtype=np.uint64), col)
        vals = np.sort(rng.choice(rest, int(rng.integers(0, 20)), replace=False))
        want = np.sort(np.concatenate([col, vals]))
        got, twice = mod._inserted([pickle.loads(pickle.dumps(col)), col * 2],
                                   [vals, vals * 2], np.searchsorted(col, vals))
        assert np.array_equal(got, want) and np.array_equal(twice, want * 2)
        mask = rng.random(len(want)) < 0.5
        assert np.array_equal(mod._kept(pickle.loads(pickle.dumps(want)), mask), want[mask])


def test_packed_table_ids_split_by_bucket() -> None:
    """The packed table keeps each id as its bucket (top 16 bits, by place) and 48 low bits:
    merges and drops give the ids, counts and last days of a plain dict, with ids sharing
    their low bits in other buckets, the first and the last bucket, and a pickle between."""
    import pickle

    import numpy as np

    from streams.state import ngrams as mod

    def ids_of(table: mod._PackedTable) -> np.ndarray:
        top = np.repeat(np.arange(mod.ngram_kernels.BUCKETS, dtype=np.uint64),
                        np.diff(table.starts))
        return (top << np.uint64(48)) | (table.mid.astype(np.uint64) << np.uint64(32)) | table.lo

    rng = np.random.default_rng(1)
    low = rng.integers(0, 2**48, 40, dtype=np.uint64)
    top = np.array([0, 1, 2, 777, 65534, 65535], np.uint64) << np.uint64(48)
    pool = np.unique((top[:, None] | low[None, :]).ravel())
    table, plain = mod._PackedTable(clamp=2), {}
    births, deaths = np.zeros(8, np.int64), np.zeros(8, np.int64)
    for day in range(6):
        uk = np.unique(rng.choice(pool, 60))
        counts = rng.integers(1, 3, len(uk))
        days = np.full(len(uk), day, np.int64)
        table.merge(uk, days, days, counts, 7, births, deaths, 0)
        for g, c in zip(uk.tolist(), counts.tolist(), strict=True):
            plain[g] = (day, min(plain.get(g, (0, 0))[1] + c, 2))
        if day % 2:
            mask = rng.random(len(table)) < 0.7
            for g in ids_of(table)[~mask].tolist():
                del plain[g]
            table.keep(mask)
        table = pickle.loads(pickle.dumps(table))
        assert ids_of(table).tolist() == sorted(plain)
        assert table.lasts().tolist() == [plain[g][0] for g in sorted(plain)]
        assert table.counts().tolist() == [plain[g][1] for g in sorted(plain)]


def test_sort_runs_is_runs_of_the_sorted_ids() -> None:
    """The bucket sort's distinct ids and counts are those of ``np.sort``: hashes spread
    evenly (many sizes, repeats), an uneven spread (buckets past the insertion sort's size)
    and the extreme values; the input is left as it was."""
    import numpy as np

    from streams.state.ngram_kernels import runs, sort_runs

    rng = np.random.default_rng(0)
    cases = [rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
             for n in (0, 1, 2, 9, 100, 1000, 70_000)]
    cases = [np.concatenate([c, c[: len(c) // 3], c[:2]]) for c in cases]
    cases += [rng.integers(0, 300, 50_000).astype(np.uint64),
              (rng.integers(0, 4, 5000).astype(np.uint64) << np.uint64(62)) | np.uint64(7),
              np.array([2**64 - 1, 0, 2**63, 2**64 - 1, 0], np.uint64)]
    for ids in cases:
        before = ids.copy()
        keys, counts = sort_runs(ids)
        want_keys, want_counts = runs(np.sort(ids))
        assert np.array_equal(ids, before)
        assert np.array_equal(keys, want_keys) and np.array_equal(counts, want_counts)
