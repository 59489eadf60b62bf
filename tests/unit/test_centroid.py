"""Centroid and pairwise similarity held against a plain NumPy computation of metrics.md A1.

The real-model check on real posts lives in test_knn.py (one encoding pass for both engines).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from streams.state.centroid import CentroidPartial, CentroidState, window_key

START = datetime(2026, 1, 28, tzinfo=UTC)


def stream(seed: int = 0, n: int = 600, days: int = 5, dim: int = 16):
    """Random vectors (not unit: the engine normalises) with drifting means, shuffled times."""
    rng = np.random.default_rng(seed)
    times = [START + timedelta(seconds=float(s)) for s in rng.uniform(0, days * 86400, n)]
    base = rng.normal(size=dim)
    vecs = np.array([base * (1 + (t - START).days) + rng.normal(size=dim) * 3 for t in times])
    return times, vecs


def batch_reference(keys: list[str], vecs: np.ndarray):
    """The published definitions, literally: centroids of unit vectors, all-pairs mean cosine."""
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    windows = sorted(set(keys))
    groups = {w: unit[[k == w for k in keys]] for w in windows}
    cent = {w: g.mean(axis=0) for w, g in groups.items()}
    m = len(windows)
    csim = np.empty((m, m))
    psim = np.empty((m, m))
    for i, a in enumerate(windows):
        for j, b in enumerate(windows):
            ca, cb = cent[a], cent[b]
            csim[i, j] = ca @ cb / (np.linalg.norm(ca) * np.linalg.norm(cb))
            cos = groups[a] @ groups[b].T
            if i == j:
                na = len(groups[a])
                psim[i, j] = (cos.sum() - np.trace(cos)) / (na * (na - 1)) if na > 1 else np.nan
            else:
                psim[i, j] = cos.mean()
    allc = unit.mean(axis=0)
    return windows, csim, psim, allc, cent


@pytest.mark.parametrize("window", ["day", "hour"])
def test_snapshot_matches_batch(window) -> None:
    times, vecs = stream(n=400 if window == "day" else 150, days=3 if window == "hour" else 5)
    st = CentroidState(window=window, dim=vecs.shape[1], matrix_windows=1000)
    for t, v in zip(times, vecs, strict=True):
        st.update(t, v)
    keys = [window_key(t, window) for t in times]
    windows, csim, psim, allc, cent = batch_reference(keys, vecs)
    snap = st.snapshot()
    d = snap.details
    assert d["centroid"]["windows"] == windows
    assert d["centroid"]["counts"] == [keys.count(w) for w in windows]
    got_c = np.array(d["centroid_similarity"]["matrix"], dtype=float)
    got_p = np.array(d["pairwise_similarity"]["matrix"], dtype=float)
    np.testing.assert_allclose(got_c, csim, atol=1e-9)
    np.testing.assert_allclose(got_p, psim, atol=1e-9)
    cur, prev = windows[-1], windows[-2]
    i = len(windows) - 1
    assert snap.value("centroid_similarity", vs="previous") == pytest.approx(csim[i, i - 1],
                                                                               abs=1e-9)
    vs_all = cent[cur] @ allc / (np.linalg.norm(cent[cur]) * np.linalg.norm(allc))
    assert snap.value("centroid_similarity", vs="all_time") == pytest.approx(vs_all, abs=1e-9)
    if not np.isnan(psim[i, i]):
        assert snap.value("pairwise_similarity", scope="within") == pytest.approx(psim[i, i],
                                                                                   abs=1e-9)
    assert snap.value("pairwise_similarity", scope="previous") == pytest.approx(psim[i, i - 1],
                                                                                 abs=1e-9)
    assert (d["centroid_similarity"]["current"], d["centroid_similarity"]["previous"]) == (cur,
                                                                                          prev)
    assert snap.value("embedded_posts_total") == len(vecs)
    json.dumps(snap.as_dict(), allow_nan=False)


def test_partials_from_partitions_add_up() -> None:
    times, vecs = stream(seed=1)
    whole = CentroidState(dim=vecs.shape[1])
    parts = [CentroidState(dim=vecs.shape[1]) for _ in range(3)]
    reducer = CentroidState(dim=vecs.shape[1])
    for i, (t, v) in enumerate(zip(times, vecs, strict=True)):
        whole.update(t, v)
        parts[i % 3].update(t, v)
        if i % 97 == 0:  # emit deltas now and then, through JSON as on the topic
            for p in parts:
                reducer.merge(CentroidPartial.from_dict(json.loads(json.dumps(
                    p.partial(reset=True).as_dict()))))
    for p in parts:
        reducer.merge(p.partial(reset=True))
        assert p.windows() == []
    a, b = whole.snapshot(), reducer.snapshot()
    assert a.details["centroid"]["counts"] == b.details["centroid"]["counts"]
    np.testing.assert_allclose(np.array(a.details["centroid_similarity"]["matrix"], dtype=float),
                               np.array(b.details["centroid_similarity"]["matrix"], dtype=float),
                               atol=1e-12)
    assert a.value("centroid_similarity", vs="all_time") == pytest.approx(
        b.value("centroid_similarity", vs="all_time"), abs=1e-12)
    with pytest.raises(ValueError):
        reducer.merge(CentroidState(window="hour", dim=vecs.shape[1]))


def test_expiry_bounds_windows_but_keeps_all_time() -> None:
    times, vecs = stream(seed=2, days=6)
    st = CentroidState(dim=vecs.shape[1], max_windows=3, matrix_windows=2)
    for t, v in sorted(zip(times, vecs, strict=True), key=lambda x: x[0]):
        st.update(t, v)
    assert len(st.windows()) == 3 and st.expired_windows == 3
    snap = st.snapshot()
    assert len(snap.details["centroid"]["windows"]) == 2
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    cur = st.windows()[-1]
    c = st.centroid(cur)
    allc = unit.mean(axis=0)
    expect = c @ allc / (np.linalg.norm(c) * np.linalg.norm(allc))
    assert snap.value("centroid_similarity", vs="all_time") == pytest.approx(expect, abs=1e-9)


def test_zero_vectors_and_single_post_windows() -> None:
    st = CentroidState(dim=2)
    st.update("2026-02-01", np.zeros(2))
    assert st.windows() == []
    st.update("2026-02-01", np.array([3.0, 4.0]))
    snap = st.snapshot()
    assert snap.value("pairwise_similarity", scope="within") is None
    assert snap.details["pairwise_similarity"]["within"] == {"2026-02-01": None}
    assert snap.value("centroid_similarity", vs="all_time") == pytest.approx(1.0)
