"""Per-day tables for researchers, built from a replay report (or a snapshot's details).

:func:`day_tables` turns the report's per-day series into flat tables, one row a day (a day and
an ``n`` for the lexical table), ready for Parquet or CSV (``service/exports.py`` writes them,
``moltscope replay --report r.json`` puts them in ``r.days/``). Pure: no I/O, and defensive:
a section missing from the details (an engine switched off, the model off, an older report)
gives an empty table, never an error.

Tables (columns in order; ``None`` where the report has no value):

- ``activity``: ``day`` and every field of ``details.activity.day`` (posts, comments, votes,
  active and new agents, active submolts, comments per post);
- ``lexical``: ``day``, ``n`` and the n-gram turnover of ``details.ngrams.series`` (active,
  births, deaths, birth and death rates, settled);
- ``semantic``: ``window`` (the semantic engines' window label, a day by default), the posts
  embedded, centroid similarity with the previous window, mean pairwise similarity within it
  and with the previous window (``details.centroid*``, ``pairwise_similarity``), and the kNN
  similarity's mean, count and JS divergence (``details.knn<k>.series``);
- ``influence``: ``day``, the day's interaction graph (``graph_days``) and its PageRank
  (``pagerank_daily``: top-k mass, super-node count and names, turnover Jaccard, top agent);
- ``threads``: ``day`` and every field of ``details.threads_daily``;
- ``cascades``: ``day``, the listed cascades (``details.cascades``, the largest ones the
  report shows) whose first adoption fell that day, the largest of them, and the listed
  adoptions made that day;
- ``coverage``: ``day`` (of post creation) and the comment coverage of that day's posts
  (``details.coverage.days``: posts, the platform's comment_count, comments received and
  expected, deficit, posts with a deficit, capture ratio): how much of the platform the
  other tables' figures saw.

>>> report = {"details": {"activity": {"day": [
...     {"start": "2026-01-30T00:00:00+00:00", "posts": 3, "comments": 5}]}}}
>>> tables = day_tables(report)
>>> tables["activity"]
[{'day': '2026-01-30', 'posts': 3, 'comments': 5}]
>>> tables["lexical"], tables["semantic"], tables["coverage"]  # sections it lacks: empty
([], [], [])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

Row = dict[str, Any]

#: Names of the tables :func:`day_tables` builds, in order.
TABLES = ("activity", "lexical", "semantic", "influence", "threads", "cascades", "coverage")


def _day(stamp: object) -> str | None:
    """The date part of an ISO timestamp or date ('2026-01-30T14:00:00+00:00' -> '2026-01-30')."""
    return stamp[:10] if isinstance(stamp, str) and len(stamp) >= 10 else None


def _section(details: Mapping[str, Any], name: str, kind: type) -> Any:
    value = details.get(name)
    return value if isinstance(value, kind) else kind()


def activity(details: Mapping[str, Any]) -> list[Row]:
    """One row per day of ``activity.day``."""
    days = _section(details, "activity", dict).get("day")
    rows = []
    for w in days if isinstance(days, list) else []:
        if isinstance(w, dict) and _day(w.get("start")):
            rows.append({"day": _day(w["start"]), **{k: v for k, v in w.items() if k != "start"}})
    return rows


def lexical(details: Mapping[str, Any]) -> list[Row]:
    """One row per (day, n) of ``ngrams.series``, by n then day."""
    series = _section(details, "ngrams", dict).get("series")
    rows = []
    for n, days in sorted((series if isinstance(series, dict) else {}).items(),
                          key=lambda kv: int(kv[0])):
        for d in days if isinstance(days, list) else []:
            if isinstance(d, dict) and "day" in d:
                rows.append({"day": d["day"], "n": int(n),
                             **{k: v for k, v in d.items() if k != "day"}})
    return rows


def _matrix_entry(matrix: object, i: int, j: int) -> float | None:
    try:
        value = matrix[i][j]  # type: ignore[index]
    except (IndexError, KeyError, TypeError):
        return None
    return value if isinstance(value, int | float) else None


def semantic(details: Mapping[str, Any]) -> list[Row]:
    """One row per window of the centroid engine or of the kNN series, in window order."""
    centroid = _section(details, "centroid", dict)
    cent_sim = _section(details, "centroid_similarity", dict)
    pair = _section(details, "pairwise_similarity", dict)
    labels = centroid.get("windows") if isinstance(centroid.get("windows"), list) else []
    counts = centroid.get("counts") if isinstance(centroid.get("counts"), list) else []
    rows: dict[str, Row] = {}
    for i, label in enumerate(labels):
        rows[label] = {
            "window": label,
            "posts": counts[i] if i < len(counts) else None,
            # the engines' matrices are indexed in the order of ``windows``
            "centroid_similarity_previous":
                _matrix_entry(cent_sim.get("matrix"), i, i - 1) if i else None,
            "pairwise_similarity_within": _matrix_entry(pair.get("matrix"), i, i),
            "pairwise_similarity_previous":
                _matrix_entry(pair.get("matrix"), i, i - 1) if i else None,
        }
    knn = next((v for k, v in sorted(details.items())
                if k.startswith("knn") and isinstance(v, dict) and "series" in v), {})
    empty = dict.fromkeys(("posts", "centroid_similarity_previous",
                           "pairwise_similarity_within", "pairwise_similarity_previous"))
    for s in knn.get("series") if isinstance(knn.get("series"), list) else []:
        if isinstance(s, dict) and isinstance(s.get("window"), str):
            row = rows.setdefault(s["window"], {"window": s["window"], **empty})
            row.update({"knn_similarity": s.get("mean"), "knn_posts": s.get("count"),
                        "knn_js_divergence": s.get("js_divergence")})
    out = [rows[k] for k in sorted(rows)]
    for row in out:
        for col in ("knn_similarity", "knn_posts", "knn_js_divergence"):
            row.setdefault(col, None)
    return out


def influence(details: Mapping[str, Any]) -> list[Row]:
    """One row per day of ``graph_days`` or ``pagerank_daily``."""
    graph = _section(details, "graph_days", dict)
    ranks = _section(details, "pagerank_daily", dict)
    ks = sorted({k for r in ranks.values() if isinstance(r, dict)
                 for k in _section(r, "top_mass", dict)}, key=int)
    rows = []
    for day in sorted(set(graph) | set(ranks)):
        g = graph.get(day) if isinstance(graph.get(day), dict) else {}
        r = ranks.get(day) if isinstance(ranks.get(day), dict) else {}
        mass = _section(r, "top_mass", dict)
        supernodes = r.get("supernodes") if isinstance(r.get("supernodes"), list) else None
        top = r.get("top") if isinstance(r.get("top"), list) and r.get("top") else [{}]
        rows.append({
            "day": day,
            "interactions": g.get("interactions"),
            "nodes": r.get("nodes", g.get("nodes")),
            "edges": r.get("edges", g.get("edges")),
            **{f"pagerank_top{k}_mass": mass.get(k) for k in ks},
            "supernodes": None if supernodes is None else len(supernodes),
            "supernode_names": None if supernodes is None else " ".join(map(str, supernodes)),
            "supernode_turnover_jaccard": r.get("supernode_turnover_jaccard"),
            "top_agent": top[0].get("agent"),
            "top_pagerank": top[0].get("pagerank"),
        })
    return rows


def threads(details: Mapping[str, Any]) -> list[Row]:
    """One row per day of ``threads_daily`` (posts of that day and their threads)."""
    daily = _section(details, "threads_daily", dict)
    return [{"day": day, **v} for day, v in sorted(daily.items()) if isinstance(v, dict)]


def cascades(details: Mapping[str, Any]) -> list[Row]:
    """One row per day on which a listed cascade started or a listed adoption happened."""
    listed = _section(details, "cascades", list)
    started: Counter[str] = Counter()
    largest: dict[str, int] = {}
    adoptions: Counter[str] = Counter()
    for c in listed:
        if not isinstance(c, dict):
            continue
        if day := _day(c.get("first")):
            started[day] += 1
            largest[day] = max(largest.get(day, 0), int(c.get("size") or 0))
        for a in c.get("adopters") if isinstance(c.get("adopters"), list) else []:
            if isinstance(a, dict) and (day := _day(a.get("time"))):
                adoptions[day] += 1
    return [{"day": day, "cascades_started": started.get(day, 0),
             "largest_started_size": largest.get(day), "adoptions_listed": adoptions.get(day, 0)}
            for day in sorted(set(started) | set(adoptions))]


def coverage(details: Mapping[str, Any]) -> list[Row]:
    """One row per day of ``coverage.days`` (posts created that day and their comments)."""
    days = _section(details, "coverage", dict).get("days")
    return [dict(d) for d in (days if isinstance(days, list) else [])
            if isinstance(d, dict) and isinstance(d.get("day"), str)]


BUILDERS: dict[str, Callable[[Mapping[str, Any]], list[Row]]] = {
    "activity": activity, "lexical": lexical, "semantic": semantic, "influence": influence,
    "threads": threads, "cascades": cascades, "coverage": coverage}


def day_tables(report: Mapping[str, Any]) -> dict[str, list[Row]]:
    """Every table of :data:`TABLES` from ``report`` (a replay report, or anything with the
    snapshot's ``details``; a bare details mapping works too)."""
    details = report.get("details", report)
    if not isinstance(details, Mapping):
        details = {}
    return {name: BUILDERS[name](details) for name in TABLES}
