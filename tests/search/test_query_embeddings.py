"""The LRU of query vectors: one model call per (embedder, text), safe across threads, never shared mutably."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag_core.search.retrieval import QueryEmbeddingCache


class CountingEmbedder(BaseEmbedding):
    """Plumbing only: a distinct unit vector per text (and per `salt`), and a count of model calls."""

    salt: str = ""
    _calls: list = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _vector(self, text: str) -> list[float]:
        with self._lock:
            self._calls.append(text)
        seed = int.from_bytes(hashlib.sha256((self.salt + text).encode()).digest()[:4], "little")
        v = np.random.default_rng(seed).standard_normal(16)
        return (v / np.linalg.norm(v)).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


def test_a_repeated_query_is_embedded_once_and_the_vector_is_read_only() -> None:
    cache = QueryEmbeddingCache()
    model = CountingEmbedder(model_name="counting")
    first = cache.get(model, "fire alarm")
    again = cache.get(model, "fire alarm")
    other = cache.get(model, "fire door")
    assert model._calls == ["fire alarm", "fire door"]
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    with pytest.raises(ValueError):
        again[0] = 1.0  # a caller cannot change the vector the next caller gets


def test_embedders_of_other_models_do_not_share_entries() -> None:
    cache = QueryEmbeddingCache()
    a = CountingEmbedder(model_name="model-a")
    b = CountingEmbedder(model_name="model-b", salt="b")
    va, vb = cache.get(a, "same text"), cache.get(b, "same text")
    assert not np.array_equal(va, vb)
    assert a._calls == ["same text"] and b._calls == ["same text"]


def test_the_least_recently_used_entry_goes_first() -> None:
    cache = QueryEmbeddingCache(max_entries=2)
    model = CountingEmbedder(model_name="counting")
    cache.get(model, "one")
    cache.get(model, "two")
    cache.get(model, "one")      # "two" is now the oldest
    cache.get(model, "three")    # evicts "two"
    cache.get(model, "one")
    cache.get(model, "two")
    assert model._calls == ["one", "two", "three", "two"]


def test_threads_get_the_vector_of_their_own_text() -> None:
    cache = QueryEmbeddingCache(max_entries=64)
    model = CountingEmbedder(model_name="counting")
    texts = [f"query {i % 40}" for i in range(800)]
    expected = {t: np.asarray(CountingEmbedder(model_name="x")._vector(t), dtype=np.float32) for t in set(texts)}
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda t: (t, cache.get(model, t)), texts))
    assert all(np.allclose(v, expected[t]) for t, v in got)
    assert len(model._calls) < len(texts)  # repeats were answered from the cache
