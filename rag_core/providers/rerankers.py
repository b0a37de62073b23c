"""Rerankers: an optional stage after retrieval, a registry keyed by name (RAG_RERANKER).

`none` (the default) turns the stage off: no cross-encoder with weights installs offline from
PyPI. Any other value names a sentence-transformers CrossEncoder by model id or local path
(`cross-encoder:<id or path>`, or the id or path alone).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from rag_core.errors import ConfigError
from rag_core.settings import RagSettings


class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant."""

    name: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder (torch; imported on first use, it is slow to import)."""

    def __init__(self, model: str) -> None:
        self.name = f"cross-encoder:{model}"
        self.model_path = model
        self._model: Any = None
        self._lock = threading.Lock()

    def _fix(self) -> str:
        return ("give a local folder holding a cross-encoder model (or a model id already in the Hugging Face "
                "cache), or set RAG_RERANKER=none to search without reranking.")

    def load(self) -> "CrossEncoderReranker":
        """Load the model now; a missing model or library raises ConfigError naming the fix."""
        with self._lock:
            if self._model is not None:
                return self
            path = os.path.expanduser(self.model_path)
            if path.startswith((".", "/", "~", "\\")) and not Path(path).exists():
                raise ConfigError(f"RAG_RERANKER model '{self.model_path}' does not exist; {self._fix()}")
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise ConfigError(
                    "RAG_RERANKER needs sentence-transformers and torch; install them with "
                    "`.venv/bin/pip install -e '.[torch]'`, or set RAG_RERANKER=none."
                ) from exc
            try:
                self._model = CrossEncoder(path, device="cpu", local_files_only=os.path.exists(path)
                                           or os.environ.get("HF_HUB_OFFLINE") == "1")
            except Exception as exc:  # OSError, HF validation and connection errors alike
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ConfigError(f"Cannot load the RAG_RERANKER model '{self.model_path}': {first}. {self._fix()}") from exc
            return self

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        model = self.load()._model
        return [float(s) for s in model.predict([(query, p) for p in passages], show_progress_bar=False)]


def _none(settings: RagSettings, model: str) -> Reranker | None:
    return None


def _cross_encoder(settings: RagSettings, model: str) -> Reranker | None:
    if not model:
        raise ConfigError("RAG_RERANKER=cross-encoder needs a model: cross-encoder:<model id or local path>.")
    return CrossEncoderReranker(model)


RERANKERS: dict[str, Callable[[RagSettings, str], Reranker | None]] = {
    "none": _none,                    # off (default): offline there is no packaged cross-encoder
    "cross-encoder": _cross_encoder,  # sentence-transformers CrossEncoder by model id or local path
}


def build_reranker(settings: RagSettings) -> Reranker | None:
    """The configured reranker, or None when reranking is off."""
    value = (settings.reranker or "").strip()
    if not value or value.lower() == "none":
        return None
    name, sep, rest = value.partition(":")
    if sep and name.lower() in RERANKERS:
        return RERANKERS[name.lower()](settings, rest.strip())
    if value.lower() in RERANKERS:
        return RERANKERS[value.lower()](settings, "")
    return RERANKERS["cross-encoder"](settings, value)
