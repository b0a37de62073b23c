"""A query prepared once and searched many times: the same hits as the string, its language, bigrams and
vector made once, whatever the number of searches, highlights and coverage checks that use it."""

from __future__ import annotations

import pytest

from rag_core.search import query as query_module
from rag_core.search.hybrid import term_coverage
from rag_core.search.query import PreparedQuery
from rag_core.search.retrieval import QUERY_EMBEDDINGS


def _view(response: dict) -> list:
    return [(r["file_path"], r["score"], r["highlights"], [c["chunk_id"] for c in r["context_chunks"]])
            for r in response["results"]]


@pytest.mark.parametrize("text", ["fire alarm systems", "пожарной сигнализации", "富士山の標高"])
def test_a_prepared_query_finds_what_its_text_finds(wb, corpus_site: str, text: str) -> None:
    engine = wb.search_engine
    prepared = engine.prepare(text)
    for mode in ("hybrid", "semantic", "fulltext"):
        by_text = engine.search(text, mode=mode, site_id=corpus_site, use_cache=False)
        by_prepared = engine.search(prepared, mode=mode, site_id=corpus_site, use_cache=False)
        assert _view(by_prepared) == _view(by_text) and by_prepared["results"], mode
        assert by_prepared["query"] == text
    hits = engine.retrieve(prepared, k=3, site_id=corpus_site)
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in wb.retrieve(text, k=3, site_id=corpus_site)]
    assert term_coverage(wb.reads, prepared, hits) == term_coverage(wb.reads, text, hits)


def test_a_chat_turns_searches_prepare_the_query_once(wb, corpus_site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four searches, their highlights and a coverage check on one prepared query: one language detection, one
    bigram pass, one embedding (the vector cache is cleared first, so the count is the model's)."""
    detected, bigrammed, embedded = [], [], []
    monkeypatch.setattr(query_module, "detect_language", lambda t: detected.append(t) or "ja")
    real_bigrams = query_module.cjk_bigrams
    monkeypatch.setattr(query_module, "cjk_bigrams", lambda t: bigrammed.append(t) or real_bigrams(t))
    QUERY_EMBEDDINGS.clear()
    engine = wb.search_engine
    model = wb.embedder

    def embed(text: str):
        embedded.append(text)
        return model.get_query_embedding(text)

    prepared = PreparedQuery("梅雨の時期", embed)
    for mode in ("hybrid", "semantic", "fulltext", "hybrid"):
        engine.search(prepared, mode=mode, site_id=corpus_site, use_cache=False)
    hits = engine.retrieve(prepared, k=2, site_id=corpus_site)
    assert hits and hits[0].source == "ja/tsuyu.md"
    term_coverage(wb.reads, prepared, hits)
    assert (len(detected), len(bigrammed), len(embedded)) == (1, 1, 1)


def test_a_fulltext_search_never_embeds_the_prepared_query(wb, corpus_site: str) -> None:
    calls = []
    prepared = PreparedQuery("fire doors", lambda t: calls.append(t))
    response = wb.search_engine.search(prepared, mode="fulltext", site_id=corpus_site, use_cache=False)
    assert response["results"][0]["file_path"] == "en/fire.md" and calls == []
