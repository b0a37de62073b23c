"""Pure helpers: highlight parsing, Japanese highlights, sizes, renderers, query configs (no database)."""

from __future__ import annotations

from rag_core.search.highlight import Highlight, _parse_headline, cjk_highlights
from rag_core.search.hybrid import _like_prefix, query_configs
from rag_core.search.render import render_markdown, render_text
from rag_core.search.service import human_size, iso_utc


def test_headline_markers_become_spans() -> None:
    [first, second] = _parse_headline("\ue000Fire\ue001 alarm  \n systems\ue002doors \ue000fire\ue001d")
    assert first.text == "Fire alarm systems" and first.spans == [(0, 4)]
    assert second.marked() == "doors **fire**d"


def test_japanese_highlight_marks_query_bigrams_not_particles() -> None:
    [frag] = cjk_highlights("富士山は静岡県と山梨県にまたがる活火山である。", "富士山の高さは")
    assert [frag.text[s:e] for s, e in frag.spans] == ["富士山"]
    assert cjk_highlights("これはテストです", "関係ない言葉")[0].spans == []


def test_sizes_dates_and_like_patterns() -> None:
    assert (human_size(512), human_size(14_540), human_size(2_516_582)) == ("512B", "14.2KB", "2.4MB")
    import datetime as dt

    assert iso_utc(dt.datetime(2024, 3, 15, 13, 30, tzinfo=dt.timezone(dt.timedelta(hours=3)))) == "2024-03-15T10:30:00Z"
    assert _like_prefix("/docs/50%_off") == "/docs/50\\%\\_off%"
    assert _like_prefix("standards") == "%standards%"


def test_query_configs_cover_the_query_and_the_stored_languages() -> None:
    assert query_configs("пожарная безопасность", ["en"]) == (["english", "russian"], ["пожарная безопасность"] * 2)
    configs, texts = query_configs("梅雨とは", ["ja"])
    assert configs == ["simple"] and texts == ["梅雨 雨と とは"]
    assert query_configs("!!!", []) == (["simple"], ["!!!"])


def test_renderers_mark_terms() -> None:
    response = {
        "query": "fire", "mode": "hybrid", "total_results": 1, "page": 1, "limit": 10, "total_pages": 1,
        "search_time": "0.010s", "suggestions": ["fire doors"],
        "facets": {"document_types": {"md": 1}, "date_distribution": {"2024-01": 1}},
        "results": [{"title": "Fire [safety]", "file_path": "a.md", "file_type": "md", "file_size": "1.0KB",
                     "updated_at": "2024-01-02T00:00:00Z", "document_date": None, "relevance_score": 0.9,
                     "dense_rank": 1, "fulltext_rank": 1, "highlights": ["Fire alarm"], "highlight_spans": [[[0, 4]]],
                     "context_chunks": [{"chunk_index": 0, "page_number": 3, "relevance_score": 0.9, "text": "Fire alarm"}]}],
    }
    text = render_text(response)
    assert "1. Fire [safety]  [0.90]" in text and "**Fire** alarm" in text and "chunk 0, page 3" in text
    md = render_markdown(response)
    assert "### 1. Fire \\[safety\\] (0.90)" in md and "> **Fire** alarm" in md and "fire doors" in md
    assert Highlight("abc", []).to_dict() == {"text": "abc", "spans": []}


def test_exact_scan_limit_follows_the_measured_crossover() -> None:
    from rag_core.search.hybrid import EXACT_SCAN_MAX, exact_scan_limit

    # Exact scans win below ~1,150 filtered chunks in a 4.4K-chunk index, ~3,500 at 100K.
    assert 1_000 <= exact_scan_limit(4_356) <= 1_300
    assert 3_000 <= exact_scan_limit(100_000) <= 4_000
    assert exact_scan_limit(10**9) == EXACT_SCAN_MAX
    assert exact_scan_limit(0) < exact_scan_limit(10_000) < exact_scan_limit(1_000_000)
