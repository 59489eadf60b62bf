"""Adoption cascades of word n-grams (Molt Dynamics), their size distribution and power law,
and exposure to adopting neighbours.

Definitions (Molt Dynamics, arXiv 2603.03555, and its code): texts of posts and comments are
lower-cased and split into word tokens (``\\b\\w+\\b``); every 3- to 5-gram whose words are
*more than half* stop words is dropped (stop list: scikit-learn's English list; the paper
does not name one). An agent *adopts* an n-gram the first time it uses it; a *cascade* is an
n-gram adopted by at least ``min_adopters`` (10) distinct agents; its size is the number of
distinct adopters. Sizes are fitted by a discrete power law (Clauset-Shalizi-Newman: exact
discrete MLE with the Hurwitz zeta for each candidate xmin, xmin minimising the KS distance;
standard error (alpha - 1)/sqrt(n_tail), as ``powerlaw`` reports it). Exposure of an agent to
a cascade = its in-neighbours in the cumulative interaction graph (agents who commented on it)
that adopted before it; every agent of the graph counts, as in the paper's code, and the
adoption rate by exposure k = adopters with exposure k / agents with exposure k. The graph is
taken as it stands at each analysis (every ``analysis_every``), like the paper's static graph;
the exposure analysis covers the ``exposure_cascades`` largest cascades.

Bounded memory: the n-gram table holds at most ``max_tracked`` n-grams (each with its
adopters). When full, the quarter with the fewest adopters (oldest first) that are not yet
cascades is evicted; ``cascade_ngrams_evicted_total`` and ``cascade_evicted_adopters_max``
say what was lost: sizes are exact for every n-gram never evicted, and an evicted n-gram that
comes back restarts with at most that many adopters missing. Cascades themselves are never
evicted (their adopter sets are the cascade); memory = table entries + total cascade size.

Multi-worker: the per-partition stage tokenises (:func:`ngrams_of`) and forwards adoption
facts ``(ngram, agent, time)``; the society-wide reducer calls :meth:`CascadeEngine.adopt`
and shares the reducer's :class:`~streams.state.graph.InteractionGraph` for exposure.

>>> sorted(ngrams_of("The swarm is the answer; the swarm decides.", (3, 3)))
['answer the swarm', 'the swarm decides']
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from scipy import optimize, special
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Sample, Snapshot
from streams.state.graph import InteractionGraph

WORD = re.compile(r"\b\w+\b")
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS)


def ngrams_of(text: str, n_range: tuple[int, int] = (3, 5),
              stop_words: frozenset[str] = STOP_WORDS, max_stop_share: float = 0.5) -> set[str]:
    """Distinct lower-cased word n-grams of ``text`` kept by the stop-word filter."""
    words = WORD.findall(text.lower())
    stop = [w in stop_words for w in words]
    out: set[str] = set()
    for n in range(n_range[0], n_range[1] + 1):
        for i in range(len(words) - n + 1):
            if sum(stop[i:i + n]) <= max_stop_share * n:
                out.add(" ".join(words[i:i + n]))
    return out


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


def _alpha_mle(tail: np.ndarray, xmin: int) -> float:
    n, log_sum = len(tail), float(np.log(tail).sum())

    def nll(a: float) -> float:
        return n * math.log(special.zeta(a, xmin)) + a * log_sum

    res = optimize.minimize_scalar(nll, bounds=(1.0001, 10.0), method="bounded",
                                   options={"xatol": 1e-7})
    return float(res.x)


def fit_discrete_power_law(sizes: Sequence[int] | np.ndarray, xmin: int | None = None,
                           alpha_range: tuple[float, float] | None = (0.0, 3.0),
                           ) -> PowerLawFit | None:
    """CSN fit of integer data: for each candidate xmin (distinct values but the largest), the
    exact discrete MLE of alpha; keep the xmin whose fit has the smallest KS distance between
    the empirical and the fitted CDF of the tail. Like ``powerlaw.Fit`` (whose default
    ``alpha`` range is (0, 3)), fits outside ``alpha_range`` are passed over unless no xmin
    gives one inside. None below two distinct values."""
    x = np.asarray(sizes, dtype=np.int64)
    x = np.sort(x[x >= 1])
    candidates = [xmin] if xmin is not None else np.unique(x)[:-1].tolist()
    fits: list[PowerLawFit] = []
    for xm in candidates:
        tail = x[x >= xm]
        if len(tail) < 2 or tail[0] == tail[-1]:
            continue
        alpha = _alpha_mle(tail, int(xm))
        values, counts = np.unique(tail, return_counts=True)
        emp = np.cumsum(counts) / len(tail)
        model = 1.0 - special.zeta(alpha, values + 1) / special.zeta(alpha, xm)
        ks = float(np.abs(emp - model).max())
        fits.append(PowerLawFit(alpha, (alpha - 1) / math.sqrt(len(tail)), int(xm), len(tail),
                                ks))
    valid = [f for f in fits if alpha_range is None
             or alpha_range[0] < f.alpha < alpha_range[1]] or fits
    return min(valid, key=lambda f: f.ks) if valid else None


# ----------------------------------------------------------------------------------------------
# the engine
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CascadeConfig:
    """n_range [(3, 5)], min_adopters [10], max_stop_share [0.5]: the paper's definitions;
    max_tracked [100_000]: n-grams held; analysis_every [10 min]: power-law fit and exposure
    analysis period (event time); shown [50]: cascades listed in details, with at most
    adopters_shown [50] adopters each; max_exposure [10]: exposures above are pooled;
    exposure_cascades [1000]: the exposure analysis covers the largest this many cascades
    (its cost is their total size times the mean degree)."""

    n_range: tuple[int, int] = (3, 5)
    min_adopters: int = 10
    max_stop_share: float = 0.5
    max_tracked: int = 100_000
    analysis_every: timedelta = timedelta(minutes=10)
    shown: int = 50
    adopters_shown: int = 50
    max_exposure: int = 10
    exposure_cascades: int = 1000


@dataclass(slots=True)
class _Gram:
    adopters: dict[str, float] = field(default_factory=dict)  # agent -> first use (epoch s)
    last: float = 0.0


class CascadeEngine:
    """n-gram adoption table, cascades, power-law fit and exposure analysis.

    ``graph``: the reducer's shared interaction graph (fed by its owner); without one the
    engine keeps and feeds its own from the comments it sees.
    """

    def __init__(self, config: CascadeConfig | None = None,
                 graph: InteractionGraph | None = None) -> None:
        self.config = config or CascadeConfig()
        self._own_graph = graph is None
        self.graph = graph or InteractionGraph()
        self._grams: dict[str, _Gram] = {}
        self._cascades: set[str] = set()
        self.adoptions_total = 0
        self.evicted_total = 0
        self.evicted_adopters_max = 0
        self._due: float | None = None
        self._analysis: dict[str, Any] = {}
        self._fit: PowerLawFit | None = None

    def update(self, event: PostEvent | CommentEvent | VoteEvent) -> None:
        if isinstance(event, VoteEvent):
            return
        if isinstance(event, CommentEvent) and self._own_graph:
            self.graph.update(event)
        cfg, ts = self.config, event.event_time.timestamp()
        for g in ngrams_of(event.text, cfg.n_range, max_stop_share=cfg.max_stop_share):
            self._adopt(g, event.author, ts)

    def adopt(self, ngram: str, agent: str, time: datetime) -> None:
        """One adoption fact: ``agent`` used ``ngram`` at ``time`` (first use counts)."""
        self._adopt(ngram, agent, time.timestamp())

    def _adopt(self, ngram: str, agent: str, ts: float) -> None:
        gram = self._grams.get(ngram)
        if gram is None:
            gram = self._grams[ngram] = _Gram()
            if len(self._grams) > self.config.max_tracked:
                self._evict(keep=ngram)
        first = gram.adopters.get(agent)
        if first is None or ts < first:
            if first is None:
                self.adoptions_total += 1
            gram.adopters[agent] = ts
        gram.last = max(gram.last, ts)
        if len(gram.adopters) >= self.config.min_adopters:
            self._cascades.add(ngram)

    def _evict(self, keep: str) -> None:
        target = (3 * self.config.max_tracked) // 4
        candidates = ((len(g.adopters), g.last, k) for k, g in self._grams.items()
                      if k not in self._cascades and k != keep)
        for n, _, k in heapq.nsmallest(len(self._grams) - target, candidates):
            del self._grams[k]
            self.evicted_total += 1
            self.evicted_adopters_max = max(self.evicted_adopters_max, n)

    def expire(self, now: datetime) -> None:
        """Drive the periodic analysis (event time)."""
        ts = now.timestamp()
        if self._due is None:
            self._due = ts + self.config.analysis_every.total_seconds()
        elif ts >= self._due:
            self.analyse()
            self._due = ts + self.config.analysis_every.total_seconds()

    def sizes(self) -> dict[str, int]:
        """Cascade sizes (distinct adopters) by n-gram."""
        return {g: len(self._grams[g].adopters) for g in self._cascades}

    def exposures(self, ngram: str, nodes: int | None = None,
                  ) -> tuple[dict[str, int], Counter, Counter]:
        """For one n-gram: each adopter's exposure (adopted in-neighbours before it); and,
        over every agent of the graph, agents and adopters by exposure."""
        adopters = self._grams[ngram].adopters
        graph = self.graph
        mine: dict[str, int] = {}
        for a, t in adopters.items():
            mine[a] = sum(1 for j in graph.in_neighbours(a)
                          if (tj := adopters.get(j)) is not None and tj < t)
        exposed: Counter = Counter()  # non-adopters: adopted in-neighbours (all, ever)
        for j in adopters:
            for a in graph.out_neighbours(j):
                if a not in adopters:
                    exposed[a] += 1
        agents: Counter = Counter(exposed.values())
        adopted: Counter = Counter()
        if nodes is None:
            nodes = graph.cumulative_size()[0]
        in_graph = 0
        for a, k in mine.items():
            if graph.in_neighbours(a) or graph.out_neighbours(a):
                agents[k] += 1
                adopted[k] += 1
                in_graph += 1
        agents[0] += nodes - in_graph - len(exposed)
        return mine, agents, adopted

    def analyse(self) -> None:
        """Power-law fit of the sizes and exposure analysis over all cascades."""
        cfg = self.config
        sizes = self.sizes()
        self._fit = fit_discrete_power_law(list(sizes.values())) if len(sizes) >= 2 else None
        agents: Counter = Counter()
        adopted: Counter = Counter()
        largest = sorted(sizes, key=lambda g: (-sizes[g], g))[:cfg.exposure_cascades]
        shown = set(largest[:cfg.shown])
        listed: list[dict[str, Any]] = []
        nodes = self.graph.cumulative_size()[0]
        for g in largest:
            mine, ag, ad = self.exposures(g, nodes)
            cap = cfg.max_exposure
            for k, v in ag.items():
                agents[min(k, cap)] += v
            for k, v in ad.items():
                adopted[min(k, cap)] += v
            if g in shown:
                order = sorted(self._grams[g].adopters.items(), key=lambda kv: (kv[1], kv[0]))
                listed.append({
                    "ngram": g, "size": sizes[g],
                    "first": datetime_iso(order[0][1]), "last": datetime_iso(order[-1][1]),
                    "adopters": [{"agent": a, "time": datetime_iso(t), "exposure": mine[a]}
                                 for a, t in order[:cfg.adopters_shown]],
                })
        rate = {str(k): {"agents": agents[k], "adopters": adopted[k],
                         "rate": adopted[k] / agents[k] if agents[k] else None}
                for k in sorted(agents)}
        self._analysis = {"cascades": listed, "adoption_rate_by_exposure": rate,
                          "exposure_cascades": len(largest)}

    def snapshot(self) -> Snapshot:
        sizes = list(self.sizes().values())
        samples = [
            Sample("cascades", float(len(sizes)), help="n-grams with >= min_adopters adopters"),
            Sample("cascade_size_max", float(max(sizes, default=0)), help="Largest cascade"),
            Sample("cascade_adoptions_total", float(self.adoptions_total), kind="counter"),
            Sample("cascade_ngrams_tracked", float(len(self._grams))),
            Sample("cascade_ngrams_evicted_total", float(self.evicted_total), kind="counter"),
            Sample("cascade_evicted_adopters_max", float(self.evicted_adopters_max)),
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


def datetime_iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()
