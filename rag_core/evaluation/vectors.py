"""Embeddings computed once and reused: a text -> vector cache and an embedder that reads it.

Benchmarks and the peer comparison embed each original text once; every later run (and every peer
system) gets the same vectors. A text marked " [vN]" (a benchmark's N-th repeat of a document) is
its original's vector plus small deterministic noise, so repeats cost no model time.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag_core.errors import ConfigError
from rag_core.providers.embeddings import embedding_dimension

REPEAT_MARKER = re.compile(r" \[v(\d+)\]")


def embedder_slug(embedder: str) -> str:
    """An embedder's name as a database or file name part: 'e5-small' -> 'e5_small'."""
    return re.sub(r"[^a-z0-9]+", "_", embedder.lower()).strip("_")


def text_key(text: str) -> str:
    """The cache key of a text (sha1 of its UTF-8 bytes)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class CachedEmbedder(BaseEmbedding):
    """Looks texts up in a text -> vector cache (embedding misses with `inner`); queries go to `inner`."""

    _inner: Any = PrivateAttr()
    _vectors: dict = PrivateAttr()
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _misses: int = PrivateAttr(default=0)

    def __init__(self, inner: BaseEmbedding, vectors: dict[str, np.ndarray], **kw: Any) -> None:
        super().__init__(model_name="bench-cache", **kw)
        if vectors:  # a cache is keyed by text alone: another embedder's vectors would be stored as this one's
            cached, own = len(next(iter(vectors.values()))), embedding_dimension(inner)
            if cached != own:
                raise ConfigError(f"The vector cache holds {cached}-dimension vectors but the embedder gives {own}: it "
                                  "was written by another embedder. Keep one cache file per embedder "
                                  "(embedder_cache_file) or delete this one.")
        self._inner = inner
        self._vectors = vectors

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedder"

    @property
    def misses(self) -> int:
        """How many distinct original texts had to be embedded by the inner model."""
        return self._misses

    def _one_batch(self, texts: list[str]) -> list[list[float]]:
        bases, variants = [], []
        for text in texts:
            found = REPEAT_MARKER.search(text)
            variants.append(int(found.group(1)) if found else 0)
            bases.append(REPEAT_MARKER.sub("", text))
        with self._lock:
            missing = sorted({b for b in bases if text_key(b) not in self._vectors})
            if missing:
                self._misses += len(missing)
                for b, v in zip(missing, self._inner.get_text_embedding_batch(missing)):
                    self._vectors[text_key(b)] = np.asarray(v, dtype=np.float32)
        out = []
        for base, variant in zip(bases, variants):
            vec = self._vectors[text_key(base)]
            if variant:
                seed = int(text_key(base)[:8], 16) ^ variant
                vec = vec + np.random.default_rng(seed).normal(0, 0.02, vec.shape).astype(np.float32)
                vec = vec / np.linalg.norm(vec)
            out.append(np.asarray(vec, dtype=np.float32).tolist())
        return out

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._one_batch(list(texts))

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._one_batch([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def embed_once(embedder: BaseEmbedding, texts: Sequence[str], vectors: dict[str, np.ndarray],
               batch: int = 64, progress: Any = None) -> np.ndarray:
    """Vectors of `texts` as one float32 matrix, embedding only those not yet in `vectors` (updated in place)."""
    missing = list(dict.fromkeys(t for t in texts if text_key(t) not in vectors))
    for start in range(0, len(missing), batch):
        part = missing[start:start + batch]
        for text, vec in zip(part, embedder.get_text_embedding_batch(part)):
            vectors[text_key(text)] = np.asarray(vec, dtype=np.float32)
        if progress:
            progress(min(start + batch, len(missing)), len(missing))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([vectors[text_key(t)] for t in texts]).astype(np.float32)


def embedder_cache_file(folder: Path, stem: str, embedder: str) -> Path:
    """`folder/<stem>_<embedder>.npz`: a vector cache holds one embedder's vectors, keyed by text only."""
    return folder / f"{stem}_{embedder_slug(embedder)}.npz"


def load_cache(path: Path) -> dict[str, np.ndarray]:
    """A vector cache written by save_cache (empty when the file does not exist)."""
    if not path.exists():
        return {}
    data = np.load(path)
    return {k: v for k, v in zip(data["keys"].tolist(), data["vectors"])}


def save_cache(path: Path, vectors: dict[str, np.ndarray]) -> None:
    """Write the cache as one .npz (keys and a float32 matrix)."""
    if not vectors:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted(vectors)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, keys=np.array(keys), vectors=np.stack([vectors[k] for k in keys]).astype(np.float32))
    tmp.replace(path)  # a run killed while writing leaves the previous cache intact
