"""Evidence a person can act on: exemplar texts, near-duplicate clusters, who led and who followed.

Every detector describes an incident by the acts that make it (posts, comments, replies) as
:class:`Sighting` records (time, agent, item id, the text or its start) and calls the one pure
builder, :func:`build_evidence`, when it reports a finding; the result is merged into the
finding's ``evidence`` dict (which stays a dict: the alert book adds ``link``, the pipeline may
add ``coverage``). The builder returns three keys:

- ``exemplars``: at most ``max_exemplars`` texts, each ``{t, agent, id, text}`` with the text
  cut to ``exemplar_chars`` characters (an ellipsis marks a cut). They are chosen to differ: the
  earliest text of each near-duplicate cluster, largest cluster first, then the other texts in
  the order given (a detector that ranks its sightings, as the shift detector does by alignment
  with the new direction, passes them ranked; the others pass them in time order).
- ``clusters``: the near-duplicate clusters among the sightings' texts, largest first (at most
  ``max_clusters``, each of at least two texts): single-linkage components of the graph whose
  edges join two texts with word-set Jaccard >= ``cluster_jaccard`` (0.7 by default, the surge
  detector's near-duplicate bar). Word sets are the one tokeniser's word ids
  (:attr:`streams.text.Text.word_ids`) of the sighting's ``words`` when the detector kept them,
  else of its stored ``text``. Exact, not sampled: the pairwise intersections of at most
  ``max_texts`` texts are one sparse matrix product, so no MinHash error bound is needed. Each
  cluster: ``{size, agents, first_t, last_t, text, ids, agent_names}``; ``near_duplicate_share``
  is the share of texts that are in one; ``cluster_jaccard`` states the threshold.
- ``timeline``: every participant's first act, in order (time, then agent name): the *leaders*
  acted within ``lead_s`` of the very first act, the others are *followers*, each with its
  delay after the first act. ``{start, agents, leaders, median_delay_s, entries, truncated}``,
  ``entries`` the first ``max_timeline`` of ``{agent, t, delay_s, role, acts, id}``. A
  detector that knows more first acts than it keeps texts (the burst detector's adopters, the
  surge detector's incident agents) passes them as ``first_acts`` (and ``acts`` counts).

Cost: about 10 ms for 200 texts of a few hundred words (one sparse product, one union-find
by ``connected_components``), so a detector that reports an incident at every evaluation tick
keeps it in an :class:`EvidenceCache` and rebuilds it at most every ``refresh_s`` (60 s) of
event time: the evidence of an alert is then at most that old.

Bounded: the builder reads at most ``max_texts`` sightings (the first ones given) and returns
O(``max_exemplars + max_clusters x 10 + max_timeline``) values; what each detector keeps per
incident to call it is documented in that detector's module.

Calling it from another detector (e.g. lockstep, socialisation):

>>> s = [Sighting(10.0, "a", "p1", "Mint CLAW now friends, before it is gone [x1]"),
...      Sighting(12.0, "b", "p2", "Mint CLAW now friends, before it is gone [y2]"),
...      Sighting(75.0, "c", "p3", "something else entirely")]
>>> ev = build_evidence(s)
>>> [(c["size"], c["agent_names"]) for c in ev["clusters"]]
[(2, ['a', 'b'])]
>>> [(e["agent"], e["role"], e["delay_s"]) for e in ev["timeline"]["entries"]]
[('a', 'leader', 0.0), ('b', 'leader', 2.0), ('c', 'follower', 65.0)]
>>> [x["id"] for x in ev["exemplars"]]
['p1', 'p3']
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from streams.text import Text


class Sighting(NamedTuple):
    """One act of an incident: when, by whom, which item, and its text (or the start of it)."""

    t: float
    agent: str | None
    item_id: str
    text: str = ""
    words: np.ndarray | None = None  # word ids of the text, when the detector kept them


@dataclass(frozen=True, slots=True)
class EvidenceConfig:
    max_exemplars: int = 3
    exemplar_chars: int = 280
    max_texts: int = 200
    cluster_jaccard: float = 0.7
    max_clusters: int = 5
    max_timeline: int = 30
    lead_s: float = 60.0
    #: characters of a text a detector stores for its evidence (the cut is the detector's)
    stored_chars: int = 400
    #: event time between two builds of one incident's evidence (:class:`EvidenceCache`)
    refresh_s: float = 60.0


DEFAULT = EvidenceConfig()


@dataclass(slots=True)
class EvidenceCache:
    """One incident's evidence, rebuilt at most every ``refresh_s`` of event time.

    >>> cache, calls = EvidenceCache(), []
    >>> build = lambda: calls.append(1) or {"n": len(calls)}
    >>> [cache.get(t, build)["n"] for t in (0.0, 10.0, 59.0, 60.0)]
    [1, 1, 1, 2]
    """

    at: float = -math.inf
    value: dict[str, Any] | None = None

    def get(self, now: float, build: Callable[[], dict[str, Any]],
            refresh_s: float = DEFAULT.refresh_s) -> dict[str, Any]:
        if self.value is None or now - self.at >= refresh_s:
            self.value, self.at = build(), now
        return self.value


def snippet(text: str, chars: int = DEFAULT.stored_chars) -> str:
    """The start of ``text`` that a detector stores for its evidence."""
    return text if len(text) <= chars else text[:chars]


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def word_ids(sightings: list[Sighting]) -> list[np.ndarray]:
    """The word ids of each sighting (its ``words``, else its text's); repeats allowed."""
    return [s.words if s.words is not None else Text.of(s.text).word_ids for s in sightings]


def near_duplicate_components(ids: list[np.ndarray], threshold: float) -> np.ndarray:
    """Component label of each text in the graph joining texts whose word-id *sets* have
    Jaccard >= ``threshold`` (an empty set joins nothing). One sparse product gives every
    pair's intersection."""
    n = len(ids)
    if n == 0:
        return np.zeros(0, np.int64)
    lens = np.array([len(w) for w in ids], np.int64)
    words = np.concatenate(ids).astype(np.uint64) if lens.sum() else np.zeros(0, np.uint64)
    _, col = np.unique(words, return_inverse=True)
    pairs = np.unique(np.repeat(np.arange(n, dtype=np.int64), lens) * (len(words) + 1)
                      + col.astype(np.int64))  # the distinct (text, word) pairs
    rows, col = pairs // (len(words) + 1), pairs % (len(words) + 1)
    sizes = np.bincount(rows, minlength=n)
    x = csr_matrix((np.ones(len(col), np.int32), (rows, col)),
                   shape=(n, max(1, int(col.max(initial=-1)) + 1)))
    inter = (x @ x.T).tocoo()
    i, j, k = inter.row, inter.col, inter.data.astype(np.float64)
    union = sizes[i] + sizes[j] - k
    keep = (i < j) & (union > 0) & (k >= threshold * union)
    graph = csr_matrix((np.ones(int(keep.sum())), (i[keep], j[keep])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _clusters(sightings: list[Sighting], labels: np.ndarray) -> list[list[int]]:
    """Components of two texts or more, each in time order; largest first."""
    groups: dict[int, list[int]] = {}
    for idx, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(idx)
    multi = [sorted(g, key=lambda i: (sightings[i].t, sightings[i].item_id))
             for g in groups.values() if len(g) >= 2]
    multi.sort(key=lambda g: (-len(g), sightings[g[0]].t, sightings[g[0]].item_id))
    return multi


def timeline(sightings: Iterable[Sighting] = (), first_acts: Mapping[str, float] | None = None,
             acts: Mapping[str, int] | None = None, cfg: EvidenceConfig = DEFAULT
             ) -> dict[str, Any]:
    """The ``timeline`` of :func:`build_evidence` alone (a detector without texts: the
    super-node detector's repliers)."""
    first: dict[str, tuple[float, str]] = {}
    count: dict[str, int] = {}
    for s in sightings:
        if s.agent is None:
            continue
        count[s.agent] = count.get(s.agent, 0) + 1
        if s.agent not in first or (s.t, s.item_id) < first[s.agent]:
            first[s.agent] = (s.t, s.item_id)
    for agent, t in (first_acts or {}).items():
        if agent not in first or t < first[agent][0]:
            first[agent] = (t, "")  # an earlier act than any text kept: its item is not known
    if acts is not None:
        count = {a: max(count.get(a, 0), acts.get(a, 0)) for a in first}
    order = sorted(first.items(), key=lambda kv: (kv[1][0], kv[0]))
    if not order:
        return {"start": None, "agents": 0, "leaders": 0, "median_delay_s": None,
                "entries": [], "truncated": 0}
    start = order[0][1][0]
    entries = []
    leaders = 0
    for agent, (t, item_id) in order:
        lead = t - start <= cfg.lead_s
        leaders += lead
        if len(entries) < cfg.max_timeline:
            entries.append({"agent": agent, "t": t, "delay_s": round(t - start, 3),
                            "role": "leader" if lead else "follower",
                            "acts": count.get(agent, 0), "id": item_id or None})
    delays = [t - start for _, (t, _) in order]
    return {"start": start, "agents": len(order), "leaders": leaders,
            "median_delay_s": round(statistics.median(delays), 3), "entries": entries,
            "truncated": len(order) - len(entries)}


def build_evidence(sightings: Iterable[Sighting], *, first_acts: Mapping[str, float] | None = None,
                   acts: Mapping[str, int] | None = None,
                   cfg: EvidenceConfig = DEFAULT) -> dict[str, Any]:
    """``exemplars``, ``clusters`` (with ``near_duplicate_share`` and ``cluster_jaccard``) and
    ``timeline`` of an incident (module doc); pure and deterministic, JSON-safe."""
    seen: set[str] = set()
    given: list[Sighting] = []
    for s in sightings:
        if s.item_id in seen:
            continue
        seen.add(s.item_id)
        given.append(s)
        if len(given) >= cfg.max_texts:
            break
    texts = [s for s in given if s.text or s.words is not None]
    labels = near_duplicate_components(word_ids(texts), cfg.cluster_jaccard)
    groups = _clusters(texts, labels)
    clusters = []
    for g in groups[: cfg.max_clusters]:
        members = [texts[i] for i in g]
        agents = list(dict.fromkeys(s.agent for s in members if s.agent is not None))
        clusters.append({"size": len(g), "agents": len(agents),
                         "first_t": members[0].t, "last_t": max(s.t for s in members),
                         "text": _cut(members[0].text, cfg.exemplar_chars),
                         "ids": [s.item_id for s in members[:10]], "agent_names": agents[:10]})
    # exemplars: one per cluster (largest first), then the texts in the order given
    picked: list[int] = [g[0] for g in groups]
    clustered = {i for g in groups for i in g}
    picked += [i for i in range(len(texts)) if i not in clustered]
    picked = [i for i in picked if texts[i].text.strip()][: cfg.max_exemplars]
    exemplars = [{"t": texts[i].t, "agent": texts[i].agent, "id": texts[i].item_id,
                  "text": _cut(texts[i].text, cfg.exemplar_chars)} for i in picked]
    return {"exemplars": exemplars, "clusters": clusters,
            "near_duplicate_share": round(len(clustered) / len(texts), 4) if texts else None,
            "cluster_jaccard": cfg.cluster_jaccard,
            "timeline": timeline(given, first_acts, acts, cfg)}
