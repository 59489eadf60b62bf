"""Cascades vs plain set recomputation on real threads; exposures vs the paper's static-graph
computation; the discrete power-law fit vs powerlaw.Fit(discrete=True)."""

from __future__ import annotations

import math
import pickle
import random
import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np
import powerlaw
import pytest
from scipy import optimize, special
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from streams.events import CommentEvent, PostEvent
from streams.state import cascade_kernels as kernels
from streams.state import cascades
from streams.state.base import Item
from streams.state.cascades import (
    CascadeConfig,
    CascadeEngine,
    PowerLawFit,
    fit_discrete_power_law,
    kept_ngrams,
)
from streams.state.graph import InteractionGraph
from streams.text import Text, tokenize
from tests.unit.collective_data import thread_events

CFG = CascadeConfig(min_adopters=3, flush_every=5_000)  # the sample is small: 10 leaves few


def items() -> list[Item]:
    return [Item.of(e) for e in thread_events()]


def batch_adoptions(min_adopters: int) -> dict[str, dict[str, float]]:
    """n-gram -> {agent: first use}, straight from the definition with Python sets."""
    first: dict[str, dict[str, float]] = {}
    for e in thread_events():
        if e.author is None:
            continue
        words = [t for t in tokenize(e.text) if t[0].isalnum() or t[0] == "_"]
        for n in (3, 4, 5):
            for i in range(len(words) - n + 1):
                gram = words[i:i + n]
                if sum(w in ENGLISH_STOP_WORDS for w in gram) * 2 > n:
                    continue
                seen = first.setdefault(" ".join(gram), {})
                t = e.event_time.timestamp()
                seen[e.author] = min(seen.get(e.author, t), t)
    return {g: a for g, a in first.items() if len(a) >= min_adopters}


def run(config: CascadeConfig = CFG, stream: list[Item] | None = None) -> CascadeEngine:
    eng = CascadeEngine(config)
    for it in stream if stream is not None else items():
        eng.expire(it.t)
        eng.update(it)
    eng.analyse(full=True)
    return eng


@pytest.fixture(scope="module")
def engine() -> CascadeEngine:
    return run()


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, float]]:
    return batch_adoptions(CFG.min_adopters)


def test_cascade_sizes_match_a_plain_recount(engine, reference) -> None:
    assert len(reference) > 50
    assert engine.sizes() == {g: len(a) for g, a in reference.items()}
    for gram in list(reference)[:20]:
        assert engine.adopters(gram) == reference[gram]  # first use, exactly
    snap = engine.snapshot()
    assert snap.value("cascades") == len(reference)
    assert snap.value("cascade_size_max") == max(len(a) for a in reference.values())
    assert snap.value("cascade_ngrams_evicted_total") == 0
    assert snap.value("cascade_anonymous_texts_total") == sum(
        e.author is None for e in thread_events())


def test_order_and_prefix_collisions_do_not_matter(reference, monkeypatch) -> None:
    """Shuffled arrival (first use = the earliest time, not the first seen) and a key prefix
    of 10 bits (n-grams share prefixes all the time: the exact slow paths) give the same."""
    shuffled = items()
    random.Random(3).shuffle(shuffled)
    monkeypatch.setattr(cascades, "PREFIX_MASK", np.uint64(0xFFC0_0000_0000_0000))
    eng = run(CascadeConfig(min_adopters=3, flush_every=3_000), shuffled)
    assert eng.sizes() == {g: len(a) for g, a in reference.items()}
    for gram in list(reference)[:20]:
        assert eng.adopters(gram) == reference[gram]


def test_exposures_match_the_papers_static_graph_computation(engine, reference) -> None:
    check_exposures(engine, reference)


def test_exposures_read_the_edges_newer_than_the_index(reference) -> None:
    """Edges added after the source index was built (under a quarter of it: no rebuild) are
    read from the sorted tail: the same exposures as the static computation."""
    stream = items()
    g = InteractionGraph()
    sizes = [(g.update(it), g.cumulative_size()[1])[1] for it in stream]
    cut = next(i for i, m in enumerate(sizes) if m >= 0.85 * sizes[-1])  # 15 % of the edges
    eng = CascadeEngine(CFG)
    for it in stream[:cut]:
        eng.update(it)
    eng.exposures(next(iter(reference)))  # builds the index on the graph so far
    indexed = eng._edges.m
    for it in stream[cut:]:
        eng.update(it)
    eng.analyse(full=True)
    assert eng._edges.m == indexed and len(eng._edges.tail_dst) > 0
    check_exposures(eng, reference)


def test_exposure_analysis_covers_the_largest_cascades(reference) -> None:
    """Over ``exposure_cascades`` cascades, the largest that many (ties by id) are analysed
    and listed, largest first."""
    eng = run(CascadeConfig(min_adopters=3, exposure_cascades=10, shown=10))
    want = sorted(reference, key=lambda g: (-len(reference[g]), eng._gram_id(g)))[:10]
    assert len(reference) > 10
    assert [c["ngram"] for c in eng.snapshot().details["cascades"]] == want


@pytest.mark.parametrize(("merge_min", "growth", "levels"), [(0, 8, 2), (20, 2, 4)])
def test_levelled_store_merges_exactly(reference, monkeypatch, merge_min: int, growth: int,
                                       levels: int) -> None:
    """The cascades' adoptions merged into one last level at every flush, or held in several
    levels (the smaller ones under their bounds): the same sizes, adopters and exposures."""
    monkeypatch.setattr(cascades, "MERGE_MIN", merge_min)
    monkeypatch.setattr(cascades, "GROWTH", growth)
    monkeypatch.setattr(cascades, "ROOM_MIN", 0)  # merged levels get room from the first
    in_place = []  # merges into a level's buffer with room (left by an earlier merge)
    merge = cascades.merge_in_place
    monkeypatch.setattr(cascades, "merge_in_place", lambda *a: in_place.append(merge(*a)))
    two = []  # two levels merged at once into a third (its own test below)
    merge3 = cascades.merge3_in_place
    monkeypatch.setattr(cascades, "merge3_in_place", lambda *a: two.append(merge3(*a)))
    eng = run(CascadeConfig(min_adopters=3, flush_every=300))
    assert in_place + two
    big = eng._big
    assert len(big.evs) >= levels and len(big.evs[-1]) > 0
    assert (sum(len(ev) > 0 for ev in big.evs) > 1) == (merge_min > 0)
    for i, ev in enumerate(big.evs[:-1]):
        assert len(ev) <= merge_min * growth ** (i + 1)
    assert eng.sizes() == {g: len(a) for g, a in reference.items()}
    for gram in list(reference)[:20]:
        assert eng.adopters(gram) == reference[gram]
    check_exposures(eng, reference)


def check_filters(engine: CascadeEngine) -> float:
    """Every cascade's filter holds each of its adopters (no false negative), is sized by
    its adopters (a power of two of words, ``FILTER_FILL`` to ``FILTER_MAX`` adopters a word
    but a one-word filter's), and its false positives on the other agents: their share."""
    big = engine._big
    words = big.fbuf
    n = len(big.ptrs[0]) - 1
    agents = np.arange(len(engine._agents))
    passed = tried = 0
    for c in range(n):
        adopters = np.unique(engine._ta[big.of(c)]).astype(np.int64)
        assert int(big.fcount[c]) == len(adopters)
        w = int(big.fsize[c])
        assert w & (w - 1) == 0 and len(adopters) <= cascades.FILTER_MAX * w
        assert w == 1 or len(adopters) >= cascades.FILTER_FILL * w
        run = words[big.fstart[c]:big.fstart[c] + w]
        maybe = [a for a in agents.tolist()  # (it sets the pairs it fails: one at a time)
                 if len(kernels.filter_pending(run.copy(), np.zeros(1, np.int64),
                                               big.fsize[c:c + 1], np.zeros(1, np.uint32),
                                               np.zeros(1, np.int32), np.array([a], np.uint32),
                                               np.zeros(1, bool)))]
        assert np.isin(adopters, maybe).all()
        passed += len(maybe) - len(adopters)
        tried += len(agents) - len(adopters)
    return passed / tried


@pytest.mark.parametrize(("merge_min", "growth"), [(0, 8), (20, 2)])
def test_adopter_filters_skip_only_absent_pairs(reference, monkeypatch, merge_min: int,
                                                growth: int) -> None:
    """The levels after the first are searched only for the pairs a cascade's filter may
    hold: the same sizes and first uses, every filter holding its cascade's adopters
    (made anew as the cascades grow: the runs left behind under a third of the words), few
    false positives; after a restore (their words are not pickled) made again from the
    store."""
    monkeypatch.setattr(cascades, "MERGE_MIN", merge_min)
    monkeypatch.setattr(cascades, "GROWTH", growth)
    stream = items()
    half = len(stream) // 2
    eng = CascadeEngine(CascadeConfig(min_adopters=3, flush_every=300))
    for it in stream[:half]:
        eng.update(it)
    eng.tracked()  # merged: the filters are up to date
    assert check_filters(eng) < 0.1
    sized, held = eng._big.fsize.copy(), eng._big.fbuf[:eng._big.fused].copy()
    nbytes = eng.nbytes()
    eng = pickle.loads(pickle.dumps(eng))
    assert eng._big.fbuf is None and eng.nbytes() == nbytes
    eng._big._filters(eng._ta)  # as the next search makes them: the same words
    assert np.array_equal(eng._big.fbuf, held)
    for it in stream[half:]:
        eng.update(it)
    assert eng.sizes() == {g: len(a) for g, a in reference.items()}
    for gram in list(reference)[:20]:
        assert eng.adopters(gram) == reference[gram]
    assert check_filters(eng) < 0.1
    fresh = CascadeEngine(CascadeConfig(min_adopters=3, flush_every=300))
    for it in stream:
        fresh.update(it)
    assert fresh.sizes() == eng.sizes()
    grown = fresh._big.fsize
    assert (grown > 1).any() and len(grown) > len(sized)
    assert check_filters(fresh) < 0.1
    live = int(fresh._big.fsize.sum())
    assert live < fresh._big.fused <= live * 4 // 3


def check_exposures(engine: CascadeEngine, reference: dict[str, dict[str, float]]) -> None:
    g = InteractionGraph(retain_days=10_000)
    for it in items():
        g.update(it)
    net = nx.DiGraph(list(g.cumulative()))
    agents: Counter = Counter()
    adopted: Counter = Counter()
    cap = CFG.max_exposure
    for gram, adopters in reference.items():
        mine, all_k, _ = engine.exposures(gram)
        ref_k: Counter = Counter()
        for a in net.nodes():  # Molt Dynamics' compute_exposures, verbatim in spirit
            k = sum(1 for j in net.predecessors(a) if j in adopters
                    and (a not in adopters or adopters[j] < adopters[a]))
            ref_k[k] += 1
            agents[min(k, cap)] += 1
            adopted[min(k, cap)] += a in adopters
            if a in adopters:
                assert mine[a] == k
        assert +all_k == ref_k
        assert set(mine) == set(adopters) & set(net.nodes())
        names, times, k_of = engine.adoptions(gram)  # the hazard's read: every adopter
        assert dict(zip(names, times.tolist(), strict=True)) == adopters
        assert {a: k for a, k in zip(names, k_of.tolist(), strict=True) if k >= 0} == mine
        assert all(k == -1 for a, k in zip(names, k_of.tolist(), strict=True) if a not in mine)
    rate = engine.snapshot().details["adoption_rate_by_exposure"]
    assert {int(k): v["agents"] for k, v in rate.items()} == dict(agents)
    assert {int(k): v["adopters"] for k, v in rate.items() if v["adopters"]} == {
        k: v for k, v in adopted.items() if v}
    assert len(agents) > 1  # somebody was exposed


def test_incremental_analysis_only_redoes_changed_cascades() -> None:
    """Periodic analyses on the way give the same figures as one full analysis at the end
    when the budget covers the changes; a tiny budget leaves stale cascades, said so."""
    stream = items()
    eng = CascadeEngine(CascadeConfig(min_adopters=3, flush_every=2_000,
                                      analysis_every=3600.0, analysis_min_texts=50))
    for it in stream:
        eng.expire(it.t)
        eng.update(it)
    eng.analyse()
    full = run()
    a, b = eng.snapshot().details, full.snapshot().details
    assert a["exposure_stale_cascades"] == 0
    assert a["cascade_fit"] == b["cascade_fit"]
    tight = CascadeEngine(CascadeConfig(min_adopters=3, exposure_budget=10))
    for it in stream:
        tight.update(it)
    tight.analyse()
    assert tight.snapshot().details["exposure_stale_cascades"] > 0


def test_bounded_table_only_loses_small_ngrams(reference) -> None:
    eng = run(CascadeConfig(min_adopters=3, max_tracked=2_000, flush_every=1_000))
    exact = {g: len(a) for g, a in reference.items()}
    assert eng.tracked() <= 2_000
    snap = eng.snapshot()
    assert snap.value("cascade_ngrams_evicted_total") > 0
    lost = snap.value("cascade_evicted_adopters_max")
    assert lost is not None and lost < 3
    for gram, size in eng.sizes().items():
        assert exact[gram] - lost <= size <= exact[gram]
    assert snap.value("cascade_state_bytes") == eng.nbytes() > 0


def test_state_bytes_are_the_layout(engine) -> None:
    """The stated bytes: per tracked n-gram, per entry of the pool of blocks (which holds the
    non-cascades' adoptions in blocks under twice their fill, and free blocks), per cascade
    adoption, per cascade and level of their store, per text."""
    ids, sizes = engine._cascades()
    small = engine.adoptions_total - int(sizes.sum())
    pool = engine._small
    fills = engine._size  # the table holds the n-grams that are not cascades
    held = int(pool.caps[pool.cls_of[fills]].sum())
    assert int(fills.sum()) == small <= held < 2 * small
    assert held + pool.heads[-1] == pool.used <= len(pool.pool)
    assert engine.tracked() == len(engine._keys) + len(ids)
    assert (fills < engine.config.min_adopters).all()
    assert engine.nbytes() == (cascades.BYTES_PER_NGRAM * len(engine._keys)
                               + cascades.BYTES_PER_POOLED * len(pool.pool)
                               + cascades.BYTES_PER_CASCADE_ADOPTION * int(sizes.sum())
                               + cascades.BYTES_PER_CASCADE * len(ids) + 4
                               + cascades.BYTES_PER_FILTER_WORD * engine._big.fused
                               + cascades.BYTES_PER_LEVEL_CASCADE * (len(ids) + 1)
                               * sum(len(ptr) > 0 for ptr in engine._big.ptrs)
                               + sum(len(g.encode()) for g in engine.sizes())
                               + cascades.BYTES_PER_TEXT * engine._ntt)


@pytest.mark.parametrize(("alpha", "floor"), [(2.3, 10), (2.57, 10), (2.8, 1), (2.2, 1)])
def test_power_law_fit_matches_powerlaw_package(alpha: float, floor: int) -> None:
    rng = np.random.default_rng(int(alpha * 100))
    x = rng.zipf(alpha, 400_000)
    x = x[x >= floor][:1500]
    mine = fit_discrete_power_law(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = powerlaw.Fit(x, discrete=True, verbose=False)
    assert mine is not None
    assert mine.xmin == ref.xmin
    # powerlaw uses 1 + n / sum(log(x / (xmin - 1/2))) once xmin >= 10: off by < 0.01 here
    assert abs(mine.alpha - ref.alpha) <= 0.05
    assert abs(mine.alpha - alpha) <= 4 * mine.stderr
    assert mine.stderr == pytest.approx(ref.power_law.standard_err, rel=0.05)
    few = fit_discrete_power_law(x, max_candidates=30)  # bounded search: still the tail law
    assert few is not None and abs(few.alpha - alpha) <= 4 * few.stderr


def test_power_law_on_real_cascade_sizes() -> None:
    eng = run(CascadeConfig(min_adopters=2))
    sizes = list(eng.sizes().values())
    mine = fit_discrete_power_law(sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = powerlaw.Fit(sizes, discrete=True, verbose=False)
    assert mine is not None and mine.xmin == ref.xmin
    assert abs(mine.alpha - ref.alpha) <= 0.05
    assert eng.snapshot().value("cascade_alpha") == pytest.approx(mine.alpha)


def test_kept_ngrams_are_the_texts_word_ngrams() -> None:
    text = Text.of("The swarm is the answer; the swarm decides who molts, and when it molts.")
    ids, ns, starts = kept_ngrams(text)
    for n in (3, 4, 5):
        assert np.array_equal(ids[ns == n], text.word_ngram_ids(n)[starts[ns == n]])
    stops = [sum(w in ENGLISH_STOP_WORDS for w in text.words[s:s + n])
             for n, s in zip(ns.tolist(), starts.tolist(), strict=True)]
    assert all(2 * k <= n for k, n in zip(stops, ns.tolist(), strict=True))
    assert len(ids) < 3 * len(text.words) - 9  # some were dropped


def test_first_use_counts_and_details_are_bounded() -> None:
    t = datetime(2026, 2, 1, tzinfo=UTC)
    eng = CascadeEngine(CascadeConfig(min_adopters=2, shown=1, adopters_shown=1))
    for i, who in enumerate(["a", "b", "a", "c", None]):
        ts = t + timedelta(minutes=i)
        eng.update(Item.of(PostEvent(id=f"post:{i}", event_time=ts, observed_at=ts,
                                     post_id=str(i), author=who, title="molt swarm rising")))
    eng.update(Item.of(CommentEvent(id="comment:x", event_time=t, observed_at=t,
                                    comment_id="x", post_id="0", author="b", reply_to="a",
                                    content="no grams")))
    eng.analyse()
    snap = eng.snapshot()
    assert eng.sizes() == {"molt swarm rising": 3}
    assert snap.value("cascade_adoptions_total") == 3
    assert snap.value("cascade_anonymous_texts_total") == 1
    (cascade,) = snap.details["cascades"]
    assert cascade["size"] == 3 and len(cascade["adopters"]) == 1
    assert cascade["adopters"][0] == {"agent": "a", "time": t.isoformat(), "exposure": 0}


def test_power_law_fit_from_the_histogram_is_the_same() -> None:
    """The engine fits from the sizes' bincount (no sort): the very same fit as from them."""
    x = np.random.default_rng(5).zipf(2.4, 5_000)
    for cap in (None, 30):
        assert fit_discrete_power_law(x, max_candidates=cap) == fit_discrete_power_law(
            x, max_candidates=cap, histogram=np.bincount(x))


def plain_power_law_fit(x: np.ndarray, xmin: int | None = None,
                        alpha_range: tuple[float, float] | None = (0.0, 3.0),
                        max_candidates: int | None = None) -> PowerLawFit | None:
    """The CSN search as written: each candidate's alpha by scipy's bounded search alone, its
    KS distance over its whole tail, the least kept."""
    values, counts = np.unique(x[x >= 1], return_counts=True)
    candidates = [xmin] if xmin is not None else values[:-1].tolist()
    if xmin is None and max_candidates is not None and len(candidates) > max_candidates:
        spaced = np.linspace(0, len(candidates) - 1, max_candidates).round().astype(np.int64)
        candidates = values[:-1][np.unique(spaced)].tolist()
    fits = []
    for xm in candidates:
        i = int(np.searchsorted(values, xm))
        n = int(counts[i:].sum())
        if i >= len(values) - 1 or n < 2:
            continue
        log_sum = float(np.cumsum((counts * np.log(values))[::-1])[::-1][i])

        def nll(a: float, n: int = n, log_sum: float = log_sum, xm: int = xm) -> float:
            return n * math.log(special.zeta(a, xm)) + a * log_sum

        alpha = float(optimize.minimize_scalar(nll, bounds=(1.0001, 10.0), method="bounded",
                                               options={"xatol": 1e-7}).x)
        model = 1.0 - special.zeta(alpha, values[i:] + 1) / special.zeta(alpha, xm)
        ks = float(np.abs(np.cumsum(counts[i:]) / n - model).max())
        fits.append(PowerLawFit(alpha, (alpha - 1) / math.sqrt(n), xm, n, ks))
    valid = [f for f in fits if alpha_range is None
             or alpha_range[0] < f.alpha < alpha_range[1]] or fits
    return min(valid, key=lambda f: f.ks) if valid else None


def test_power_law_fit_is_the_plain_search() -> None:
    """All candidates' alphas found at once and poor candidates passed over by a bound on
    their KS distance: the very floats of the plain search, whatever the data and options."""
    rng = np.random.default_rng(7)
    options: list[dict] = [{}, {"max_candidates": 30}, {"alpha_range": None},
                           {"alpha_range": (2.0, 2.2)}, {"xmin": 4}, {"xmin": 10**6}]
    for trial in range(60):
        x = rng.zipf(rng.uniform(1.2, 4.5), int(rng.integers(2, 20_000)))
        x = x + int(rng.integers(0, 20))
        kw = options[trial % len(options)]
        assert fit_discrete_power_law(x, **kw) == plain_power_law_fit(x, **kw), (trial, kw)


def test_public_listing_names_every_cascade(engine) -> None:
    """cascade_ids / ngram (what the hazard fit reads) agree with sizes(); settled() says
    whether a text came since the last analysis."""
    ids, sizes = engine.cascade_ids()
    assert {engine.ngram(g): s for g, s in zip(ids.tolist(), sizes.tolist(), strict=True)} \
        == engine.sizes()
    assert engine.settled()
    stream = items()
    eng = CascadeEngine(CFG)
    for it in stream[:-1]:
        eng.update(it)
    eng.analyse()
    assert eng.settled()
    eng.update(next(it for it in stream if it.author is not None and it.text is not None))
    assert not eng.settled()


def _merged(ev: np.ndarray, indptr: np.ndarray, ev2: np.ndarray, indptr2: np.ndarray,
            text_agent: np.ndarray) -> np.ndarray:
    """:func:`kernels.merge_segments` into a new buffer of the merged size."""
    out = np.empty(len(ev) + len(ev2), np.uint32)
    kernels.merge_segments(ev, indptr, ev2, indptr2, text_agent, out)
    return out


def test_kernels_match_numpy() -> None:
    """The merge's compiled kernels against their NumPy definitions, on random data with
    repeats."""
    rng = np.random.default_rng(7)
    for n in (0, 1, 50, 5_000):
        arr = np.sort(rng.integers(0, 1_000, n).astype(np.uint64))
        q = np.sort(rng.integers(0, 1_100, 300).astype(np.uint64))
        assert [kernels._gallop(arr, v, 0) for v in q] == np.searchsorted(arr, q).tolist()
        # two runs of (cascade, agent)-sorted adoptions inserted in their merged order (the
        # first run's first on ties), at insertion points that do not decrease in that order
        agent_of = rng.integers(0, 30, 1_000).astype(np.uint32)
        col = rng.integers(0, 1_000, n).astype(np.uint32)
        cno = rng.integers(0, 8, 40 + n // 10)
        texts = rng.integers(0, 1_000, len(cno)).astype(np.uint32)
        key = (cno.astype(np.uint64) << np.uint64(32)) | agent_of[texts]
        first = rng.random(len(cno)) < 0.6
        merged = np.concatenate((np.flatnonzero(first), np.flatnonzero(~first)))
        merged = merged[np.argsort(key[merged], kind="stable")]
        pos = np.empty(len(cno), np.int64)
        pos[merged] = np.sort(rng.integers(0, n + 1, len(cno)))
        indptr = np.sort(rng.integers(0, 1_000, 9)).astype(np.uint32)
        want_ptr = indptr.copy()
        want_ptr[1:] += np.cumsum(np.bincount(cno, minlength=8)).astype(np.uint32)
        runs = [tuple(col_[np.sort(np.flatnonzero(sel))[np.argsort(key[sel], kind="stable")]]
                      for col_ in (cno, texts, pos)) for sel in (first, ~first)]
        got = np.full(len(col) + len(cno) + 3, 7, np.uint32)  # room left untouched
        kernels.insert_runs(col, indptr, *runs[0], *runs[1], agent_of, got)
        assert np.array_equal(got[:-3], np.insert(col, pos[merged], texts[merged]))
        assert (got[-3:] == 7).all()
        assert np.array_equal(indptr, want_ptr)
        # the new cascades' adoptions: the merge's sorted by (cascade, agent), the pool's
        # blocks by cascade only; one run sorted by (cascade, agent) out (agents distinct)
        jc = np.sort(rng.integers(0, 1 + n // 20, min(n // 3 + 1, 900)))
        jt = rng.permutation(1_000)[:len(jc)].astype(np.uint32)
        own = rng.permutation(1_000).astype(np.uint32)  # an agent a text
        way = np.r_[rng.random(len(jc) - 1) < 0.5, True] if n else np.ones(1, bool)
        (ac, at_), (bc, bt) = ((jc[sel], jt[sel]) for sel in (way, ~way))
        order = np.lexsort((own[at_], ac))
        cat = np.concatenate((ac[order], bc)), np.concatenate((at_[order], bt))
        want = np.lexsort((own[cat[1]], cat[0]))
        got = kernels.joined_run(cat[0], cat[1], len(ac), own)
        assert got[0].tolist() == cat[0][want].tolist() and got[1].tolist() == cat[1][want].tolist()
    # the cascades' store: segments sorted by agent, pairs by (cascade, agent) (galloping
    # within a cascade) and a few out of order (searched afresh)
    text_agent = rng.integers(0, 50, 600).astype(np.uint32)
    segs = []
    for k in rng.integers(0, 40, 12):  # each segment sorted by agent, one text an agent
        texts = rng.choice(600, k, replace=False)
        segs.append(texts[np.unique(text_agent[texts], return_index=True)[1]])
    ev = np.concatenate(segs).astype(np.uint32)
    indptr = np.r_[0, np.cumsum([len(x) for x in segs])].astype(np.uint32)
    cno = np.sort(rng.integers(0, 12, 300))
    agent = rng.integers(0, 52, 300)
    order = np.lexsort((agent, cno))
    cno, agent = cno[order], agent[order]
    keep = np.r_[True, (np.diff(cno) != 0) | (np.diff(agent) != 0)]  # distinct pairs
    cno, agent = cno[keep].astype(np.int32), agent[keep].astype(np.uint32)
    agent[50:60] = agent[50:60][::-1]
    n = len(cno)
    # each pair's own text (one by its agent, when there is one) and first use (its time): a
    # found pair's stored text is replaced by its own when that is earlier
    text_time = rng.random(600)
    by_agent = {a: np.flatnonzero(text_agent == a) for a in range(52)}
    cx = np.array([rng.choice(by_agent[a]) if len(by_agent[a]) else 0 for a in agent.tolist()],
                  np.uint32)
    found, pos = np.zeros(n, bool), np.empty(n, np.int64)
    stored = ev.copy()
    kernels.segment_find(stored, indptr, cno, agent, text_agent, found, pos, cx, text_time)
    for i, (c, a) in enumerate(zip(cno.tolist(), agent.tolist(), strict=True)):
        seg = text_agent[ev[indptr[c]:indptr[c + 1]]]
        assert pos[i] == indptr[c] + np.searchsorted(seg, a)
        assert found[i] == (a in seg.tolist())
        if found[i]:
            old = ev[pos[i]]
            want = cx[i] if text_time[cx[i]] < text_time[old] else old
            assert stored[pos[i]] == want
    assert (stored == ev)[~np.isin(np.arange(len(ev)), pos[found])].all()
    # two levels merged: each segment the agent-sorted union of the two
    segs2 = [texts[~np.isin(text_agent[texts], text_agent[seg])]
             for seg, texts in zip(segs, np.split(rng.permutation(600), 12), strict=True)]
    segs2 = [t[np.unique(text_agent[t], return_index=True)[1]] for t in segs2]
    ev2 = np.concatenate(segs2).astype(np.uint32)
    indptr2 = np.r_[0, np.cumsum([len(x) for x in segs2])].astype(np.uint32)
    merged = _merged(ev, indptr, ev2, indptr2, text_agent)
    for c in range(12):
        lo, hi = indptr[c] + indptr2[c], indptr[c + 1] + indptr2[c + 1]
        union = np.concatenate((segs[c], segs2[c]))
        assert merged[lo:hi].tolist() == union[np.argsort(text_agent[union])].tolist()
    # the same in a new buffer with room, and in place into either level's (the first
    # segments' adoptions of one level or of both left empty: they stay where they are)
    roomy = np.full(len(merged) + 7, 7, np.uint32)
    kernels.merge_segments(ev, indptr, ev2, indptr2, text_agent, roomy)
    assert np.array_equal(roomy[:len(merged)], merged) and (roomy[len(merged):] == 7).all()
    for a, pa, b, pb in ((ev, indptr, ev2, indptr2), (ev2, indptr2, ev, indptr)):
        for empty in (0, 3):
            skip_a = pa.copy()
            skip_a[:empty + 1] = 0
            skip_a[empty + 1:] -= pa[empty]
            a_ = a[pa[empty]:]
            want = _merged(a_, skip_a, b, pb, text_agent)
            buf = np.full(len(a_) + len(b) + 5, 7, np.uint32)
            buf[:len(b)] = b
            kernels.merge_in_place(buf, len(b), a_, skip_a, pb, text_agent)
            assert np.array_equal(buf[:len(want)], want) and (buf[len(want):] == 7).all()
    # a later level: only the pairs asked for and not found yet searched
    was = found.copy()
    asked = np.flatnonzero(rng.random(n) < 0.7)
    kernels.segment_find_some(ev2.copy(), indptr2, asked, cno, agent, text_agent, found, cx,
                              text_time)
    asked_set = set(asked.tolist())
    for i, (c, a) in enumerate(zip(cno.tolist(), agent.tolist(), strict=True)):
        there = i in asked_set and a in text_agent[segs2[c]].tolist()
        assert found[i] == (was[i] or there)


def test_merge_pairs_matches_a_dict_of_lists() -> None:
    """A merge's pairs into the n-gram table and the pool of blocks (the non-cascades'
    adoptions) against a dict n-gram -> texts: rounds of pairs of cascades, of held and of
    unseen n-grams, seen ones (the first use made the earlier), n-grams growing across
    classes and crossing ``m`` (their block taken), takes (freeing blocks, reused by later
    merges) and compactions."""
    rng = np.random.default_rng(3)
    m = 10
    pool = cascades._Pool(m)
    assert pool.caps.tolist() == [1, 2, 4, 9]
    assert cascades._Pool(2).caps.tolist() == [1] and cascades._Pool(4).caps.tolist() == [1, 3]
    text_agent = np.zeros(20_000, np.uint32)
    text_time = np.zeros(20_000)
    want: dict[int, list[int]] = {}  # non-cascades: their texts
    sizes: dict[int, int] = {}  # every n-gram of the table (not the cascades)
    lasts: dict[int, float] = {}
    cids = np.arange(200, 204, dtype=np.uint64)  # cascades (not in the table)
    keys = np.empty(0, np.uint64)
    size = np.empty(0, np.uint32)
    last = np.empty(0)
    blk = np.empty(0, np.uint32)
    base = crossings = seen = 0
    for rnd in range(40):
        # distinct (id, agent) pairs, by id then agent; agents drawn from few so that some
        # are seen, ids from 0-63 (some unseen) and the cascades
        ids = np.concatenate((rng.integers(0, 64, 60), rng.integers(200, 204, 10)))
        ags = rng.integers(0, 40 if rnd % 3 else 400, len(ids))
        pairs = sorted(set(zip(ids.tolist(), ags.tolist(), strict=True)))
        gu, ku = (np.array(col, np.uint64) for col in zip(*pairs, strict=True))
        agu = ku.astype(np.uint32)
        n = len(gu)
        by_time = rng.permutation(n)
        best = np.argsort(by_time).astype(np.uint32)  # pair i's earliest text: the batch's
        # text i
        times = rng.random(n) * 10 + rnd / 4  # overlapping rounds: some seen pairs are earlier
        text_agent[base:base + n] = ku.astype(np.uint32)
        text_time[base:base + n] = times
        (keys2, size2, last2, blk2, pool.pool, pool.used, cx, cno, ag, adopted,
         crossed, first, had, moved, joining, jx) = kernels.merge_pairs(
            agu, gu, best, by_time, times, base, cids, keys, size, last, blk, pool.pool,
            pool.used, pool.heads, pool.caps, pool.cls_of, text_agent, text_time, m)
        casc = np.flatnonzero(np.isin(gu, cids))
        assert cx.tolist() == (base + casc).tolist()
        assert cno.tolist() == np.searchsorted(cids, gu[casc]).tolist()
        assert ag.tolist() == ku[casc].tolist()
        # the model: seen pairs keep the earlier text, new ones count; crossing n-grams leave
        want_cross, want_first, want_had, want_moved, want_join = [], [], [], [], []
        n_new = 0
        for g in sorted(set(gu.tolist()) - set(cids.tolist())):
            mine = np.flatnonzero(gu == g)
            texts = want.setdefault(g, [])
            fresh = []
            for i in mine.tolist():
                old = [k for k, t in enumerate(texts) if text_agent[t] == ku[i]]
                if old:
                    if times[i] < text_time[texts[old[0]]]:
                        seen += 1
                        texts[old[0]] = base + i
                else:
                    fresh.append(i)
            if not fresh:
                continue
            n_new += len(fresh)
            sizes[g] = sizes.get(g, 0) + len(fresh)
            lasts[g] = max(lasts.get(g, -np.inf), times[fresh].max())
            if sizes[g] >= m:
                want_cross.append(g)
                want_first.append(fresh[0])
                want_had.append(len(texts))
                want_moved.append(sorted(texts))
                want_join += [(base + i, len(want_cross) - 1) for i in fresh]
                del want[g], sizes[g], lasts[g]  # out of the table
            else:
                texts += [base + i for i in fresh]
        for g in [g for g, t in want.items() if not t]:
            del want[g]
        assert adopted == n_new
        crossings += len(want_cross)
        assert crossed.tolist() == want_cross and first.tolist() == want_first
        assert had.tolist() == want_had
        ends = np.cumsum(had)
        assert [sorted(moved[e - h:e].tolist()) for e, h in zip(ends, had, strict=True)
                ] == want_moved
        assert list(zip(joining.tolist(), jx.tolist(), strict=True)) == want_join
        keys, size, last, blk = keys2, size2, last2, blk2
        assert keys.tolist() == sorted(sizes)
        assert size.tolist() == [sizes[g] for g in keys.tolist()]
        assert last.tolist() == [lasts[g] for g in keys.tolist()]
        cids = np.array(sorted(set(cids.tolist()) | set(want_cross)), np.uint64)
        for e, g in enumerate(keys.tolist()):
            if g in want:
                assert sorted(pool.of(int(blk[e]), int(size[e])).tolist()) == sorted(want[g])
        assert (size < m).all()
        free = pool.heads[-1]
        assert free == pool.used - int(pool.caps[pool.cls_of[size]].sum())
        base += n
        # takes: some n-grams leave with their adoptions (block order)
        gone = rng.random(len(keys)) < 0.1
        held = [t for g in keys[gone].tolist()
                for t in pool_order(want, g, pool, keys, blk, size)]
        assert pool.take(blk[gone], size[gone].astype(np.int64)).tolist() == held
        for g in keys[gone].tolist():
            del want[g], sizes[g], lasts[g]
        keys, blk, size, last = keys[~gone], blk[~gone], size[~gone], last[~gone]
        if rnd % 10 == 9:
            pool.heads[-1] = pool.used  # force a compaction
            pool.compact(blk, size)
            assert pool.used == len(pool.pool) == int(pool.caps[pool.cls_of[size]].sum())
            for e, g in enumerate(keys.tolist()):
                if g in want:
                    assert sorted(pool.of(int(blk[e]), int(size[e])).tolist()) == sorted(want[g])
    assert crossings > 10 and seen > 10


def pool_order(want: dict[int, list[int]], g: int, pool: cascades._Pool, keys: np.ndarray,
               blk: np.ndarray, size: np.ndarray) -> list[int]:
    """An n-gram's texts as its block holds them (checked equal to the dict's as a set)."""
    e = int(np.searchsorted(keys, np.uint64(g)))
    held = pool.of(int(blk[e]), int(size[e])).tolist()
    assert sorted(held) == sorted(want[g])
    return held


def test_batch_ngrams_are_each_texts_kept_ngrams() -> None:
    texts = [Text.of(e.text) for e in thread_events()[:300] if e.text]
    texts = [x for x in texts if len(x.words) >= 3]
    lens = np.array([len(x.word_ids) for x in texts])
    g, where, text_of, part_ends = kernels.batch_ngrams(
        np.concatenate([x.word_ids for x in texts]), lens, cascades.STOP_IDS, 3, 5, 0.5,
        cascades.K)
    starts = where - np.r_[0, np.cumsum(lens)][text_of]
    ns = 3 + np.searchsorted(part_ends, np.arange(len(g)), side="right")
    for i, x in enumerate(texts):
        mine = text_of == i
        ids, n, s = kept_ngrams(x)
        got = sorted(zip(ns[mine].tolist(), starts[mine].tolist(), g[mine].tolist(),
                         strict=True))
        assert got == sorted(zip(n.tolist(), s.tolist(), ids.tolist(), strict=True))


def test_sorted_pairs_is_the_sort_then_the_distinct_pairs() -> None:
    """The bucketed sort and distinct pass against the stable sort by :func:`pair_keys` and a
    plain grouping: keys with repeats (the earliest rank kept, the first use's index), few
    and many id prefixes (one bucket, or a radix pass skipped), narrow and full-width agents
    (more top bits split on), and two ids under one key (refused); :func:`distinct_pairs`
    (the fallback) gives the same."""
    rng = np.random.default_rng(13)
    prefix = np.uint64(cascades.PREFIX_MASK)
    for n, prefixes, ab in ((0, 10, 3), (1, 10, 3), (60, 2**6, 2), (5_000, 2**30, 13),
                            (20_000, 2**38, 13), (20_000, 2**4, 4), (70_000, 2**38, 26),
                            (70_000, 2**6, 26)):
        p = rng.integers(0, prefixes, n, dtype=np.uint64)
        g = (p << np.uint64(kernels.AGENT_BITS)) | (p * np.uint64(7) & np.uint64(0xFFFF))  # an
        # id a prefix
        g[: n // 3] = g[n // 3: 2 * (n // 3)]
        text_of = rng.integers(0, 500, n).astype(np.int32)
        agents = rng.integers(0, 1 << ab, 500, dtype=np.uint64)
        agents[0] = (1 << ab) - 1
        rank = rng.permutation(500)
        key = kernels.pair_keys(g, text_of, agents, prefix, ab)
        ag, gu, src, best, ok = kernels.sorted_pairs(g, text_of, agents, rank, ab)
        order = np.argsort(key, kind="stable")
        distinct, first = np.unique(key[order], return_index=True)
        want = (distinct & np.uint64((1 << ab) - 1), g[order[first]], order[first],
                np.minimum.reduceat(rank[text_of[order]], first) if n else first)
        fallback = kernels.distinct_pairs(order, key[order], g, text_of, rank, ab)
        assert all(a.tolist() == b.tolist() for a, b in zip(fallback, want, strict=True))
        if prefixes < 2**16 and ab == 26:  # 70k uses under one key's top 16 bits: refused
            assert not ok and not len(gu)
            continue
        assert ok and all(a.tolist() == b.tolist()
                          for a, b in zip((ag, gu, src, best), want, strict=True))
        if n > 10:
            text_of[1], g[1] = text_of[0], g[0] ^ np.uint64(1)  # the same prefix and agent
            assert not kernels.sorted_pairs(g, text_of, agents, rank, ab)[4]


def test_earliest_k_is_the_lexsorts_head() -> None:
    """The analysis' first adopters: the k earliest by time, ties by agent (agents distinct,
    as in a cascade), with many ties, k under, at and over the adoptions."""
    rng = np.random.default_rng(5)
    for _ in range(500):
        n, k = int(rng.integers(0, 80)), int(rng.integers(0, 90))
        times = rng.integers(0, 6, n).astype(np.float64)
        agents = rng.permutation(1_000)[:n].astype(np.int64)
        assert (kernels.earliest_k(agents, times, k).tolist()
                == np.lexsort((agents, times))[:k].tolist())


def test_merge3_in_place_is_two_merges_in_turn() -> None:
    """Two levels merged at once into a third level's buffer: the level that merging the
    first into the second, then the result into the third, gives (segments left empty in any
    of them, the first ones of both merged levels included)."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        nseg, nt = int(rng.integers(1, 12)), 300
        text_agent = rng.permutation(2 * nt)[:nt].astype(np.uint32)
        levels = []
        for part in np.array_split(rng.permutation(nt), 3):
            keep = part[rng.random(len(part)) < rng.random()]
            at = np.sort(rng.integers(0, nseg, len(keep)))
            segs = [keep[at == c] for c in range(nseg)]
            segs = [s[np.argsort(text_agent[s])] for s in segs]
            levels.append((np.concatenate(segs).astype(np.uint32),
                           np.r_[0, np.cumsum([len(s) for s in segs])].astype(np.uint32)))
        (a, pa), (b, pb), (c, pc) = levels
        ab = _merged(a, pa, b, pb, text_agent)
        want = _merged(ab, pa + pb, c, pc, text_agent)
        buf = np.full(len(want) + 3, 7, np.uint32)
        buf[:len(c)] = c
        kernels.merge3_in_place(buf, len(c), a, pa, b, pb, pc, text_agent)
        assert np.array_equal(buf[:len(want)], want) and (buf[len(want):] == 7).all()


def test_edges_by_source_are_a_stable_sort_by_source() -> None:
    rng = np.random.default_rng(11)
    for nodes, m in ((1, 0), (5, 40), (300, 5_000)):
        src = rng.integers(0, nodes, m).astype(np.int32)
        dst = rng.integers(0, nodes, m).astype(np.int32)
        indptr, out = kernels.by_source(src, dst, nodes)
        assert np.array_equal(out, dst[np.argsort(src, kind="stable")])
        assert np.array_equal(indptr, np.concatenate(([0], np.cumsum(np.bincount(
            src, minlength=nodes)))))
