"""A query prepared once: its language, Japanese bigrams, text-search configs and vector, computed when first
needed and shared by ranking, highlights, suggestions and chat's term-coverage check."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property

import numpy as np

from rag_core.textproc import FTS_CONFIG, cjk_bigrams, detect_language

_CJK_RUN = re.compile("[\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F]+")
HIRAGANA_ONLY = re.compile(r"^[\u3040-\u309F]+$")

# Query vectors computed beside a semantic search's planner (a hybrid search embeds on its own thread while a
# helper ranks the full text: hybrid._front); a query whose turn has not come is embedded by its own search
# instead, so the pool never makes a search wait.
_EMBEDDERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rag-query-vector")


class PreparedQuery:
    """One query's text and what every search step derives from it, each computed once.

    `embed` gives the query's vector (called at most once, on first use of `vector`); `lexemes` holds the
    query lexemes a search statement found in its scope, for the highlights of that search.
    """

    def __init__(self, text: str, embed: Callable[[str], np.ndarray] | None = None) -> None:
        self.text = text
        self._embed = embed
        self._vector: np.ndarray | None = None
        self._configs: dict[frozenset[str], tuple[list[str], list[str]]] = {}
        self._lock = threading.Lock()
        self._pending: Future[np.ndarray] | None = None
        self.lexemes: list[str] = []
        # Milliseconds a search spent waiting for the vector (the query log's "embed" stage).
        self.waited_ms = 0.0

    def __repr__(self) -> str:
        return f"PreparedQuery({self.text!r}, language={self.language!r})"

    @cached_property
    def language(self) -> str:
        """The query's detected language ("en", "ru", "ja" or "other")."""
        return detect_language(self.text)

    @cached_property
    def bigrams(self) -> str:
        """The query as Japanese chunks are indexed: runs of CJK characters as overlapping bigrams."""
        return cjk_bigrams(self.text)

    @cached_property
    def highlight_bigrams(self) -> frozenset[str]:
        """The CJK bigrams a Japanese highlight marks (particle-only ones dropped)."""
        return frozenset(t for t in self.bigrams.split()
                         if _CJK_RUN.fullmatch(t) and (len(t) == 2 or not HIRAGANA_ONLY.match(t)))

    def text_for(self, config: str) -> str:
        """The query as given to a text-search config: bigrams under 'simple' (Japanese), else the text."""
        return self.bigrams if config == "simple" else self.text

    def text_for_language(self, language: str | None) -> str:
        """The query as matched against a chunk of this language."""
        return self.bigrams if language == "ja" else self.text

    def configs(self, languages_in_use: Sequence[str]) -> tuple[list[str], list[str]]:
        """(text-search configs, query text for each): the query's language plus every language stored.

        A Russian query against Russian chunks is stemmed with 'russian' whatever the server's
        default_text_search_config; in a mixed site its lexemes are OR-ed under each config in use.
        Japanese chunks are indexed as character bigrams under 'simple', so the query is bigrammed too.
        """
        key = frozenset(lang for lang in languages_in_use if lang)
        found = self._configs.get(key)
        if found is None:
            langs = set(key)
            if self.language != "other":
                langs.add(self.language)
            if not langs:
                langs = {"other"}
            configs = sorted({FTS_CONFIG.get(lang, "simple") for lang in langs})
            found = self._configs[key] = (configs, [self.text_for(cfg) for cfg in configs])
        return list(found[0]), list(found[1])

    def start_vector(self) -> None:
        """Begin computing the vector in the background, so the database works on the full text meanwhile."""
        with self._lock:
            if self._vector is None and self._embed is not None and self._pending is None:
                self._pending = _EMBEDDERS.submit(self._embed, self.text)

    @property
    def vector_pending(self) -> bool:
        """True while `vector` would have to compute the embedding: none computed, none started."""
        return self._vector is None and self._embed is not None and self._pending is None

    @property
    def vector(self) -> np.ndarray | None:
        """The query's embedding, computed on first use (None when prepared without an embedder)."""
        if self._vector is None and self._embed is not None:
            started = time.perf_counter()
            with self._lock:
                if self._vector is None:
                    pending, self._pending = self._pending, None
                    # Not started yet (the pool busy with other searches' vectors): computed here instead.
                    if pending is None or pending.cancel():
                        self._vector = self._embed(self.text)
                    else:
                        self._vector = pending.result()
            self.waited_ms += (time.perf_counter() - started) * 1000
        return self._vector


def prepared(query: str | PreparedQuery, vector: np.ndarray | None = None) -> PreparedQuery:
    """`query` itself when already prepared, else a PreparedQuery of the text (with `vector`, when given)."""
    if isinstance(query, PreparedQuery):
        return query
    out = PreparedQuery(query)
    out._vector = vector
    return out
