"""Adoption cascades of word n-grams (Molt Dynamics), their size distribution and power law,
and exposure to adopting neighbours.

Definitions (Molt Dynamics, arXiv 2603.03555, and its code): the word tokens of posts and
comments (:attr:`streams.text.Text.words`: lower case, URLs removed, runs of word characters,
i.e. the paper's ``\\b\\w+\\b``); every 3- to 5-gram whose words are *more than half* stop words
is dropped (stop list: scikit-learn's English list; the paper does not name one). An agent
*adopts* an n-gram the first time it uses it; a *cascade* is an n-gram adopted by at least
``min_adopters`` (10) distinct agents; its size is the number of distinct adopters. Sizes are
fitted by a discrete power law (Clauset-Shalizi-Newman: exact discrete MLE with the Hurwitz
zeta for each candidate xmin, xmin minimising the KS distance; standard error
(alpha - 1)/sqrt(n_tail), as ``powerlaw`` reports it). Exposure of an agent to a cascade = its
in-neighbours in the cumulative interaction graph (agents who commented on it) that adopted
before it; every agent of the graph counts, as in the paper's code, and the adoption rate by
exposure k = adopters with exposure k / agents with exposure k. Texts whose author is unknown
(``item.author`` None) adopt nothing: they are counted in ``cascade_anonymous_texts_total``.

How (per text amortised O(words), no Python loop over words or history). Each text appends its
word ids (:attr:`streams.text.Text.word_ids`), agent and time to a buffer; every ``flush_every``
(n-gram, agent) pairs the whole buffer is merged at once by the compiled kernels of
:mod:`streams.state.cascade_kernels` (one scalar loop each, no NumPy temporaries): the n-gram
ids by the rolling hash over the concatenated words (the values of
:meth:`streams.text.Text.word_ngram_ids`; windows across two texts left out), the stop-word rule
by cumulative sums of a stop mask; one stable sort of the pairs by a 64-bit key (the n-gram id's
top 38 bits, the agent's 26-bit index: grouped by n-gram, then agent; two n-grams sharing 38
bits are told apart by their full id, exactly: :func:`sorted_pairs`, the keys made as they
are read, one pass into 256 buckets by the key's top bits, the rest of each key packed with its
place in the bucket, its id's low bits and text carrying along, then each bucket radix-sorted in
cache), first use = the earliest text of each pair (an adoption stores its text's index, 4
bytes; the texts' times and agents are one table), then the pairs in id order
(:func:`merge_pairs`: the n-grams' places in the table and among the cascades found first, by
galloping searches from the previous n-gram's): a cascade's pairs go out to be searched in the
cascades' store, which holds one segment per cascade (numbered by id rank, a new cascade's
segment inserted in place, so the pairs in id order are in segment order without a sort; never
evicted), each adoption only its text (the agent is the text's), sorted by agent, searched
within the segments (a binary search, galloping from the previous pair of the same cascade; a
pair found in one level is not searched in the next); those not found are counted by the
cascade's adopter filter (below) and inserted (:func:`new_adoptions`; the n-gram table holds
no cascade: an n-gram leaves it as it crosses, and a cascade is counted by its filter).
Most pairs are new adoptions, which every level was searched only to prove absent: each
cascade has an adopter filter (a blocked Bloom filter: a power of two of
64-bit words, three bits set in one word by a hash of the agent, 3 to 12 adopters a word:
~0.2-8 % false positives; no false negative), so only the first level, which gives the
insertion points, is searched for every pair, the others only for the pairs a filter may hold
(the filters read forward, in cascade order like the pairs); a new adoption sets its bits as
it is found new, and a cascade over 12 adopters a word has its run made anew, for its adopters
(from the store: four times the adoptions of the last time or more, O(1) an adoption
amortised). The other n-grams' adoptions are a pool of blocks, one an n-gram (its
texts, at most ``min_adopters`` - 1: the n-gram's entry in the table says where, and its adopter
count is the block's fill): n-gram by n-gram, each pair's agent is looked for in its n-gram's
block (found: the earlier first use kept; the blocks' first agents read a few n-grams ahead,
their memory reads overlapping), the new adoptions counted in the table (adopters, last
adoption) and put into the block, or, when they bring the n-gram to ``min_adopters``, taken out
with the block's (freed) and its row; the unseen n-grams are inserted into the table (sorted
by id) after the pass, the table not rewritten when no n-gram enters or leaves it (its
rows are the n-grams that are not cascades: where nearly every n-gram becomes one, a flush
rewrites few rows, not one a cascade). Putting is O(new) (no pass over the
store: a block that fills up moves to one of the next capacity, 1, 2, 4, ... ``min_adopters`` -
1, the old one freed; free blocks are kept on a free list a capacity and taken first; when they
are over a quarter of the pool it is compacted, O(pool), so a free entry costs O(1) amortised).
A cascade's readable words are taken, when it crosses ``min_adopters``, from a buffered text
that adopted it (the words of the texts naming new cascades joined once, each cascade's bytes
gathered from them, as :func:`streams.text.ngram_text` joins them), and its adoptions join the
cascades' store. The cascades' store has levels whose bounds grow geometrically (x ``GROWTH``):
a merge inserts into the smallest (two runs sorted by cascade and agent, the known cascades' new
adoptions and the new cascades', merged as they are inserted: :func:`insert_runs`), and a level
over its bound goes into the next one in one pass (each adoption rewritten O(``GROWTH``) times a
level, O(log adoptions) levels, each searched; the merge goes in place, from the back, into
the next level's buffer when it has room, :func:`merge_in_place`, else into a new buffer with
room for twice the merged level when that has ``ROOM_MIN`` adoptions or more: a big growing level
is rewritten in the pages it already has, not in fresh ones faulted in at every merge), so a
flush does not rewrite every adoption ever
taken (the periodic analysis flushes every ~10k texts: with one level, or two, that rewrite grew
with the history). The buffer grows to a quarter of the cascades' store (at most 16 x
``flush_every`` pairs) before a merge.

Periodic analysis (``expire``: every ``analysis_every`` seconds of event time, once the texts
since the last analysis reach ``analysis_min_texts`` or the number the last one covered,
whichever is fewer: a short stream is analysed at 1, 2, 4, ... texts, so its latest analysis
covers at least half of them, at a total cost bounded by twice the last one's), bounded per
run: the power-law fit only when the sizes
changed, over at most ``max_xmin_candidates`` xmin values (all of them up to that many
distinct sizes, the exact CSN search; else evenly spaced among the distinct sizes); exposures
recomputed only for cascades that gained adopters since their last computation, largest first,
until ``exposure_budget`` adopters were visited; the rest keep their last figures
(``exposure_stale_cascades`` says how many). Exposures are vectorised over the graph's
cumulative edge arrays (:meth:`InteractionGraph.arrays`, indexed by source once per analysis).
``analyse(full=True)`` recomputes every exposure against the graph as it stands: the paper's
static-graph computation (replay's last report, :meth:`streams.pipeline.Pipeline.close`).
Each cascade's exposures cost O(its adopters' out-edges), not O(graph): times and hit counts
are looked up in graph-sized work arrays made once per analysis (not kept, not pickled) and
restored after each cascade; the cascades an analysis recomputes go through one compiled pass
(:func:`exposure_batch`: their adoptions gathered level by level, their figures and first
adopters out), not a Python round a cascade. ``snapshot`` has no
side effect: what it reports depends on the events and on event time only, so the live
reducer, which snapshots every second, and a replay agree.

Bounded memory: the n-gram table and the cascades hold at most ``max_tracked`` n-grams: the
table's (not cascades) 24 bytes each (id, adopter count, last adoption, block) plus its block in
the pool: 4 bytes an entry, the block under twice its adoptions (the smallest capacity that
holds them), free blocks at
most a quarter of the pool and the pool at most a quarter over its used entries (~7 bytes an
adoption of a non-cascade at 100k real-text events, where a sorted (id, text) store took 12);
4 bytes per cascade adoption (its text; a level's buffer has room for up to twice its
adoptions, address space that no merge has written yet, not memory) plus its filter's (0.7 to
2.7 bytes an adopter, and the runs it left behind, under a third of that: ~1.4 an adoption
at 1M real-text events) and 32 per cascade plus 4 a
non-empty level of its store plus its words; 12
bytes per text (time and agent); the buffer (~10 bytes a buffered pair: word ids and the
texts' word lists). When full, the n-grams that are not cascades with the fewest adopters
(oldest first) are evicted down to ``evict_to`` x ``max_tracked``, with their adoptions (their
blocks freed);
``cascade_ngrams_evicted_total`` and ``cascade_evicted_adopters_max`` say what was lost: sizes
are exact for every n-gram never evicted, and an evicted n-gram that comes back restarts with
at most that many adopters missing. Cascades themselves are never evicted (their adoptions are
the cascade): memory = table + ~6.5 bytes x total cascade size + 32 bytes, 4 a level and the
words a cascade + 12 bytes a text. Agents are indexed once (~100 bytes each, the society's size).

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> t0 = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> eng = CascadeEngine(CascadeConfig(min_adopters=2))
>>> for i, who in enumerate(["a", "b", "a", None]):
...     eng.update(Item.of(PostEvent(id=f"post:{i}", event_time=t0, observed_at=t0,
...                                  post_id=str(i), author=who, title="Molt swarm rising!")))
>>> eng.sizes(), eng.anonymous_total
({'molt swarm rising': 2}, 1)
"""

from __future__ import annotations

import math
import mmap
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
from scipy import special
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from streams.events import CommentEvent, PostEvent
from streams.state.base import Item, Sample, Snapshot
from streams.state.cascade_kernels import (
    AGENT_BITS,
    NO_BLOCK,
    batch_ngrams,
    by_source,
    distinct_pairs,
    exposure_batch,
    exposures,
    filter_adopt,
    filter_fill,
    filter_grow,
    filter_layout,
    filter_pending,
    filter_set,
    gather_segments,
    ids_in_order,
    insert_runs,
    joined_run,
    level_buffer,
    merge3_in_place,
    merge_in_place,
    merge_pairs,
    merge_segments,
    new_adoptions,
    pair_keys,
    pool_compact,
    pool_take,
    segment_find,
    segment_find_some,
    segments_grow,
    sorted_pairs,
    word_bytes,
)
from streams.state.graph import InteractionGraph
from streams.text import K, Text, token_ids

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS)
STOP_IDS = np.unique(token_ids(sorted(STOP_WORDS)))
AGENT_MASK = np.uint64((1 << AGENT_BITS) - 1)
PREFIX_MASK = ~AGENT_MASK
BYTES_PER_NGRAM = 8 + 4 + 8 + 4  # id, adopters, last adoption, block in the pool
BYTES_PER_POOLED = 4  # an entry of the pool of blocks: a non-cascade's adoption (its text)
BYTES_PER_CASCADE_ADOPTION = 4  # a cascade's: its text of first use (the agent is the text's)
BYTES_PER_TEXT = 8 + 4  # each text's time and agent (first uses refer to their text)
BYTES_PER_CASCADE = 8 + 4 + 4 + 8 + 4 + 4  # id, words number and end; filter start, size,
# adopters
BYTES_PER_FILTER_WORD = 8  # a word of a cascade's adopter filter (1-2 bytes an adopter)
BYTES_PER_LEVEL_CASCADE = 4  # a cascade's segment start in one level of its store
MERGE_MIN = 1024  # cascade adoptions held in level 0 before a first merge
GROWTH = 4  # a level's bound / the previous one's
ROOM_MIN = 1 << 22  # adoptions from which a merged level gets room for as many again
SPARE_MAX = 2 * ROOM_MIN  # a level's buffer up to this many adoptions is kept when dropped
SPARES = 3  # and at most this many of them (~100 MB): the next merges write into them
FILTER_FILL = 3  # a cascade's filter is made for FILTER_FILL to 2 x FILTER_FILL adopters a word
FILTER_MAX = 12  # and made anew (four times the words or more) when they are over this many


def kept_ngrams(text: Text, n_range: tuple[int, int] = (3, 5), max_stop_share: float = 0.5,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ids, lengths and start word of the word n-grams of ``text`` (n in n_range, in order of
    n then position) whose stop words are at most ``max_stop_share`` of their words.

    >>> from streams.text import ngram_text
    >>> ids, ns, starts = kept_ngrams(Text.of("The swarm is the answer; the swarm decides."),
    ...                               (3, 3))
    >>> [ngram_text(Text.of("The swarm is the answer; the swarm decides.").words, 3, int(i))
    ...  for i in starts]
    ['answer the swarm', 'the swarm decides']
    """
    ids, ns, starts = [], [], []
    for n, keep in _kept(text, n_range, max_stop_share):
        where = np.flatnonzero(keep)
        ids.append(text.word_ngram_ids(n)[where])
        ns.append(np.full(len(where), n))
        starts.append(where)
    if not ids:
        empty = np.empty(0, np.int64)
        return np.empty(0, np.uint64), empty, empty
    return np.concatenate(ids), np.concatenate(ns), np.concatenate(starts)


def _kept(text: Text, n_range: tuple[int, int], max_stop_share: float,
          ) -> list[tuple[int, np.ndarray]]:
    """(n, mask over the n-grams of the text: kept by the stop-word rule), n in n_range."""
    w = text.word_ids
    lo, hi = n_range
    if len(w) < lo:
        return []
    pos = STOP_IDS.searchsorted(w)
    np.minimum(pos, len(STOP_IDS) - 1, out=pos)
    stops = np.zeros(len(w) + 1, np.int64)
    np.cumsum(STOP_IDS[pos] == w, out=stops[1:])
    return [(n, (stops[n:] - stops[:-n]) <= max_stop_share * n)
            for n in range(lo, min(hi, len(w)) + 1)]


# ----------------------------------------------------------------------------------------------
# discrete power law (Clauset, Shalizi & Newman 2009)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PowerLawFit:
    alpha: float
    stderr: float
    xmin: int
    n_tail: int
    ks: float

    def as_dict(self) -> dict[str, float]:
        return {"alpha": self.alpha, "stderr": self.stderr, "xmin": self.xmin,
                "n_tail": self.n_tail, "ks": self.ks}


GOLDEN_MEAN = 0.5 * (3.0 - math.sqrt(5.0))
SQRT_EPS = math.sqrt(2.2e-16)
KS_PREFIX, KS_SAMPLE = 16, 48  # a tail's first values and spread values whose gaps
# bound its KS distance from below


def _alpha_mles(n: np.ndarray, log_sum: np.ndarray, xmin: np.ndarray,
                bounds: tuple[float, float] = (1.0001, 10.0), xatol: float = 1e-7,
                maxfun: int = 500) -> np.ndarray:
    """Discrete power-law MLE of alpha for tails of ``n`` values >= ``xmin`` whose logs sum to
    ``log_sum``, one a lane: the bounded Brent search of ``scipy.optimize.minimize_scalar``
    (``method="bounded"``) run in every lane at once, step for step, so each lane's alpha is
    the very float scipy finds for it alone (a fit tries up to ``max_candidates`` xmin values:
    ~14 evaluations each, where scipy's per-call overhead, not zeta, took the time)."""
    xf = np.full(len(n), bounds[0] + GOLDEN_MEAN * (bounds[1] - bounds[0]))
    a, b = np.full_like(xf, bounds[0]), np.full_like(xf, bounds[1])
    q_n, q_min = n.astype(np.float64), xmin.astype(np.float64)

    def nll(x: np.ndarray, on: np.ndarray) -> np.ndarray:
        # math.log, as scipy's scalar objective: NumPy's log may differ in the last bit
        logs = np.array([math.log(z) for z in special.zeta(x, q_min[on]).tolist()])
        return q_n[on] * logs + x * log_sum[on]

    fx = nll(xf, np.ones(len(n), bool))
    nfc, fnfc, fulc, ffulc = xf.copy(), fx.copy(), xf.copy(), fx.copy()
    rat, e = np.zeros_like(xf), np.zeros_like(xf)
    xm = 0.5 * (a + b)
    tol1 = SQRT_EPS * np.abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    on = np.abs(xf - xm) > tol2 - 0.5 * (b - a)
    num = 1
    with np.errstate(divide="ignore", invalid="ignore"):
        while on.any() and num < maxfun:
            # parabolic step where acceptable, else golden section (scipy's branches, masked)
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            p = np.where(q > 0.0, -p, p)
            q = np.abs(q)
            para = ((np.abs(e) > tol1) & (np.abs(p) < np.abs(0.5 * q * e))
                    & (p > q * (a - xf)) & (p < q * (b - xf)))
            rat_p = (p + 0.0) / q
            x = xf + rat_p
            near = ((x - a) < tol2) | ((b - x) < tol2)
            rat_p = np.where(near, tol1 * (np.sign(xm - xf) + ((xm - xf) == 0)), rat_p)
            e_g = np.where(xf >= xm, a - xf, b - xf)
            e_next = np.where(para, rat, e_g)
            rat_next = np.where(para, rat_p, GOLDEN_MEAN * e_g)
            x = xf + (np.sign(rat_next) + (rat_next == 0)) * np.maximum(np.abs(rat_next), tol1)
            fu = np.full_like(xf, np.inf)
            fu[on] = nll(x[on], on)
            num += 1
            # the bracket and the three best points, updated in the lanes still searching
            down = fu <= fx
            right = x >= xf
            a_next = np.where(down, np.where(right, xf, a), np.where(right, a, x))
            b_next = np.where(down, np.where(right, b, xf), np.where(right, x, b))
            second = ~down & ((fu <= fnfc) | (nfc == xf))
            third = ~down & ~second & ((fu <= ffulc) | (fulc == xf) | (fulc == nfc))
            fulc_next = np.where(down | second, nfc, np.where(third, x, fulc))
            ffulc_next = np.where(down | second, fnfc, np.where(third, fu, ffulc))
            nfc_next = np.where(down, xf, np.where(second, x, nfc))
            fnfc_next = np.where(down, fx, np.where(second, fu, fnfc))
            for old, new in ((a, a_next), (b, b_next), (fulc, fulc_next), (ffulc, ffulc_next),
                             (nfc, nfc_next), (fnfc, fnfc_next), (e, e_next), (rat, rat_next),
                             (xf, np.where(down, x, xf)), (fx, np.where(down, fu, fx))):
                np.copyto(old, new, where=on)
            xm = 0.5 * (a + b)
            tol1 = SQRT_EPS * np.abs(xf) + xatol / 3.0
            tol2 = 2.0 * tol1
            on &= np.abs(xf - xm) > tol2 - 0.5 * (b - a)
    return xf


def fit_discrete_power_law(sizes: Sequence[int] | np.ndarray, xmin: int | None = None,
                           alpha_range: tuple[float, float] | None = (0.0, 3.0),
                           max_candidates: int | None = None,
                           histogram: np.ndarray | None = None) -> PowerLawFit | None:
    """CSN fit of integer data: for each candidate xmin (distinct values but the largest), the
    exact discrete MLE of alpha; keep the xmin whose fit has the smallest KS distance between
    the empirical and the fitted CDF of the tail. Like ``powerlaw.Fit`` (whose default
    ``alpha`` range is (0, 3)), fits outside ``alpha_range`` are passed over unless no xmin
    gives one inside. ``max_candidates``: above that many distinct values, that many evenly
    spaced among them (the smallest and the largest included). None below two distinct
    values. Works on the histogram of the data (distinct values and their counts, one pass):
    a candidate costs O(distinct values), not O(values), so a fit over a million cascades
    of a few thousand distinct sizes stays in milliseconds. ``histogram``: the data's
    ``np.bincount``, when the caller has it (then no sort of the data)."""
    if histogram is None:
        x = np.asarray(sizes, dtype=np.int64)
        values, counts = np.unique(x[x >= 1], return_counts=True)
    else:
        values = np.flatnonzero(histogram[1:]) + 1
        counts = histogram[values]
    if xmin is not None:
        candidates = [xmin]
    else:
        distinct = values[:-1]
        if max_candidates is not None and len(distinct) > max_candidates:
            distinct = distinct[np.unique(np.linspace(0, len(distinct) - 1, max_candidates)
                                          .round().astype(np.int64))]
        candidates = distinct.tolist()
    # suffix sums: the tail from position i has n_from[i] values whose logs sum to logs_from[i]
    n_from = np.cumsum(counts[::-1])[::-1]
    logs_from = np.cumsum((counts * np.log(values))[::-1])[::-1] if len(values) else values
    # the candidates whose tail has two values or more, all their alphas at once
    xms = np.asarray(candidates, np.int64)
    at = np.searchsorted(values, xms)
    keep = at < len(values) - 1
    keep[keep] = n_from[at[keep]] >= 2
    at, xms = at[keep], xms[keep]
    alphas = _alpha_mles(n_from[at], logs_from[at], xms)
    # the fit kept: least KS distance among those in alpha_range (among all if none is), the
    # first in candidate order on a tie
    pool = np.arange(len(at))
    if alpha_range is not None:
        inside = (alpha_range[0] < alphas) & (alphas < alpha_range[1])
        if inside.any():
            pool = pool[inside]
    if not len(pool):
        return None

    # |empirical - fitted CDF| at tail positions ``pos`` of candidates ``j`` (2-d: a row each)
    ends = np.concatenate(([0], np.cumsum(counts)))  # exact integers: the same CDF as a cumsum

    def gaps(j: np.ndarray, pos: np.ndarray) -> np.ndarray:
        i, alpha = at[j][:, None], alphas[j][:, None]
        emp = (ends[pos + 1] - ends[i]) / n_from[i]
        return np.abs(emp - (1.0 - special.zeta(alpha, values[pos] + 1)
                             / special.zeta(alpha, xms[j][:, None])))

    # a KS distance is a maximum over the tail, so the gaps at some of its values (its first
    # ones, where a poor xmin shows, and a spread) bound it from below: a candidate whose
    # bound exceeds the best distance found cannot be kept and is not evaluated over its tail
    # (the same fit, a fraction of the zeta evaluations)
    first = at[pool][:, None]
    spread = (len(values) - first) * np.linspace(0.0, 1.0, KS_SAMPLE)[None, :]
    pos = np.minimum(first + np.concatenate((np.broadcast_to(np.arange(KS_PREFIX), (
        len(pool), KS_PREFIX)), spread.astype(np.int64)), axis=1), len(values) - 1)
    floor = gaps(pool, pos).max(axis=1)
    best, best_ks = -1, math.inf
    for k in np.argsort(floor, kind="stable").tolist():
        if floor[k] > best_ks:
            break
        j = int(pool[k])
        ks = float(gaps(np.array([j]), np.arange(at[j], len(values))[None, :]).max())
        if ks < best_ks or (ks == best_ks and j < best):
            best, best_ks = j, ks
    n, alpha = int(n_from[at[best]]), float(alphas[best])
    return PowerLawFit(alpha, (alpha - 1) / math.sqrt(n), int(xms[best]), n, best_ks)


# ----------------------------------------------------------------------------------------------
# the engine
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CascadeConfig:
    """n_range [(3, 5)], min_adopters [10], max_stop_share [0.5]: the paper's definitions;
    max_tracked [1_000_000]: n-grams held, evicted down to evict_to [0.5] of it when full;
    flush_every [200_000]: buffered (n-gram, agent) pairs merged at once; analysis_every
    [600 s] and analysis_min_texts [10_000]: power-law fit and exposure analysis period (event
    time, and texts between two); max_xmin_candidates [100]: xmin values the fit tries;
    exposure_budget [200_000]: adopters whose exposure one analysis recomputes at most;
    shown [50]: cascades listed in details, with at most adopters_shown [50] adopters each;
    max_exposure [10]: exposures above are pooled; exposure_cascades [1000]: the exposure
    analysis covers the largest this many cascades."""

    n_range: tuple[int, int] = (3, 5)
    min_adopters: int = 10
    max_stop_share: float = 0.5
    max_tracked: int = 1_000_000
    evict_to: float = 0.5
    flush_every: int = 200_000
    analysis_every: float | timedelta = 600.0
    analysis_min_texts: int = 10_000
    max_xmin_candidates: int = 100
    exposure_budget: int = 200_000
    shown: int = 50
    adopters_shown: int = 50
    max_exposure: int = 10
    exposure_cascades: int = 1000


def _places(pos: np.ndarray, n_old: int) -> tuple[np.ndarray, np.ndarray]:
    """Values inserted before the sorted positions ``pos`` of an array of ``n_old``: their
    final places and the mask of the old entries in the result (shared by every column;
    cheaper than ``np.insert`` column by column)."""
    at = pos + np.arange(len(pos))
    old = np.ones(n_old + len(pos), bool)
    old[at] = False
    return at, old


def _placed(column: np.ndarray, values: np.ndarray, at: np.ndarray, old: np.ndarray,
            ) -> np.ndarray:
    out = np.empty(len(old), column.dtype)
    out[old] = column
    out[at] = values
    return out


class _Pool:
    """Adoptions of the n-grams that are not cascades: each n-gram's first-use texts (4
    bytes each: the agent is the text's) in a block of the pool, at the table's ``blk`` of the
    n-gram, its first ``size`` entries (an n-gram that is not a cascade holds one adoption an
    adopter). Blocks come in classes of capacities 1, 2, 4, ... up to ``min_adopters - 1`` (a
    fuller n-gram is a cascade and leaves the pool): a fill of s takes the smallest class that
    holds it (``cls_of[s]``), so a block is over half full but for the last class. An n-gram
    that outgrows its block moves to the next class's; freed blocks are kept on a free list a
    class (threaded through their first entry) and taken again before the pool grows. Nothing
    is ever rewritten but the moved blocks: an insertion costs O(its n-gram's fill)."""

    __slots__ = ("caps", "cls_of", "heads", "pool", "used")

    def __init__(self, min_adopters: int) -> None:
        top = max(min_adopters - 1, 1)
        caps = [1 << i for i in range(top.bit_length()) if 2 << i < top] + [top]
        self.caps = np.array(caps, np.int64)
        self.cls_of = np.searchsorted(self.caps, np.arange(top + 1)).astype(np.int64)
        self.heads = np.full(len(caps) + 1, -1, np.int64)  # and the free entries
        self.heads[-1] = 0
        self.pool = np.empty(0, np.uint32)
        self.used = 0

    def nbytes(self) -> int:
        return self.pool.nbytes

    def compact(self, blk: np.ndarray, size: np.ndarray) -> None:
        """The free blocks dropped when they are over a quarter of the pool: O(pool + table),
        once the frees since the last one reach that much."""
        if self.heads[-1] > self.used // 4:
            self.pool = pool_compact(self.pool, self.caps, self.cls_of, blk, size)
            self.used = len(self.pool)
            self.heads[:] = -1
            self.heads[-1] = 0

    def take(self, blocks: np.ndarray, fills: np.ndarray) -> np.ndarray:
        """The texts of the blocks ``blocks`` (``fills`` each, 0: no block), one block after
        another; the blocks freed."""
        return pool_take(self.pool, self.heads, self.caps, self.cls_of, blocks,
                         fills.astype(np.int64))

    def of(self, block: int, fill: int) -> np.ndarray:
        """First-use texts of one n-gram's adoptions (block order)."""
        return self.pool[block:block + fill]


def _words(n: int) -> np.ndarray:
    """``n`` zero uint64 words (one at least) over a private anonymous map, resident only as
    they are written: the filters' buffer grows by remapping it (mremap), where a new array
    and a copy of the old words rewrote (and faulted in) ~100 MB a growth at 1M events."""
    return np.frombuffer(mmap.mmap(-1, 8 * max(n, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS),
                         np.uint64)


class _Cascades:
    """Adoptions of the cascades: the index of each adoption's text of first use (4 bytes: the
    agent is the text's), one segment per cascade (cascades are numbered in order of crossing
    and never evicted), sorted by agent within it.

    Levelled, so that a flush does not rewrite every adoption ever taken: level i (texts
    ``evs[i]``, segment starts ``ptrs[i]``, same layout, no adoption in two levels) holds at
    most ``MERGE_MIN`` x ``GROWTH`` ^ (i + 1) adoptions but the last. A flush inserts into
    level 0; a level over its bound is merged into the next one (one pass over both), so an
    adoption is rewritten O(GROWTH) times a level, O(log adoptions) levels: a flush costs
    O(its adoptions x log adoptions) amortised, whatever the store's size. Searched level by
    level; 4 bytes a cascade a level (uint32: under 2^32 adoptions) besides the 4 an adoption
    (an empty level but the first has no segment starts: ``ptrs[i]`` empty).

    A level's texts are the first entries of its buffer (``bufs[i]``; ``evs[i]`` is that
    prefix): a merge into a level with room for both goes in place (:func:`merge_in_place`),
    else into a new buffer (:func:`merge_segments`) with room for twice the merged adoptions
    from ``ROOM_MIN`` of them (smaller levels are made afresh, as before: room for them too
    measured slower in the pipeline at 300k events), so a big level growing by merges is
    rewritten in the pages it already has, not in fresh ones faulted in at every merge. The
    room is address space, not memory, until a merge writes it: a level only grows until it
    is emptied (its buffer dropped), so the pages touched are its adoptions'.

    Each cascade's adopter filter is a run of ``fsize[c]`` words (a power of two) from
    ``fbuf[fstart[c]]``, the runs in order of making (a flush's in cascade order), and its
    adopter count (``fcount``), renumbered with the segments: a pair it fails is certainly
    not adopted, and no level after the first is searched for it. A pickle holds the
    adoptions, the runs' places and sizes and the counts: the filters' words (~1.4 bytes an
    adoption) are made again by the first search after a restore, one pass over the store
    (~1 s for 100 M adoptions), the same words in the same places as before."""

    __slots__ = ("bufs", "evs", "fbuf", "fcount", "fsize", "fstart", "fused", "ptrs", "spare")

    def __init__(self) -> None:
        self.evs = [np.empty(0, np.uint32)]
        self.bufs = list(self.evs)
        self.spare: list[np.ndarray] = []  # buffers of merged-away levels (not pickled)
        self.ptrs = [np.zeros(1, np.uint32)]
        self.fbuf = _words(0)  # the filters' words (and room after them)
        self.fstart = np.empty(0, np.int64)  # each cascade's run of words in them
        self.fsize = np.empty(0, np.uint32)  # its words
        self.fcount = np.empty(0, np.uint32)  # and its adopters
        self.fused = 0  # words written (a run left behind by a bigger one is not reused)

    def __getstate__(self) -> dict[str, Any]:
        return {"evs": self.evs, "ptrs": self.ptrs, "fstart": self.fstart, "fsize": self.fsize,
                "fcount": self.fcount, "fused": self.fused}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.evs, self.ptrs = state["evs"], state["ptrs"]
        self.bufs = list(self.evs)
        self.spare = []
        self.fstart, self.fsize, self.fcount = state["fstart"], state["fsize"], state["fcount"]
        self.fused = state["fused"]
        self.fbuf = None  # the filters' words made again, as they were, by the next search

    def __len__(self) -> int:
        return sum(len(ev) for ev in self.evs)

    def nbytes(self) -> int:
        return (BYTES_PER_FILTER_WORD * self.fused + self.fstart.nbytes + self.fsize.nbytes
                + self.fcount.nbytes + sum(ev.nbytes + ptr.nbytes
                                           for ev, ptr in zip(self.evs, self.ptrs, strict=True)))

    def grow(self, old: np.ndarray) -> None:
        """New (empty) cascades: segments where ``old`` (over the new numbering) is False
        (and filters of no word, made by :meth:`add`)."""
        self.ptrs = [segments_grow(ptr, old) if len(ptr) else ptr for ptr in self.ptrs]
        self.fstart, self.fsize, self.fcount = filter_grow(self.fstart, self.fsize, self.fcount,
                                                           old)

    def _filters(self, text_agent: np.ndarray) -> None:
        """Every cascade's filter words made again from its adoptions after a restore (a
        checkpoint holds their places and sizes, not their words: the same words as
        before)."""
        self.fbuf = _words(self.fused)
        self._fill(np.arange(len(self.fcount)), text_agent)

    def _fill(self, numbers: np.ndarray, text_agent: np.ndarray) -> None:
        """The adoptions of the cascades ``numbers`` (their runs zeroed) set in their
        filters, a pass a level (no copy of the adoptions)."""
        for ev, ptr in zip(self.evs, self.ptrs, strict=True):
            if len(ev):
                filter_fill(self.fbuf, self.fstart, self.fsize, numbers, ev, ptr, text_agent)

    def _filters_add(self, jc: np.ndarray, jt: np.ndarray, text_agent: np.ndarray) -> None:
        """The filters brought up to the store after :meth:`add` (the known cascades' new
        adoptions are in theirs, since :meth:`find`) and the new cascades' adoptions
        (cascades ``jc``, texts ``jt``) counted: a cascade over ``FILTER_MAX`` adopters a word
        (a new one) gets a new run, for ``FILTER_FILL`` to twice as many a word (four times
        its words or more), after the others (the buffer has room: remapped twice as large when
        it fills up), filled from its adoptions: a new cascade's from ``jc``, another's from
        the store, O(its adoptions), at least four times as many as when its run was last made:
        amortised O(1) an adoption. The run left behind is not used again: as a cascade's runs
        grow four times or more each time, those it left behind are under a third of its run."""
        numbers, sizes = filter_layout(self.fsize, self.fcount, jc, FILTER_FILL, FILTER_MAX)
        if not len(numbers):
            return
        grown = numbers[self.fsize[numbers] > 0]
        at = self.fused
        end = at + int(sizes.sum())
        if len(self.fbuf) < end:  # room for twice as many, the words left where they are: the
            # map remapped once its one view is dropped (the kernels keep none)
            words = self.fbuf.base.obj  # the map (under the view's memoryview)
            self.fbuf = None
            try:
                words.resize(2 * 8 * end)
            finally:  # the words viewed again, remapped or (on an error) as they were
                self.fbuf = np.frombuffer(words, np.uint64)
        self.fsize[numbers] = sizes
        self.fused = end
        self.fbuf[at:end] = 0
        self.fstart[numbers] = at + np.cumsum(sizes) - sizes
        filter_set(self.fbuf, self.fstart, self.fsize, jc, jt, text_agent)
        self._fill(grown, text_agent)

    def find(self, cno: np.ndarray, agent: np.ndarray, text_agent: np.ndarray, cx: np.ndarray,
             text_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found mask, insertion points in level 0) of (cascade, agent) pairs sorted by
        cascade then agent, searched level by level (a pair found is not searched again; the
        levels after the first only for the pairs the cascades' filters may hold); a found
        pair's first use is made the earlier of the stored text and its own (text ``cx``) where
        it is. The pairs not found are the new adoptions :meth:`add`
        inserts next: they are set in the filters and counted here."""
        found = np.zeros(len(cno), bool)
        if len(self.evs[0]):
            where = np.empty(len(cno), np.int64)
            segment_find(self.evs[0], self.ptrs[0], cno, agent, text_agent, found, where, cx,
                         text_time)
        else:  # level 0 is empty after every flush over its bound (most): nothing to search,
            where = np.zeros(len(cno), np.int64)  # every pair goes in at 0
        if self.fbuf is None:
            self._filters(text_agent)
        pending = filter_pending(self.fbuf, self.fstart, self.fsize, self.fcount, cno, agent,
                                 found)
        # a pair is in one level at most, so the order of the search is free: the largest
        # level first (most of the pairs found are there, and not searched again)
        for level in sorted(range(1, len(self.evs)), key=lambda i: -len(self.evs[i])):
            if len(self.evs[level]):
                segment_find_some(self.evs[level], self.ptrs[level], pending, cno, agent,
                                  text_agent, found, cx, text_time)
        filter_adopt(self.fbuf, self.fstart, self.fsize, self.fcount, pending, cno, agent, found)
        return found, where

    def add(self, run: tuple[np.ndarray, np.ndarray, np.ndarray],
            run2: tuple[np.ndarray, np.ndarray, np.ndarray], text_agent: np.ndarray) -> None:
        """Insert two runs of adoptions (cascade numbers, texts, insertion points in level 0
        as :meth:`find` gives them; each sorted by cascade then agent, none present) in their
        merged order; merge each level over its bound into the next one."""
        n = len(run[0]) + len(run2[0])
        if n:
            if len(self) + n >= 2**32:
                raise ValueError("more than 2^32 cascade adoptions")
            size = len(self.evs[0]) + n
            out = self._buffer(size, size + size // 4)
            insert_runs(self.evs[0], self.ptrs[0], *run, *run2, text_agent, out)
            self._drop(self.bufs[0])
            self.bufs[0], self.evs[0] = out, out[:size]
            self._filters_add(run2[0], run2[1], text_agent)
        level, top = 0, len(self.evs)  # a level appended here is not merged on
        while level < top:
            if len(self.evs[level]) <= MERGE_MIN * GROWTH ** (level + 1):
                break
            ev, ptr, buf = self.evs[level], self.ptrs[level], self.bufs[level]
            if self._merge_two(level, text_agent):
                level += 2  # the next two levels are merged into the one after them
                continue
            if level + 1 == len(self.evs):
                self.evs.append(ev)
                self.bufs.append(buf)
                self.ptrs.append(ptr)
            elif not len(self.evs[level + 1]):
                self.evs[level + 1], self.bufs[level + 1], self.ptrs[level + 1] = ev, buf, ptr
            else:
                held, into = len(self.evs[level + 1]), self.bufs[level + 1]
                size = held + len(ev)
                if len(into) >= size:
                    merge_in_place(into, held, ev, ptr, self.ptrs[level + 1], text_agent)
                else:
                    into = self._buffer(size, 2 * size if size >= ROOM_MIN else size + size // 4)
                    merge_segments(ev, ptr, self.evs[level + 1], self.ptrs[level + 1],
                                   text_agent, into)
                    self._drop(self.bufs[level + 1])
                self._drop(buf)
                self.bufs[level + 1], self.evs[level + 1] = into, into[:size]
                self.ptrs[level + 1] = ptr + self.ptrs[level + 1]
            self._empty(level)
            level += 1

    def _buffer(self, size: int, room: int) -> np.ndarray:
        """A buffer for ``size`` adoptions: the smallest spare that holds them (its pages
        are in memory already: no page fault on writing it), else a new one of ``room``."""
        fits = [i for i, b in enumerate(self.spare) if len(b) >= size]
        if fits:
            return self.spare.pop(min(fits, key=lambda i: len(self.spare[i])))
        return level_buffer(room)

    def _drop(self, buf: np.ndarray) -> None:
        """A merged-away level's buffer kept as a spare when it is small (the largest
        ``SPARES``): a flush's merges allocate buffers of about the same sizes each time, and
        fresh ones were faulted in page by page at every merge (~20 % of the merges' time)."""
        if 0 < len(buf) <= SPARE_MAX:
            self.spare.append(buf)
            if len(self.spare) > SPARES:
                self.spare.pop(min(range(len(self.spare)), key=lambda i: len(self.spare[i])))

    def _empty(self, level: int) -> None:
        """Level ``level`` emptied (level 0 keeps its segments' offsets, all zero)."""
        self.evs[level] = self.bufs[level] = np.empty(0, np.uint32)
        self.ptrs[level] = np.zeros(len(self.ptrs[0]) if level == 0 else 0, np.uint32)

    def _merge_two(self, level: int, text_agent: np.ndarray) -> bool:
        """Where level ``level`` (over its bound) merged into the next one would put that one
        over its bound too, merged into a third level with room for both: both merged into
        that level's buffer in one pass (:func:`merge3_in_place`), the same level as the two
        merges in turn give, without the first one's writes (a flush's adoptions, ~2 M late
        in a 300k real-text stream, merged with the level they land in, just to be merged
        on). Both levels emptied; False (nothing done) otherwise."""
        if level + 2 >= len(self.evs):
            return False
        ev, ev2, ev3 = self.evs[level], self.evs[level + 1], self.evs[level + 2]
        size = len(ev) + len(ev2) + len(ev3)
        if (not len(ev2) or len(ev) + len(ev2) <= MERGE_MIN * GROWTH ** (level + 2)
                or not len(ev3) or len(self.bufs[level + 2]) < size):
            return False
        ptr, ptr2 = self.ptrs[level], self.ptrs[level + 1]
        merge3_in_place(self.bufs[level + 2], len(ev3), ev, ptr, ev2, ptr2,
                        self.ptrs[level + 2], text_agent)
        self._drop(self.bufs[level])
        self._drop(self.bufs[level + 1])
        self.evs[level + 2] = self.bufs[level + 2][:size]
        self.ptrs[level + 2] = ptr + ptr2 + self.ptrs[level + 2]
        self._empty(level)
        self._empty(level + 1)
        return True

    def of(self, number: int) -> np.ndarray:
        """Texts of first use of one cascade's adoptions (each level's in agent order)."""
        return self.of_many(np.array([number], np.int64))[0]

    def of_many(self, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`of` for several cascades, one after another, and where each begins (and
        the end): a pass a level."""
        levels = [(ev, ptr) for ev, ptr in zip(self.evs, self.ptrs, strict=True) if len(ev)]
        counts = np.zeros(len(numbers), np.int64)
        for _, ptr in levels:
            counts += ptr[numbers + 1].astype(np.int64) - ptr[numbers]
        offsets = np.zeros(len(numbers) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        out = np.empty(offsets[-1], np.uint32)
        fill = offsets[:-1].copy()
        for ev, ptr in levels:
            gather_segments(ev, ptr, numbers, out, fill)
        return out, offsets


@dataclass(slots=True)
class _Exposure:
    """One cascade's exposure figures as of its last computation."""

    size: int  # adopters then (the cascade is dirty when it has more now)
    agents: np.ndarray  # graph agents by exposure 0..max_exposure (agents with k >= 1 only
    adopted: np.ndarray  # and adopters; the unexposed rest is added from the node count)
    counted: int  # agents counted in ``agents``
    first_agent: np.ndarray  # the first adopters_shown adopters (uint32 agent indices),
    first_time: np.ndarray  # their first use and their exposure (int32, -1: not in the
    first_exposure: np.ndarray  # graph); arrays, not tuples: ~1 kB a cascade, not ~7 kB

    def shown(self, names: list[str]) -> list[dict[str, Any]]:
        """The first adopters as the details list them."""
        return [{"agent": names[a], "time": datetime_iso(t), "exposure": None if k < 0 else k}
                for a, t, k in zip(self.first_agent.tolist(), self.first_time.tolist(),
                                   self.first_exposure.tolist(), strict=True)]


class _Scratch:
    """Graph-sized work arrays of the exposure computation (never pickled: made per analysis),
    left as found after each cascade: adoption time by node (inf) and hits by node (0)."""

    __slots__ = ("t", "k")

    def __init__(self, nodes: int) -> None:
        self.t = np.full(nodes, np.inf)
        self.k = np.zeros(nodes, np.int64)


class _EdgeIndex:
    """The graph's cumulative edges indexed by source: a CSR of the edges up to its last
    rebuild (when the newer ones are more than a quarter of it: amortised O(1) an edge)
    and the newer ones (the tail) grouped by source at each refresh, with their own CSR
    (``tail_ptr``, made at each refresh: O(nodes + tail), where a binary search in the tail for
    each adopter of each analysed cascade missed the cache at every step), so that a
    cascade's exposure reads only its adopters' out-edges in both, never the whole tail."""

    def __init__(self) -> None:
        self.m = 0
        self.indptr = np.zeros(1, np.int64)
        self.dst = np.empty(0, np.int64)
        self.tail_ptr = np.zeros(1, np.int64)
        self.tail_dst = np.empty(0, np.int64)

    def refresh(self, graph: InteractionGraph) -> None:
        """Bring the index up to the graph: a rebuild when the tail is over a quarter of the
        indexed edges, else the tail grouped by source (O(tail + nodes), by counting)."""
        nodes = len(graph.agent_names())
        src, dst = graph.pairs_from(self.m)  # the pairs since the last rebuild
        if len(src) > self.m // 4:
            src, dst = graph.pairs_from(0)
            self.indptr, self.dst = by_source(src, dst, nodes)
            self.m = len(src)
            src, dst = src[:0], dst[:0]
        self.tail_ptr, self.tail_dst = by_source(src, dst, nodes)


class _Words(NamedTuple):
    """A buffered text as a checkpoint holds it: its words, all the merge reads of it (a
    :class:`Text` pickles its tokens and ids besides)."""

    words: list[str]


class CascadeEngine:
    """n-gram adoption table, cascades, power-law fit and exposure analysis.

    ``graph``: the reducer's shared interaction graph (fed by its owner); without one the
    engine keeps and feeds its own from the comments it sees.
    """

    def __init__(self, config: CascadeConfig | None = None,
                 graph: InteractionGraph | None = None) -> None:
        self.config = cfg = config or CascadeConfig()
        every = cfg.analysis_every
        self._every = every.total_seconds() if isinstance(every, timedelta) else float(every)
        self._own_graph = graph is None
        self.graph = graph or InteractionGraph()
        self._agent_ids: dict[str, int] = {}
        self._agents: list[str] = []
        self._gmap = np.empty(0, np.int64)  # agent index -> graph agent index (-1: not in it)
        self._gnames: dict[str, int] = {}  # graph agent index by name, as far as seen
        # n-gram table, sorted by id
        self._keys = np.empty(0, np.uint64)
        self._size = np.empty(0, np.uint32)
        self._last = np.empty(0, np.float64)
        # adoptions: of cascades (never evicted) and of the other n-grams (evicted with them)
        self._big = _Cascades()
        self._blk = np.empty(0, np.uint32)  # each n-gram's block in the pool (not a cascade)
        self._small = _Pool(cfg.min_adopters)
        self._cids = np.empty(0, np.uint64)  # cascade ids, sorted (a cascade's number: its rank)
        self._wnos = np.empty(0, np.uint32)  # and where their words are (order of crossing)
        self._tt = np.empty(1024, np.float64)  # each buffered-and-merged text's time
        self._ta = np.empty(1024, np.uint32)  # and agent
        self._ntt = 0
        # buffer: each text's word ids, agent, time and text (n-grams made at the flush)
        self._bw: list[np.ndarray] = []
        self._spans = cfg.n_range[1] - cfg.n_range[0] + 1
        self._flush_at = cfg.flush_every
        self._ba: list[int] = []
        self._bt: list[float] = []
        self._btext: list[Text | _Words] = []  # to name the n-grams that become cascades
        # (their words read then: a text's word list is gathered on first read, most never are)
        self._buffered = 0
        self._words = bytearray()  # the cascades' words (UTF-8), by number, one after another
        self._word_ends = array("I", [0])  # under 4 GB of words
        self._exposure: dict[int, _Exposure] = {}
        self._edges = _EdgeIndex()
        self.adoptions_total = 0
        self.texts_total = 0
        self.anonymous_total = 0
        self.evicted_total = 0
        self.evicted_adopters_max = 0
        self._due: float | None = None
        self._texts_at_analysis = 0
        self._fit_key: bytes | None = None
        self._fit: PowerLawFit | None = None
        self._kth_size = 0  # the exposure_cascades-th largest size at the last analysis
        self._analysis: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_btext"] = [_Words(t.words) for t in self._btext]
        return state

    # -- ingest -----------------------------------------------------------------------------
    def update(self, item: Item) -> None:
        event = item.event
        if not isinstance(event, PostEvent | CommentEvent) or item.text is None:
            return
        if self._own_graph and isinstance(event, CommentEvent):
            self.graph.update(item)
        if item.author is None:
            self.anonymous_total += 1
            return
        self.texts_total += 1
        w = item.text.word_ids
        if len(w) < self.config.n_range[0]:
            return
        agent = self._agent_ids.get(item.author)
        if agent is None:
            agent = self._agent_ids[item.author] = len(self._agents)
            if agent > int(AGENT_MASK):
                raise ValueError("more than 2^26 agents")
            self._agents.append(item.author)
            if agent == len(self._gmap):
                self._gmap = np.concatenate((self._gmap, np.full(max(agent, 1024), -1)))
            self._gmap[agent] = self._gnames.get(item.author, -1)
        self._bw.append(w)
        self._ba.append(agent)
        self._bt.append(item.t)
        self._btext.append(item.text)
        self._buffered += len(w) * self._spans
        if self._buffered >= self._flush_at:
            self._flush()

    def _flush(self) -> None:
        if not self._buffered:
            return
        cfg = self.config
        texts = self._btext
        lens = np.fromiter((len(a) for a in self._bw), np.int64, len(self._bw))
        w = np.concatenate(self._bw)
        agents = np.asarray(self._ba, np.uint64)
        times = np.asarray(self._bt, np.float64)
        self._bw, self._ba, self._bt, self._btext, self._buffered = [], [], [], [], 0
        # every text's n-grams at once: the rolling hash over the concatenated words, windows
        # that cross two texts left out, the stop-word rule by cumulative sums of a mask
        lo, hi = cfg.n_range
        g, where, text_of, part_ends = batch_ngrams(w, lens, STOP_IDS, lo, hi,
                                                    cfg.max_stop_share, K)
        origin = (part_ends, where, text_of,
                  np.concatenate(([0], np.cumsum(lens))), texts)
        # first uses refer to their text: the texts' times appended to the table, the
        # earliest text of a pair found by its rank in time order
        base = self._append_texts(times, agents)
        by_time = np.argsort(times, kind="stable")
        rank = np.empty(len(times), np.int64)
        rank[by_time] = np.arange(len(times))
        # sorted by a packed key: the id prefix shifted down to leave only the bits the
        # batch's agents need (the same order, fewer radix passes: 38 + 17 bits fit 7 of 8
        # bits up to 131k agents, where the full 64 take 8)
        ab = max(int(agents.max()).bit_length(), 1)
        agu, gu, src, best, ok = sorted_pairs(g, text_of, agents, rank, ab)
        if not ok:  # two n-grams share a prefix and an agent (or a bucket too full to
            # pack): sort by key, then id
            key = pair_keys(g, text_of, agents, np.uint64(PREFIX_MASK), ab)
            order = np.lexsort((g, key))
            agu, gu, src, best = distinct_pairs(order, key[order], g, text_of, rank, ab)
        # ids sharing a prefix: by id, then agent (a stable sort by id of each run of them)
        ids_in_order(agu, gu, src, best)
        # one pass an n-gram: the pairs of the cascades out, by (cascade number, agent) as
        # the cascades are numbered in id order; the others seen (found in their n-gram's
        # block: the earlier first use kept) or new: counted, put into their blocks or, when
        # their n-gram crosses ``min_adopters``, out with its block's adoptions
        pool = self._small
        (self._keys, self._size, self._last, self._blk, pool.pool, pool.used, cx, cno, ag,
         adopted, crossed, first, had, moved_t, joining, jx) = merge_pairs(
            agu, gu, best, by_time, times, base, self._cids, self._keys, self._size,
            self._last, self._blk, pool.pool, pool.used, pool.heads, pool.caps, pool.cls_of,
            self._ta, self._tt, cfg.min_adopters)
        if pool.used >= NO_BLOCK:
            raise ValueError("more than 2^32 pooled adoptions")
        found_b, at_b = self._big.find(cno, ag, self._ta, cx, self._tt)
        # the cascades' new adoptions (counted by their filters): their run to insert
        cn, xn, pn = new_adoptions(found_b, at_b, cno, cx)
        self.adoptions_total += adopted + len(cn)
        if len(crossed):
            self._name(src[first], origin)
        joined = cn[:0], xn[:0], pn[:0]
        if len(crossed):  # number the new cascades; their earlier adoptions join their store
            at, old = _places(np.searchsorted(self._cids, crossed), len(self._cids))
            self._cids = _placed(self._cids, crossed, at, old)
            first_no = len(self._cids) - len(crossed)  # their words, named in id order
            self._wnos = _placed(self._wnos, np.arange(first_no, len(self._cids), dtype=np.uint32),
                                 at, old)
            self._big.grow(old)
            cn = np.flatnonzero(old)[cn]  # the others renumbered
            jt = np.concatenate((joining, moved_t))
            # their numbers: the new cascades' places (``at``, in the order of ``crossed``)
            jc = at[np.concatenate((jx, np.repeat(np.arange(len(crossed)), had)))]
            # a new cascade's adoptions go where its (empty) segment is in level 0, sorted by
            # (cascade, agent) (the merge's are, the pool's by cascade only); the others' are
            # in that order already (renumbering keeps it): two sorted runs, merged as they
            # are inserted
            jc, jt = joined_run(jc, jt, len(joining), self._ta)
            joined = jc, jt, self._big.ptrs[0][jc].astype(np.int64)
        self._big.add((cn, xn, pn), joined, self._ta)
        if self._tracked() > self.config.max_tracked:
            self._evict()
        self._small.compact(self._blk, self._size)
        # a merge rewrites the n-gram table (O(n-grams)): buffer a quarter of the
        # cascades' adoptions first, up to 16 flush_every pairs (the buffered words: ~10 bytes
        # a pair); the cascades' own store is levelled, so its merges cost O(new) amortised
        self._flush_at = max(cfg.flush_every, min(len(self._big) // 4, 16 * cfg.flush_every))

    def _append_texts(self, times: np.ndarray, agents: np.ndarray) -> int:
        """Append texts' times and agents to the table (capacity doubled when full); their
        first index."""
        base = self._ntt
        if base + len(times) > len(self._tt):
            size = max(2 * len(self._tt), base + len(times))
            self._tt = np.concatenate((self._tt[:base], np.empty(size - base, np.float64)))
            self._ta = np.concatenate((self._ta[:base], np.empty(size - base, np.uint32)))
        self._tt[base:base + len(times)] = times
        self._ta[base:base + len(times)] = agents
        self._ntt = base + len(times)
        if self._ntt > 2**32:
            raise ValueError("more than 2^32 texts")
        return base

    def _name(self, flat: np.ndarray, origin: tuple) -> None:
        """The words of n-grams that just became cascades (in id order: the order they are
        numbered in), from the buffered uses ``flat`` (their first in the merge)."""
        part_ends, where, text_of, offsets, texts = origin
        ns = self.config.n_range[0] + np.searchsorted(part_ends, flat, side="right")
        ti = text_of[flat]
        # the texts naming them, their words joined once (words hold no newline): an n-gram's
        # words are the bytes from its first word's start to its last word's end
        used, slot = np.unique(ti, return_inverse=True)
        buf = np.frombuffer("\n".join(chain.from_iterable(texts[t].words for t in used.tolist()))
                            .encode(), np.uint8)
        seps = np.flatnonzero(buf == ord("\n"))
        word = (np.r_[0, np.cumsum(offsets[used + 1] - offsets[used])[:-1]][slot]
                + where[flat] - offsets[ti])  # its first word among the joined ones
        b0 = np.r_[0, seps + 1][word]
        length = np.r_[seps, len(buf)][word + ns - 1] - b0
        self._words += word_bytes(buf, b0, length).tobytes()
        ends = np.cumsum(length)
        ends += len(self._words) - ends[-1]
        self._word_ends.extend(ends.tolist())

    def _word(self, gid: int) -> str:
        """A cascade's words (cascades are numbered in id order within a merge, as named)."""
        no = int(self._wnos[np.searchsorted(self._cids, np.uint64(gid))])
        return self._words[self._word_ends[no]:self._word_ends[no + 1]].decode()

    def _evict(self) -> None:
        """Drop the non-cascade n-grams with the fewest adopters (oldest first) and their
        adoptions, down to evict_to x max_tracked."""
        cfg = self.config
        target = int(cfg.evict_to * cfg.max_tracked)
        n_drop = min(self._tracked() - target, len(self._keys))  # the table's rows: every
        if n_drop <= 0:  # n-gram that is not a cascade
            return
        t0 = float(self._last.min())
        score = self._size.astype(np.float64) * 2.0 ** 34 + (self._last - t0)
        drop = np.argpartition(score, n_drop - 1)[:n_drop]
        gone = np.zeros(len(self._keys), bool)
        gone[drop] = True
        self.evicted_total += n_drop
        self.evicted_adopters_max = max(self.evicted_adopters_max,
                                        int(self._size[drop].max()))
        self._small.take(self._blk[drop], self._size[drop].astype(np.int64))
        keep = ~gone
        self._keys, self._size, self._last = self._keys[keep], self._size[keep], self._last[keep]
        self._blk = self._blk[keep]

    # -- time -------------------------------------------------------------------------------
    def expire(self, now: float) -> None:
        """Drive the periodic analysis (event time)."""
        if self._due is None:
            self._due = now + self._every
        elif now >= self._due and self.texts_total - self._texts_at_analysis >= max(1, min(
                self.config.analysis_min_texts, self._texts_at_analysis)):
            self.analyse()
            self._due = now + self._every

    # -- queries ----------------------------------------------------------------------------
    def _cascades(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, sizes) of the cascades, by id: their numbers' ids and adopter counts, as the
        store keeps them (no pass over the n-gram table, no copy: the engine's own arrays,
        the counts uint32, read only)."""
        self._flush()
        return self._cids, self._big.fcount

    def cascade_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, sizes) of every cascade, by id (:meth:`ngram` names one): O(cascades) in
        NumPy, where :meth:`sizes` names them all in Python."""
        ids, sizes = self._cascades()
        return ids.copy(), sizes.astype(np.int64)

    def ngram(self, gid: int) -> str:
        """A cascade's words, from its id."""
        return self._word(gid)

    def settled(self) -> bool:
        """No text taken since the last analysis (which merged the buffer): a read now forces
        no early merge."""
        return self.texts_total == self._texts_at_analysis

    def sizes(self) -> dict[str, int]:
        """Cascade sizes (distinct adopters) by n-gram."""
        ids, sizes = self._cascades()
        return {self._word(g): s for g, s in zip(ids.tolist(), sizes.tolist(), strict=True)}

    def tracked(self) -> int:
        self._flush()
        return self._tracked()

    def _tracked(self) -> int:
        """N-grams tracked: the table's (not cascades) and the cascades."""
        return len(self._keys) + len(self._cids)

    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._size.nbytes + self._last.nbytes
                   + self._blk.nbytes + self._big.nbytes() + self._small.nbytes()
                   + self._cids.nbytes
                   + self._wnos.nbytes + 12 * self._ntt + len(self._words)
                   + self._word_ends.itemsize * len(self._word_ends))

    def _gram_id(self, ngram: str) -> int:
        words = Text.of(ngram).words
        return int(Text(words).word_ngram_ids(len(words))[0])

    def _adopters(self, gid: int) -> tuple[np.ndarray, np.ndarray]:
        """(agent indices, first-use times) of an n-gram's adopters, by agent."""
        g = np.uint64(gid)
        i = int(np.searchsorted(self._cids, g))
        if i < len(self._cids) and self._cids[i] == g:
            texts = self._big.of(i)
        else:
            e = int(np.searchsorted(self._keys, g))
            texts = (self._small.of(int(self._blk[e]), int(self._size[e]))
                     if e < len(self._keys) and self._keys[e] == g else self._ta[:0])
        texts = texts[np.argsort(self._ta[texts], kind="stable")]  # by agent
        return self._ta[texts].astype(np.int64), self._tt[texts]

    def adopters(self, ngram: str) -> dict[str, float]:
        """Adopters of an n-gram and their first use (unix seconds)."""
        self._flush()
        agents, times = self._adopters(self._gram_id(ngram))
        return {self._agents[a]: t for a, t in zip(agents.tolist(), times.tolist(), strict=True)}

    def _graph_map(self) -> int:
        """Bring the edge index and the agent -> graph index map up to date: the graph's
        nodes."""
        names = self.graph.agent_names()
        seen = len(self._gnames)
        if seen < len(names):  # the new nodes at once (~60k an analysis early in a stream)
            new = names[seen:]
            self._gnames.update(zip(new, range(seen, len(names)), strict=True))
            get = self._agent_ids.get
            mine = np.array([get(name, -1) for name in new], np.int64)
            hit = mine >= 0
            self._gmap[mine[hit]] = np.flatnonzero(hit) + seen
        self._edges.refresh(self.graph)
        return len(names)

    def exposures(self, ngram: str) -> tuple[dict[str, int], Counter, Counter]:
        """For one n-gram: each adopter's exposure (adopted in-neighbours before it; adopters
        in the graph only); and, over every agent of the graph, agents and adopters by
        exposure (not pooled)."""
        self._flush()
        agents, times = self._adopters(self._gram_id(ngram))
        nodes = self._graph_map()
        gi, k_ad, others = self._exposure_of(agents, times, _Scratch(nodes))
        inside = gi >= 0
        mine = {self._agents[a]: int(k) for a, k in zip(agents[inside].tolist(),
                                                        k_ad[inside].tolist(), strict=True)}
        everyone = Counter(others.tolist()) + Counter(mine.values())
        everyone[0] += nodes - len(others) - len(mine)
        return mine, +everyone, Counter(mine.values())

    def adoptions(self, ngram: str) -> tuple[list[str], np.ndarray, np.ndarray]:
        """An n-gram's adopters (by agent index), their first use (unix seconds) and their
        exposure (as :meth:`exposures`; -1: not in the graph), read once: what the hazard
        table takes of a cascade, without the counts over the whole graph."""
        self._flush()
        agents, times = self._adopters(self._gram_id(ngram))
        gi, k_ad, _ = self._exposure_of(agents, times, _Scratch(self._graph_map()))
        return ([self._agents[a] for a in agents.tolist()], times,
                np.where(gi >= 0, k_ad, -1))

    def _exposure_of(self, agents: np.ndarray, times: np.ndarray, scratch: _Scratch,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exposures to one cascade, k(a) = edges j -> a with j an adopter before a (a
        non-adopter: ever), sparse (O(adopters' out-edges), not O(graph): the graph-sized
        ``scratch`` arrays are looked up by node and restored after use): each adopter's
        graph index (-1: not in the graph) and exposure (0 outside), and the exposures >= 1
        of the non-adopters."""
        gi = self._gmap[agents]
        e = self._edges
        k_ad, others = exposures(gi, times, e.indptr, e.dst, e.tail_ptr, e.tail_dst,
                                 scratch.t, scratch.k)
        return gi, k_ad, others

    def analyse(self, full: bool = False) -> None:
        """Power-law fit of the sizes (when they changed) and the exposure analysis (changed
        cascades within the budget; every one of them when ``full``)."""
        cfg = self.config
        self._texts_at_analysis = self.texts_total
        ids, sizes = self._cascades()  # uint32 as the store counts them: no copy of a million
        hist = np.bincount(sizes)  # the size histogram: O(cascades), no sort
        key = hist.tobytes()
        if key != self._fit_key:
            self._fit_key = key
            self._fit = (fit_discrete_power_law(sizes, max_candidates=cfg.max_xmin_candidates,
                                                histogram=hist)
                         if len(sizes) >= 2 else None)
        k = cfg.exposure_cascades
        if len(sizes) <= k:
            cand = np.arange(len(sizes))
        else:  # the k largest (ties at the k-th kept) sorted, not all of them; sizes only
            # grow and cascades are never evicted, so the k-th largest size never falls: the
            # k largest are among the cascades as large as it was last time
            cand = np.flatnonzero(sizes >= self._kth_size)
            top = sizes[cand]
            self._kth_size = int(np.partition(top, len(top) - k)[len(top) - k])
            cand = cand[top >= self._kth_size]
        order = cand[np.lexsort((ids[cand], -sizes[cand].astype(np.int64)))][:k]
        largest, lsizes = ids[order].tolist(), sizes[order].tolist()
        nodes = self._graph_map()
        cap = cfg.max_exposure
        budget = cfg.exposure_budget
        stale = 0
        todo: list[int] = []
        sized: list[int] = []
        for gid, size in zip(largest, lsizes, strict=True):  # largest first
            ex = self._exposure.get(gid)
            if ex is not None and ex.size == size and not full:
                continue
            if budget < size and budget < cfg.exposure_budget and not full:
                stale += 1  # over the budget (the first one is always done)
                continue
            budget -= size
            todo.append(gid)
            sized.append(size)
        if todo:  # every one computed in one compiled pass
            texts, offsets = self._big.of_many(
                np.searchsorted(self._cids, np.array(todo, np.uint64)))
            scratch = _Scratch(nodes)
            e = self._edges
            agents_k, adopted_k, counted_k, first, f_agent, f_time, f_exp = exposure_batch(
                texts, offsets, self._ta, self._tt, self._gmap, e.indptr, e.dst, e.tail_ptr,
                e.tail_dst, scratch.t, scratch.k, cap, cfg.adopters_shown)
            for i, (gid, size) in enumerate(zip(todo, sized, strict=True)):
                a, b = first[i], first[i + 1]
                self._exposure[gid] = _Exposure(
                    size, agents_k[i].copy(), adopted_k[i].copy(), int(counted_k[i]),
                    f_agent[a:b].copy(), f_time[a:b].copy(), f_exp[a:b].copy())
        agents_k = np.zeros(cap + 1, np.int64)
        adopted_k = np.zeros(cap + 1, np.int64)
        known = [ex for ex in map(self._exposure.get, largest) if ex is not None]
        if known:  # summed at once (integers: any order gives the same sums)
            agents_k += np.sum([ex.agents for ex in known], axis=0)
            adopted_k += np.sum([ex.adopted for ex in known], axis=0)
            agents_k[0] += sum(nodes - ex.counted for ex in known)  # the unexposed, now
        listed: list[dict[str, Any]] = []
        shown = order[:cfg.shown]  # their adoptions' times read at once, each one's first, last
        texts, offsets = self._big.of_many(shown)
        times = self._tt[texts]
        starts = offsets[:-1]
        firsts = np.minimum.reduceat(times, starts).tolist() if len(times) else []
        lasts = np.maximum.reduceat(times, starts).tolist() if len(times) else []
        for i, (gid, size) in enumerate(zip(largest[:cfg.shown], lsizes[:cfg.shown],
                                            strict=True)):
            ex = self._exposure.get(gid)
            listed.append({
                "ngram": self._word(gid), "size": size,
                "first": datetime_iso(firsts[i]), "last": datetime_iso(lasts[i]),
                "adopters": [] if ex is None else ex.shown(self._agents),
                "exposure_of_size": None if ex is None else ex.size,
            })
        agents, adopted = agents_k, adopted_k
        rate = {str(k): {"agents": int(agents[k]), "adopters": int(adopted[k]),
                         "rate": float(adopted[k] / agents[k]) if agents[k] else None}
                for k in range(cap + 1) if agents[k]}
        self._analysis = {"cascades": listed, "adoption_rate_by_exposure": rate,
                          "exposure_cascades": len(largest), "exposure_stale_cascades": stale}

    def snapshot(self) -> Snapshot:
        _, size_arr = self._cascades()
        sizes = size_arr.tolist()
        samples = [
            Sample("cascades", float(len(sizes)), help="n-grams with >= min_adopters adopters"),
            Sample("cascade_size_max", float(max(sizes, default=0)), help="Largest cascade"),
            Sample("cascade_adoptions_total", float(self.adoptions_total), kind="counter"),
            Sample("cascade_anonymous_texts_total", float(self.anonymous_total),
                   kind="counter", help="Posts and comments without an author: no adoption"),
            Sample("cascade_ngrams_tracked", float(self._tracked())),
            Sample("cascade_ngrams_evicted_total", float(self.evicted_total), kind="counter"),
            Sample("cascade_evicted_adopters_max", float(self.evicted_adopters_max)),
            Sample("cascade_state_bytes", float(self.nbytes()),
                   help="Bytes of the n-gram table and the adoption store"),
        ]
        if self._fit is not None:
            samples += [
                Sample("cascade_alpha", self._fit.alpha, help="Power-law exponent of sizes"),
                Sample("cascade_alpha_stderr", self._fit.stderr),
                Sample("cascade_xmin", float(self._fit.xmin)),
            ]
        for k, row in self._analysis.get("adoption_rate_by_exposure", {}).items():
            if row["rate"] is not None:
                samples.append(Sample("cascade_adoption_rate", row["rate"], (("exposure", k),),
                                      help="Adopters / agents with k adopted in-neighbours"))
        details = {
            "cascade_sizes": {str(s): c for s, c in sorted(Counter(sizes).items())},
            "cascade_fit": None if self._fit is None else self._fit.as_dict(),
            **self._analysis,
        }
        return Snapshot(samples=samples, details=details)


@lru_cache(maxsize=1 << 13)  # the listed adopters' times, mostly the same analysis to analysis
def datetime_iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()
