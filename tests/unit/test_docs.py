"""docs/metrics.md names every sample and detail the pipeline reports."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import numpy as np

from service.sources.simulate import SimulationConfig, Simulator
from streams.pipeline import Pipeline, PipelineConfig
from streams.replay import replay

DOC = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()


class RandomEmbedder:
    def encode_batch(self, texts: list[str]) -> np.ndarray:
        v = np.random.default_rng(len(texts)).normal(size=(len(texts), 384))
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_every_reported_name_is_documented() -> None:
    sim = Simulator(SimulationConfig(seed=2, agents=100, posts_per_hour=8,
                                     duration=timedelta(days=3)))
    # a one-day grace settles turnover days within the short run
    pipeline = Pipeline(PipelineConfig(ngram_grace_days=1))
    snap = replay(sim.events(), pipeline, embedder=RandomEmbedder()).pipeline.snapshot()
    documented = set(re.findall(r"`([a-z0-9_]+)`", DOC))
    names = {s.name for s in snap.samples} | set(snap.details)
    assert "ngram_birth_rate" in names  # a run long enough for settled turnover days
    assert names - documented == set()
