"""The optional rerank stage behind the provider seam."""

from __future__ import annotations

from typing import Sequence

import pytest

from rag_core.errors import ConfigError
from rag_core.providers import rerankers
from rag_core.providers.rerankers import CrossEncoderReranker, build_reranker
from rag_core.search.service import SearchEngine


class ByLength:
    """Prefers the shortest passage: an order no retrieval score would produce."""

    name = "by-length"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [-float(len(p)) for p in passages]


def test_none_is_off_and_names_pick_registry_entries(make_settings) -> None:
    assert build_reranker(make_settings()) is None
    assert build_reranker(make_settings(reranker="none")) is None
    assert isinstance(build_reranker(make_settings(reranker="cross-encoder:/models/x")), CrossEncoderReranker)
    assert build_reranker(make_settings(reranker="org/some-model")).model_path == "org/some-model"


def test_missing_model_is_a_config_error_naming_the_fix(make_settings, tmp_path) -> None:
    reranker = build_reranker(make_settings(reranker=str(tmp_path / "no-model-here")))
    with pytest.raises(ConfigError) as info:
        reranker.score("q", ["p"])
    assert "RAG_RERANKER" in info.value.message and "RAG_RERANKER=none" in info.value.message


def test_rerank_stage_reorders_documents(wb, corpus_site, make_settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rerankers.RERANKERS, "by-length", lambda settings, model: ByLength())
    engine = SearchEngine(wb.db, make_settings(reranker="by-length"), lambda: wb.embedder, lambda: None)
    plain = wb.search_engine.search("fire safety of buildings", site_id=corpus_site, limit=5, use_cache=False)
    reranked = engine.search("fire safety of buildings", site_id=corpus_site, limit=5, use_cache=False)
    lengths = [len(r["context_chunks"][0]["text"]) for r in reranked["results"]]
    assert lengths == sorted(lengths) and "rerank_score" in reranked["results"][0]
    assert reranked["total_results"] == plain["total_results"]
    assert [r["file_path"] for r in reranked["results"]] != [r["file_path"] for r in plain["results"]]


class LoadsOnce(ByLength):
    """A reranker whose model loads on first use, as a CrossEncoder does; it counts its loads and when they come."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def load(self) -> "LoadsOnce":
        if "load" not in self.events:
            self.events.append("load")
        return self

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.load()
        self.events.append("score")
        return super().score(query, passages)


def test_the_reranker_model_is_loaded_with_the_embedder_before_the_first_search(
        wb, corpus_site, make_settings, monkeypatch: pytest.MonkeyPatch) -> None:
    reranker = LoadsOnce()
    monkeypatch.setitem(rerankers.RERANKERS, "loads-once", lambda settings, model: reranker)
    engine = SearchEngine(wb.db, make_settings(reranker="loads-once"), lambda: wb.embedder, lambda: None)
    engine.load_model()  # what a service does before it serves, and a first search before its clock starts
    assert reranker.events == ["load"]
    engine.search("fire safety of buildings", site_id=corpus_site, limit=5, use_cache=False)
    assert reranker.events == ["load", "score"]


def test_a_service_whose_reranker_cannot_load_starts_and_says_why(make_settings, tmp_path, caplog) -> None:
    import logging

    from rag_core import open_workbench
    from rag_core.api.rest import _warm_up

    with open_workbench(make_settings(reranker=str(tmp_path / "no-model-here"))) as wb:
        with caplog.at_level(logging.WARNING, logger="rag_core.api.rest"):
            _warm_up(wb)  # logs instead of raising: the service still starts
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "reranker" in warning and "RAG_RERANKER" in warning, warning
