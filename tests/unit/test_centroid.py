"""Centroid and pairwise similarity held against a plain NumPy computation of metrics.md A1.

The real-model check on real posts lives in test_knn.py (one encoding pass for both engines);
here the real posts of ../shared/data/moltbook carry random unit vectors.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from service.sources.archive import open_archive
from streams.events import CommentEvent, PostEvent
from streams.state.base import Item
from streams.state.centroid import (
    CentroidState,
    cosine,
    cosine_matrix,
    window_label,
    window_of,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


def window_key(t: datetime, window: str = "day") -> str:
    return window_label(window_of(t.timestamp(), window), window)  # type: ignore[arg-type]

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
        st.add(t.timestamp(), v)
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


def test_real_posts_full_day_matrices_through_items() -> None:
    """Every real post of the shared data (random unit vectors), fed as the pipeline feeds it:
    the full day-by-day matrices equal the batch definitions to 1e-9; comments, excluded posts
    and posts without a vector are not read."""
    rng = np.random.default_rng(5)
    posts = [e for e in open_archive([str(DATA)]) if isinstance(e, PostEvent)]
    assert len(posts) > 1000
    vecs = rng.normal(size=(len(posts), 384))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    st = CentroidState()
    for e, v in zip(posts, vecs, strict=True):
        st.update(Item.of(e, v))
        excluded = Item.of(e, -v)
        excluded.admitted = False  # as the verbatim filter marks a copy: ignored
        st.update(excluded)
    keys = [window_key(e.event_time) for e in posts]
    windows, csim, psim, _, _ = batch_reference(keys, vecs)
    assert len(windows) > 20
    d = st.snapshot().details
    assert d["centroid"]["windows"] == windows
    np.testing.assert_allclose(np.array(d["centroid_similarity"]["matrix"], dtype=float), csim,
                               atol=1e-9)
    np.testing.assert_allclose(np.array(d["pairwise_similarity"]["matrix"], dtype=float), psim,
                               atol=1e-9)


def test_only_admitted_post_vectors_count() -> None:
    t = datetime(2026, 2, 1, tzinfo=UTC)
    post = PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1", author="a")
    comment = CommentEvent(id="comment:1", event_time=t, observed_at=t, comment_id="1",
                           post_id="1", author="b")
    st = CentroidState(dim=2)
    st.update(Item.of(post))
    st.update(Item.of(comment, np.array([1.0, 0.0])))
    st.update(Item(post, t.timestamp(), "a", None, np.array([1.0, 0.0]), admitted=False))
    assert st.windows() == []
    st.update(Item.of(post, np.array([0.0, 3.0])))
    assert st.windows() == ["2026-02-01"] and st.count("2026-02-01") == 1


def test_cosine_helpers_match_numpy() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 7)), rng.normal(size=(3, 7))
    want = np.array([[x @ y / (np.linalg.norm(x) * np.linalg.norm(y)) for y in b] for x in a])
    np.testing.assert_allclose(cosine_matrix(a, b), want, atol=1e-12)
    assert cosine(a[0], b[1]) == pytest.approx(want[0, 1], abs=1e-12)
    assert np.isnan(cosine(np.zeros(7), b[0]))
    assert np.isnan(cosine_matrix(np.zeros((1, 7)), b)).all()


def test_expiry_bounds_windows_but_keeps_all_time() -> None:
    times, vecs = stream(seed=2, days=6)
    st = CentroidState(dim=vecs.shape[1], max_windows=3, matrix_windows=2)
    for t, v in sorted(zip(times, vecs, strict=True), key=lambda x: x[0]):
        st.add(t.timestamp(), v)
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
    t = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    st.add(t, np.zeros(2))
    assert st.windows() == []
    st.add(t, np.array([3.0, 4.0]))
    snap = st.snapshot()
    assert snap.value("pairwise_similarity", scope="within") is None
    assert snap.details["pairwise_similarity"]["within"] == {"2026-02-01": None}
    assert snap.value("centroid_similarity", vs="all_time") == pytest.approx(1.0)
