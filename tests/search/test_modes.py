"""Each mode finds what it should in English, Russian (word forms) and Japanese; hybrid keeps both ranks."""

from __future__ import annotations

import re

import pytest

from rag_core.chat.context import top_chunks
from rag_core.errors import InvalidQuery


def paths(response: dict) -> list[str]:
    return [r["file_path"] for r in response["results"]]


def marked(result: dict) -> list[str]:
    """The highlighted terms of a result."""
    return [text[s:e] for text, spans in zip(result["highlights"], result["highlight_spans"]) for s, e in spans]


def test_fulltext_english_ranks_the_matching_document_first(wb, corpus_site) -> None:
    response = wb.search("fire alarm requirements", mode="fulltext", site_id=corpus_site)
    assert response["success"] is True
    assert paths(response)[0] == "en/fire.md"
    top = response["results"][0]
    assert top["fulltext_rank"] == 1 and top["dense_rank"] is None
    assert {"fire", "alarm"} <= {t.lower() for t in marked(top)}
    assert "en/budget.md" not in paths(response)  # shares no term with the query


@pytest.mark.parametrize("query", ["пожарная сигнализация", "ПОЖАРНЫЕ требования", "сигнализацией"])
def test_fulltext_russian_matches_other_word_forms(wb, corpus_site, query: str) -> None:
    response = wb.search(query, mode="fulltext", site_id=corpus_site)
    assert paths(response)[:1] == ["ru/fire.md"]
    terms = {t.lower() for t in marked(response["results"][0])}
    assert terms & {"пожарной", "сигнализации", "требования"}


def test_russian_stemming_does_not_depend_on_the_server_default_config(wb, corpus_site, pg_url: str) -> None:
    from urllib.parse import quote

    from rag_core.db.database import Database
    from rag_core.workbench import Workbench

    sep = "&" if "?" in pg_url else "?"
    url = f"{pg_url}{sep}options={quote('-c default_text_search_config=pg_catalog.simple')}"
    other = Workbench(wb.settings, Database(url, pool_size=1), url, False, embedder=wb.embedder)
    try:
        with other.db.connection() as conn:
            assert conn.execute("SHOW default_text_search_config").fetchone()[0] == "pg_catalog.simple"
        response = other.search("дорога", mode="fulltext", site_id=corpus_site)
    finally:
        other.close()
    assert [r["file_path"] for r in response["results"]][:1] == ["ru/roads.md"]


def test_fulltext_japanese_finds_and_highlights_japanese_text(wb, corpus_site) -> None:
    response = wb.search("富士山の標高は何メートルか", mode="fulltext", site_id=corpus_site)
    assert paths(response)[0] == "ja/fuji.md"
    assert "富士山" in "".join(marked(response["results"][0]))


def test_semantic_finds_by_meaning_and_reports_dense_ranks(wb, corpus_site) -> None:
    response = wb.search("What does the school cost?", mode="semantic", site_id=corpus_site, limit=3)
    assert "en/budget.md" in paths(response)
    for rank, result in enumerate(response["results"], 1):
        assert result["fulltext_rank"] is None and result["dense_rank"] is not None
        assert 0.0 <= result["relevance_score"] <= 1.0
    scores = [r["relevance_score"] for r in response["results"]]
    assert scores == sorted(scores, reverse=True)


def test_hybrid_keeps_dense_rank_fulltext_rank_and_fused_score(wb, corpus_site) -> None:
    response = wb.search("fire alarm requirements", mode="hybrid", site_id=corpus_site)
    top = response["results"][0]
    assert top["file_path"] == "en/fire.md"
    assert top["dense_rank"] is not None and top["fulltext_rank"] == 1
    chunk = top["context_chunks"][0]
    best_bm25 = max(c["fulltext_score"] or 0 for r in response["results"] for c in r["context_chunks"])
    f = wb.search_engine.fusion  # the configured embedder's measured fusion
    if f.method == "convex":  # alpha * bm25 / max(bm25) + (1 - alpha) * cosine
        expected = f.alpha * chunk["fulltext_score"] / best_bm25 + (1 - f.alpha) * chunk["similarity"]
    elif f.method == "minmax":  # the cosine reads from the query's 100th best (0) to its best (1)
        assert top["dense_rank"] == 1
        expected = f.alpha * chunk["fulltext_score"] / best_bm25 + (1 - f.alpha)
    else:
        expected = f.w_fulltext / (f.k + top["fulltext_rank"]) + f.w_dense / (f.k + top["dense_rank"])
    assert top["score"] == pytest.approx(expected, abs=1e-3)
    assert {"chunk_id", "chunk_index", "text", "page_number", "start_char", "end_char", "relevance_score",
            "dense_rank", "fulltext_rank", "score"} <= set(chunk)
    # Semantic-only documents still come back in hybrid mode, ranked below the full-text matches.
    assert any(r["fulltext_rank"] is None for r in response["results"])
    fused = [r["score"] for r in response["results"]]
    assert fused == sorted(fused, reverse=True)


def test_hybrid_finds_japanese_with_a_japanese_query(wb, corpus_site) -> None:
    response = wb.search("日本で梅雨がないのは北海道とどこか。", site_id=corpus_site, limit=3)
    assert paths(response)[0] == "ja/tsuyu.md"
    assert marked(response["results"][0])


def test_response_has_the_seed_shape(wb, corpus_site) -> None:
    response = wb.search("fire", site_id=corpus_site, limit=2)
    assert {"success", "query", "total_results", "search_time", "results", "facets", "suggestions"} <= set(response)
    assert response["search_time"].endswith("s") and float(response["search_time"][:-1]) >= 0
    result = response["results"][0]
    assert {"id", "title", "file_path", "file_type", "file_size", "created_at", "updated_at", "relevance_score",
            "highlights", "context_chunks"} <= set(result)
    assert result["id"].startswith("doc_") and result["file_size"].endswith("B")
    assert result["created_at"].endswith("Z")
    assert set(response["facets"]) == {"document_types", "date_distribution"}


def test_retrieve_is_hybrid_and_keeps_cosine_similarity(wb, corpus_site) -> None:
    hits = wb.retrieve("пожарная сигнализация", k=3, site_id=corpus_site)
    assert hits[0].source == "ru/fire.md"
    assert hits[0].fulltext_rank == 1 and 0.0 < hits[0].similarity <= 1.0
    assert wb.retrieve("anything", k=3, site_id="t-no-such-site-at-all") == []


def test_retrieve_is_the_one_path_to_top_chunks(wb, corpus_site) -> None:
    """Workbench.retrieve (search's) and chat's steps rank alike; it takes a mode, the search filters and sources."""
    text = "fire alarm systems"
    hits = wb.retrieve(text, k=5, site_id=corpus_site)
    assert [(h.chunk_id, h.score) for h in top_chunks(wb.store, text, k=5, site_id=corpus_site)] == \
        [(h.chunk_id, h.score) for h in hits]
    wanted = hits[-1].source
    assert {h.source for h in wb.retrieve(text, k=2, site_id=corpus_site, sources=[wanted])} == {wanted}
    fulltext = wb.retrieve(text, k=5, site_id=corpus_site, mode="fulltext", source="en/")
    assert fulltext and all(h.source.startswith("en/") and h.dense_rank is None for h in fulltext)
    with pytest.raises(InvalidQuery, match="Unknown search mode 'vector'"):
        wb.retrieve(text, site_id=corpus_site, mode="vector")
    with pytest.raises(InvalidQuery, match="date_from '31.12.2024' is not a date"):
        wb.retrieve(text, site_id=corpus_site, date_from="31.12.2024")


def test_max_chunks_and_no_context(wb, site) -> None:
    long_text = "\n\n".join(f"Section {i}. The fire pump number {i} needs a yearly pressure test." * 6 for i in range(6))
    wb.ingest_texts([{"source": "pumps.md", "text": long_text, "title": "Pumps"}], site_id=site)
    response = wb.search("fire pump pressure test", site_id=site, max_chunks=2)
    chunks = response["results"][0]["context_chunks"]
    assert len(chunks) == 2 and chunks[0]["relevance_score"] >= chunks[1]["relevance_score"]
    bare = wb.search("fire pump pressure test", site_id=site, include_context=False)
    assert bare["results"][0]["context_chunks"] == [] and bare["results"][0]["highlights"]


def test_highlights_mark_the_words_postgresql_stems_to_the_query_lexemes(wb) -> None:
    """Python's stemmers mark what PostgreSQL's own english and russian configs would (ts_headline, every match)."""
    from rag_core.search.highlight import highlight_texts

    cases = [
        ("english", "en", "studies of running pumps and generalized alarms",
         "A study ran: the pumps ran, running pump studies generalize; alarming alarms, generally studied runners."),
        ("russian", "ru", "пожарная сигнализация зданий и Fire alarms",
         "Здания с пожарной сигнализацией; здание без сигнализации. Пожарные требования, fires и alarm зданиям."),
    ]
    with wb.db.connection() as conn:
        for config, lang, query, text in cases:
            lexemes = conn.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", (config, query)).fetchone()[0]
            marked = conn.execute(
                "SELECT ts_headline(%s::regconfig, %s, to_tsquery(%s::regconfig, %s),"
                " 'HighlightAll=true, StartSel=[, StopSel=]')",
                (config, text, config, " | ".join(lexemes))).fetchone()[0]
            expected = [w.lower() for w in re.findall(r"\[([^\]]+)\]", marked)]
            [[fragment]] = highlight_texts(query, lexemes, [(lang, text)], max_fragments=1)
            assert [fragment.text[s:e].lower() for s, e in fragment.spans] == expected, config
