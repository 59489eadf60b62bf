"""The per-day tables (streams/export.py) and their files (service/exports.py) hold exactly the
report's per-day series, on a replay of the real Moltbook sample."""

from __future__ import annotations

import csv
import json
import math
import zlib
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from service.exports import days_dir, write_day_tables
from service.sources.archive import open_archive
from streams.export import TABLES, day_tables
from streams.pipeline import Pipeline, PipelineConfig
from streams.replay import replay

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


class HashEmbedder:
    """Deterministic unit vectors from the text (no model): enough for the semantic tables."""

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(zlib.crc32(t.encode())).normal(size=384)
            out[i] = v / np.linalg.norm(v)
        return out


def _report(embed: bool, limit: int | None = None) -> dict[str, Any]:
    if not DATA.exists():
        pytest.skip(f"the Moltbook sample is missing: {DATA}")
    items = islice(open_archive([DATA]), limit)
    result = replay(items, Pipeline(PipelineConfig(embed=embed)),
                    embedder=HashEmbedder() if embed else None)
    return json.loads(json.dumps(result.report(), default=str))  # as written to r.json


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return _report(embed=False)


@pytest.fixture(scope="module")
def embedded_report() -> dict[str, Any]:
    return _report(embed=True, limit=3000)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    return a == b


def test_activity_threads_lexical_equal_the_series(report: dict[str, Any]) -> None:
    d = report["details"]
    t = day_tables(report)
    assert [r["day"] for r in t["activity"]] == [w["start"][:10] for w in d["activity"]["day"]]
    for row, w in zip(t["activity"], d["activity"]["day"], strict=True):
        assert {k: v for k, v in row.items() if k != "day"} == {
            k: v for k, v in w.items() if k != "start"}
    assert t["threads"] == [{"day": day, **v} for day, v in sorted(d["threads_daily"].items())]
    lexical = {(r["day"], r["n"]): r for r in t["lexical"]}
    series = d["ngrams"]["series"]
    assert len(lexical) == len(t["lexical"]) == sum(len(v) for v in series.values())
    for n, days in series.items():
        for s in days:
            assert lexical[(s["day"], int(n))] == {"n": int(n), **s}
    assert t["activity"] and t["threads"] and t["lexical"]


def test_influence_and_cascades_equal_the_details(report: dict[str, Any]) -> None:
    d = report["details"]
    t = day_tables(report)
    ranks = d["pagerank_daily"]
    assert [r["day"] for r in t["influence"]] == sorted(set(ranks) | set(d["graph_days"]))
    for row in t["influence"]:
        r = ranks.get(row["day"])
        if r is None:
            continue
        assert (row["nodes"], row["edges"]) == (r["nodes"], r["edges"])
        assert row["supernodes"] == len(r["supernodes"])
        assert row["supernode_names"].split(" ") == r["supernodes"]
        assert row["pagerank_top10_mass"] == r["top_mass"]["10"]
        assert row["top_agent"] == r["top"][0]["agent"]
    # batch recount of the listed cascades by the day of their first adoption
    listed = d["cascades"]
    assert sum(r["cascades_started"] for r in t["cascades"]) == len(listed) > 0
    assert sum(r["adoptions_listed"] for r in t["cascades"]) == sum(
        len(c["adopters"]) for c in listed)
    for row in t["cascades"]:
        sizes = [c["size"] for c in listed if c["first"][:10] == row["day"]]
        assert row["largest_started_size"] == (max(sizes) if sizes else None)


def test_semantic_equals_the_engines_matrices(embedded_report: dict[str, Any]) -> None:
    d = embedded_report["details"]
    rows = day_tables(embedded_report)["semantic"]
    labels = d["centroid"]["windows"]
    assert len(labels) >= 2, "the sample should span several semantic windows"
    knn = {s["window"]: s for s in d["knn10"]["series"]}
    assert [r["window"] for r in rows] == sorted(set(labels) | set(knn))
    by = {r["window"]: r for r in rows}
    for i, label in enumerate(labels):
        r = by[label]
        assert r["posts"] == d["centroid"]["counts"][i]
        assert r["pairwise_similarity_within"] == d["pairwise_similarity"]["within"][label]
        if i:
            assert r["centroid_similarity_previous"] == d["centroid_similarity"]["matrix"][i][i - 1]
            assert r["pairwise_similarity_previous"] == d["pairwise_similarity"]["matrix"][i][i - 1]
    for w, s in knn.items():
        assert (by[w]["knn_similarity"], by[w]["knn_posts"], by[w]["knn_js_divergence"]) == (
            s["mean"], s["count"], s["js_divergence"])


def test_files_round_trip(report: dict[str, Any], tmp_path: Path) -> None:
    out = days_dir(tmp_path / "r.json")
    assert out == tmp_path / "r.days"
    written = write_day_tables(report, out)
    tables = day_tables(report)
    assert set(written) == set(TABLES) and written == {k: len(v) for k, v in tables.items()}
    for name, rows in tables.items():
        parquet = pq.read_table(out / f"{name}.parquet").to_pylist()
        assert len(parquet) == len(rows)
        for got, want in zip(parquet, rows, strict=True):
            assert list(got) == list(want)
            assert all(_same(got[k], want[k]) for k in want), (name, got, want)
        with (out / f"{name}.csv").open() as f:
            text = list(csv.DictReader(f))
        assert len(text) == len(rows)
        for got_csv, want in zip(text, rows, strict=True):
            for k, v in want.items():
                if v is None:
                    assert got_csv[k] == ""
                elif isinstance(v, bool):
                    assert got_csv[k] == str(v).lower()
                elif isinstance(v, int | float):
                    assert math.isclose(float(got_csv[k]), v, rel_tol=1e-12)
                else:
                    assert got_csv[k] == str(v)


@pytest.mark.parametrize("details", [
    {}, {"activity": None, "ngrams": {"series": None}, "centroid": [], "knn10": {"series": 3},
         "pagerank_daily": {"2026-01-30": None}, "threads_daily": {"x": 1},
         "cascades": [None, {"first": None, "adopters": [{"time": 5}]}]},
])
def test_missing_or_odd_sections_give_empty_tables(details: dict[str, Any],
                                                   tmp_path: Path) -> None:
    tables = day_tables({"details": details})
    assert set(tables) == set(TABLES)
    assert all(rows == [] for name, rows in tables.items() if name != "influence")
    assert write_day_tables({"details": details}, tmp_path)["activity"] == 0
    assert (tmp_path / "semantic.csv").exists() and (tmp_path / "semantic.parquet").exists()


def test_replay_cli_writes_the_tables_next_to_the_report(tmp_path: Path) -> None:
    from service.cli import main

    posts = sorted((DATA / "api" / "posts").glob("*.json"))[:40]
    if not posts:
        pytest.skip(f"the Moltbook sample is missing: {DATA}")
    out = tmp_path / "r.json"
    assert main(["replay", *map(str, posts), "--report", str(out), "--no-embed"]) == 0
    report = json.loads(out.read_text())
    tables = day_tables(report)
    assert tables["activity"] and tables["threads"]
    for name, rows in tables.items():
        assert pq.read_table(tmp_path / "r.days" / f"{name}.parquet").to_pylist() == rows
    assert main(["replay", *map(str, posts), "--report", str(tmp_path / "s.json"),
                 "--no-embed", "--no-tables"]) == 0
    assert not (tmp_path / "s.days").exists()
