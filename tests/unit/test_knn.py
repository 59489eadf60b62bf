"""10-NN tightening held against exact kNN by matrix product (and, on real posts, centroids)."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from streams.embedding import (
    Embedder,
    cosine_error_bound,
    dequantise,
    load_model,
    quantise,
)
from streams.state.centroid import CentroidState, window_label, window_of
from streams.state.knn import KnnState, js_divergence

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


def ts(day: str) -> float:
    """Unix time of the start of a UTC day 'YYYY-MM-DD'."""
    return datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()


def window_key(t: datetime) -> str:
    return window_label(window_of(t.timestamp()))


def reference_s10(vecs: np.ndarray, k: int = 10) -> np.ndarray:
    """S_k by brute force in float64: full cosine matrix, self excluded, mean of the k largest."""
    unit = vecs.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    kk = min(k, len(vecs) - 1)
    if kk < 1:
        return np.empty(0)
    return -np.sort(-sims, axis=1)[:, :kk].mean(axis=1)


def clustered(rng: np.random.Generator, n: int, dim: int = 24, spread: float = 0.6) -> np.ndarray:
    centres = rng.normal(size=(5, dim))
    return centres[rng.integers(0, 5, n)] + spread * rng.normal(size=(n, dim))


@pytest.mark.parametrize("batch", [1, 64])
def test_incremental_equals_batch_exact_knn(batch) -> None:
    rng = np.random.default_rng(0)
    days = {"2026-02-01": clustered(rng, 700), "2026-02-02": clustered(rng, 7),
            "2026-02-03": clustered(rng, 1), "2026-02-04": clustered(rng, 333)}
    st = KnnState(dim=24, open_windows=10, batch=batch)
    for key, vecs in days.items():  # uneven batches, some bigger than the internal block
        i = 0
        while i < len(vecs):
            b = int(rng.choice([1, 3, 64, 300]))
            st.add_many(ts(key), vecs[i:i + b])
            i += b
    for key, vecs in days.items():
        np.testing.assert_allclose(st.values(key), reference_s10(vecs), atol=1e-6)
    snap = st.snapshot()
    d = snap.details["knn10"]
    assert d["windows"]["2026-02-03"]["count"] == 0  # a lone post has no neighbour
    edges = np.linspace(0, 1, 51)
    hists = {}
    for key, vecs in days.items():
        ref = reference_s10(vecs)
        got = d["windows"][key]
        assert got["count"] == len(ref)
        if len(ref):
            assert got["mean"] == pytest.approx(ref.mean(), abs=1e-6)
            for q, v in got["quantiles"].items():
                assert v == pytest.approx(np.quantile(ref, float(q)), abs=1e-6)
            hists[key] = np.histogram(np.clip(ref, 0, 1), bins=edges)[0]
            assert got["histogram"] == hists[key].tolist()
    # JSD between consecutive non-empty windows, against scipy (squared JS distance, base 2)
    assert set(d["js_divergence"]) == {"2026-02-02", "2026-02-04"}
    expect = jensenshannon(hists["2026-02-02"], hists["2026-02-04"], base=2) ** 2
    assert d["js_divergence"]["2026-02-04"] == pytest.approx(expect, abs=1e-9)
    assert snap.value("knn10_similarity") == pytest.approx(reference_s10(days["2026-02-04"])
                                                           .mean(), abs=1e-6)
    assert snap.value("knn10_js_divergence") == pytest.approx(expect, abs=1e-9)
    json.dumps(snap.as_dict(), allow_nan=False)


def test_closing_windows_bounds_memory_and_counts_late_posts() -> None:
    rng = np.random.default_rng(1)
    st = KnnState(dim=8, open_windows=2, max_per_window=150)
    batches = {f"2026-02-0{i}": clustered(rng, 120, dim=8) for i in range(1, 6)}
    for key, vecs in batches.items():
        st.add_many(ts(key), vecs)
    assert len(st._open) == 2 and st.nbytes() == 2 * 120 * (8 + 10 + 1) * 4  # dim + k + 1
    st.add_many(ts("2026-02-01"), batches["2026-02-01"][:5])  # a closed day: late
    st.add_many(ts("2026-02-05"), clustered(rng, 40, dim=8))  # 10 over the cap
    sums = st.summaries()
    assert (st.late_total, st.skipped_total) == (5, 10)
    assert sums["2026-02-01"].closed and not sums["2026-02-05"].closed
    assert sums["2026-02-02"].mean == pytest.approx(reference_s10(batches["2026-02-02"]).mean(),
                                                    abs=1e-6)


def test_expire_by_time_closes_quiet_windows() -> None:
    rng = np.random.default_rng(3)
    st = KnnState(dim=8, open_windows=2)
    st.add_many(ts("2026-02-01"), clustered(rng, 30, dim=8))
    st.expire(datetime(2026, 2, 2, 12, tzinfo=UTC).timestamp())  # 02-01 is yesterday: still open
    assert not st.summaries()["2026-02-01"].closed
    st.expire(datetime(2026, 2, 3, 0, 5, tzinfo=UTC).timestamp())
    assert st.summaries()["2026-02-01"].closed and st.nbytes() == 0
    st.add_many(ts("2026-01-31"), clustered(rng, 3, dim=8))  # older than a closed window
    assert st.late_total == 3
    hourly = KnnState(dim=8, window="hour", open_windows=1)
    hourly.add(datetime(2026, 2, 1, 5, 59, tzinfo=UTC).timestamp(), np.ones(8))
    hourly.expire(datetime(2026, 2, 1, 6, 0, tzinfo=UTC).timestamp())
    assert hourly.summaries()["2026-02-01T05"].closed


def test_js_divergence_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        p, q = rng.integers(0, 9, 50), rng.integers(0, 9, 50)
        assert js_divergence(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-12)


def real_posts() -> list[tuple[datetime, str]]:
    """200 real posts: the 158 archived API answers (spread over many days) + 42 from the CSV."""
    out: list[tuple[datetime, str]] = []
    for f in sorted((DATA / "api" / "posts").glob("*.json")):
        post = json.loads(f.read_text())["post"]
        text = f"{post.get('title') or ''}\n{post.get('content') or ''}".strip()
        out.append((datetime.fromisoformat(post["created_at"]).astimezone(UTC), text))
    with (DATA / "observatory-sample" / "moltbook_posts.csv").open(newline="") as fh:
        for row in list(csv.DictReader(fh))[:200 - len(out)]:
            out.append((datetime.fromisoformat(row["created_at"]).astimezone(UTC),
                        f"{row['title']}\n{row['content']}".strip()))
    return sorted(out, key=lambda x: x[0])


@pytest.fixture(scope="module")
def real_vectors() -> tuple[list[str], np.ndarray]:
    posts = real_posts()
    vecs = Embedder(load_model()).encode_batch([t for _, t in posts])
    return [window_key(t) for t, _ in posts], vecs


def test_real_posts_centroid_and_knn_against_numpy(real_vectors) -> None:
    keys, vecs = real_vectors
    assert len(keys) == 200 and len(set(keys)) > 20
    cent, knn = CentroidState(), KnnState(open_windows=400)
    for key, v in zip(keys, vecs, strict=True):  # one event at a time, in time order
        cent.add(ts(key), v)
        knn.add(ts(key), v)
    windows = sorted(set(keys))
    groups = {w: vecs[[k == w for k in keys]].astype(np.float64) for w in windows}
    # centroid-similarity matrix and pairwise similarities by plain NumPy
    c = np.stack([g.mean(axis=0) for g in groups.values()])
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    snap = cent.snapshot()
    np.testing.assert_allclose(np.array(snap.details["centroid_similarity"]["matrix"], dtype=float),
                               c @ c.T, atol=1e-6)
    big = [w for w in windows if len(groups[w]) > 20]
    for a in big:
        for b in big:
            cos = groups[a] @ groups[b].T
            want = ((cos.sum() - np.trace(cos)) / (len(cos) * (len(cos) - 1)) if a == b
                    else cos.mean())
            assert cent.pairwise_similarity(a, b) == pytest.approx(want, abs=1e-6)
    # the paper's regime: pairwise far below centroid similarity ("stable centre, diverse edges")
    a, b = big[-2], big[-1]
    assert cent.pairwise_similarity(a, b) < 0.5 < cent.centroid_similarity(a, b)
    for w in windows:
        np.testing.assert_allclose(knn.values(w), reference_s10(groups[w]), atol=1e-6)


@pytest.mark.parametrize("codec", ["float16", "int8"])
def test_engines_on_decoded_wire_vectors_stay_within_codec_bound(real_vectors, codec) -> None:
    """What the stateful agents see is the topic's decoded vector. A decoded unit vector moves
    by at most e = cosine_error_bound (see its proof), so a pair cosine by e(a) + e(b): pairwise
    means and S_10 move by at most 2 max e. A window's mean vector c moves by at most e, its
    direction by 2 e / |c|, so a centroid similarity by 2 e / |c_a| + 2 e / |c_b|."""
    keys, vecs = real_vectors
    qs = [quantise(v, codec) for v in vecs]
    dec = np.stack([dequantise(q) for q in qs])
    e = max(cosine_error_bound(q) for q in qs)
    exact, wire = (CentroidState(), KnnState(open_windows=400)), (CentroidState(),
                                                                   KnnState(open_windows=400))
    for key, v, w in zip(keys, vecs, dec, strict=True):
        for st, x in ((exact, v), (wire, w)):
            st[0].add(ts(key), x)
            st[1].add(ts(key), x)
    windows = exact[0].windows()
    norms = {w: float(np.linalg.norm(exact[0].centroid(w))) for w in windows}
    for a in windows:
        np.testing.assert_allclose(wire[1].values(a), exact[1].values(a), atol=2 * e)
        for b in windows:
            got, want = wire[0].pairwise_similarity(a, b), exact[0].pairwise_similarity(a, b)
            if want is not None:
                assert abs(got - want) <= 2 * e
            bound = 2 * e / norms[a] + 2 * e / norms[b]
            diff = abs(wire[0].centroid_similarity(a, b) - exact[0].centroid_similarity(a, b))
            assert diff <= bound
