"""The vector cache: originals embedded once, repeats derived, the cache survives a round trip."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag_core.errors import ConfigError
from rag_core.evaluation.vectors import (
    CachedEmbedder, embed_once, embedder_cache_file, load_cache, save_cache, text_key,
)


class CountingEmbedder(BaseEmbedding):
    """Plumbing only: a unit vector seeded by the text's hash (different texts differ), counting calls."""

    _calls: list = PrivateAttr(default_factory=list)

    def __init__(self, **kw: Any) -> None:
        super().__init__(model_name="counting", **kw)

    def _vec(self, text: str) -> list[float]:
        v = np.random.default_rng(int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)).normal(size=16)
        return (v / np.linalg.norm(v)).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        self._calls.append(text)
        return self._vec(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._calls.extend(texts)
        return [self._vec(t) for t in texts]

    def _get_query_embedding(self, query: str) -> list[float]:
        self._calls.append("query:" + query)
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def test_repeats_reuse_their_original_and_differ_slightly():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, {})
    base, v2, v3 = cached.get_text_embedding_batch(["alpha", "alpha [v2]", "alpha [v3]"])
    assert inner._calls == ["alpha"] and cached.misses == 1
    assert 0.95 < float(np.dot(base, v2)) < 1.0
    assert not np.allclose(v2, v3)
    assert np.allclose(v2, cached.get_text_embedding("alpha [v2]"))   # deterministic
    assert abs(np.linalg.norm(v2) - 1.0) < 1e-5


def test_a_cache_of_another_embedders_vectors_is_refused_and_each_embedder_has_its_file(tmp_path):
    other = {text_key("alpha"): np.ones(512, dtype=np.float32) / np.sqrt(512)}
    with pytest.raises(ConfigError, match="512-dimension vectors but the embedder gives 16"):
        CachedEmbedder(CountingEmbedder(), other)
    same = {text_key("alpha"): np.ones(16, dtype=np.float32) / 4}
    assert np.allclose(CachedEmbedder(CountingEmbedder(), same).get_text_embedding("alpha"), same[text_key("alpha")])
    files = {embedder_cache_file(tmp_path, "bench", name) for name in ("e5-small", "use-multilingual", "huggingface:a/b")}
    assert {f.name for f in files} == {"bench_e5_small.npz", "bench_use_multilingual.npz", "bench_huggingface_a_b.npz"}


def test_queries_go_to_the_real_model():
    inner = CountingEmbedder()
    CachedEmbedder(inner, {}).get_query_embedding("what")
    assert inner._calls == ["query:what"]


def test_embed_once_embeds_only_missing_texts_and_the_cache_round_trips(tmp_path):
    inner = CountingEmbedder()
    vectors: dict = {}
    first = embed_once(inner, ["a", "b", "a"], vectors)
    assert first.shape == (3, 16) and np.allclose(first[0], first[2])
    assert sorted(inner._calls) == ["a", "b"]
    embed_once(inner, ["b", "c"], vectors)
    assert sorted(inner._calls) == ["a", "b", "c"]
    save_cache(tmp_path / "v.npz", vectors)
    loaded = load_cache(tmp_path / "v.npz")
    assert set(loaded) == {text_key(t) for t in "abc"}
    assert np.allclose(loaded[text_key("c")], vectors[text_key("c")])
    assert load_cache(tmp_path / "missing.npz") == {}
