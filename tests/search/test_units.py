"""Pure helpers: word and Japanese highlights, sizes, renderers, query configs (no database)."""

from __future__ import annotations

from rag_core.search.highlight import FRAGMENT_WINDOW, Highlight, cjk_highlights, highlight_texts
from rag_core.search.hybrid import query_configs
from rag_core.render.search import render_markdown, render_text
from rag_core.search.service import human_size, iso_utc
from rag_core.search.sql import like_prefix


def terms(fragment: Highlight) -> list[str]:
    return [fragment.text[s:e] for s, e in fragment.spans]


def test_word_highlights_match_stemmed_word_forms() -> None:
    [[english]] = highlight_texts("alarm studies", ["alarm", "studi"],
                                  [("en", "Fire  alarms were\nstudied; the STUDIES show alarm fatigue (alarmed staff).")])
    assert english.text == "Fire alarms were studied; the STUDIES show alarm fatigue (alarmed staff)."
    assert terms(english) == ["alarms", "studied", "STUDIES", "alarm", "alarmed"]
    assert english.marked().startswith("Fire **alarms** were **studied**")
    # Russian: word forms and ё through the Russian stemmer, ASCII words through the English one.
    [[russian]] = highlight_texts("пожарная сигнализация fire", ["пожарн", "сигнализац", "fire", "елк"],
                                  [("ru", "Требования к пожарной сигнализации: ПОЖАРНЫЕ извещатели, Fires и ёлки.")])
    assert terms(russian) == ["пожарной", "сигнализации", "ПОЖАРНЫЕ", "Fires", "ёлки"]
    # 'simple' compares whole lower-cased words; text in angle brackets stays in the fragment.
    [[plain]] = highlight_texts("chat", ["chat"], [(None, "Use /rag:chat <message> to chat; chats differ.")])
    assert plain.text == "Use /rag:chat <message> to chat; chats differ." and terms(plain) == ["chat", "chat"]


def test_word_highlights_pick_the_fragments_with_most_query_terms() -> None:
    filler = " ".join(f"word{i}" for i in range(60))
    text = f"Pump one. {filler} The fire pump pressure test is yearly. {filler} A pump again. {filler} Fire doors."
    [fragments] = highlight_texts("fire pump pressure", ["fire", "pump", "pressur"], [("en", text)])
    assert len(fragments) == 2 and all(len(f.text) <= FRAGMENT_WINDOW for f in fragments)
    assert terms(fragments[0]) == ["Pump"]  # in text order: the opening, then the densest
    assert ["fire", "pump", "pressure"] == [t.lower() for t in terms(fragments[1])]
    assert text.index(fragments[0].text) < text.index(fragments[1].text)
    # No match: the start of the text, unmarked.
    [[start]] = highlight_texts("budget", ["budget"], [("en", text)])
    assert start.spans == [] and text.startswith(start.text)


def test_japanese_highlight_marks_query_bigrams_not_particles() -> None:
    [frag] = cjk_highlights("富士山は静岡県と山梨県にまたがる活火山である。", "富士山の高さは")
    assert [frag.text[s:e] for s, e in frag.spans] == ["富士山"]
    assert cjk_highlights("これはテストです", "関係ない言葉")[0].spans == []


def test_sizes_dates_and_like_patterns() -> None:
    assert (human_size(512), human_size(14_540), human_size(2_516_582)) == ("512B", "14.2KB", "2.4MB")
    import datetime as dt

    assert iso_utc(dt.datetime(2024, 3, 15, 13, 30, tzinfo=dt.timezone(dt.timedelta(hours=3)))) == "2024-03-15T10:30:00Z"
    assert like_prefix("/docs/50%_off") == "/docs/50\\%\\_off%"
    assert like_prefix("standards") == "%standards%"


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
    from rag_core.search.planner import DEFAULT_PLANNER

    exact_scan_limit = DEFAULT_PLANNER.exact_scan_limit

    # With vectors in their rows, exact scans win up to about 10,000 filtered chunks at 100K (10%: exact
    # 57-65 ms against HNSW 58-81 ms; 5%: 37 against 112-125 ms; 20%: 77-99 against 50-66 ms).
    assert 8_000 <= exact_scan_limit(100_864) <= 11_000
    assert exact_scan_limit(10**9) == DEFAULT_PLANNER.exact_scan_max
    assert exact_scan_limit(0) < exact_scan_limit(10_000) < exact_scan_limit(1_000_000)


def test_every_search_statement_fits_psycopg_parse_cache() -> None:
    """Every variant of the ranking statement is short enough for psycopg to keep its parsed placeholders
    (rag_core.db.database raises psycopg's bound): otherwise each search parses about 7 KB of SQL again."""
    import datetime as dt
    import itertools

    from psycopg import _queries

    import rag_core.db.database  # noqa: F401 - raises the bound on import
    from rag_core.search.hybrid import FUSION_BY_EMBEDDER, Fusion, build_statement
    from rag_core.search.sql import Scope

    scopes = [Scope("s"), Scope(None), Scope("s", ("pdf",), dt.date(2020, 1, 1), dt.date(2021, 1, 1), "/a")]
    fusions = [Fusion(), Fusion(method="convex"), *FUSION_BY_EMBEDDER.values()]
    longest = max(len(build_statement(mode, fusion, scope, order, output).encode())
                  for mode, fusion, scope, order, output in itertools.product(
                      ("hybrid", "semantic", "fulltext"), fusions, scopes, ("exact", "index", "index_set"),
                      ("documents", "chunks")))
    assert longest <= _queries.MAX_CACHED_STATEMENT_LENGTH


def test_a_page_past_the_last_says_so_and_names_the_last_page() -> None:
    """`rag search "water" --page 3` on a one-page result printed "1 result for ..." and nothing else."""
    response = {"query": "water", "mode": "hybrid", "total_results": 1, "page": 3, "limit": 10, "total_pages": 1,
                "search_time": "0.010s", "suggestions": [], "results": [],
                "facets": {"document_types": {"md": 1}, "date_distribution": {"2024-01": 1}}}
    for rendered in (render_text(response), render_markdown(response)):
        assert "page 3 of 1" in rendered
        assert "Page 3 is past the last page (1)" in rendered


def test_hits_from_several_sites_name_their_site() -> None:
    """A file ingested into two sites came back twice from a search of every site, as two identical
    entries; each hit now names its site when the results span several (and only then)."""
    def hit(site: str) -> dict:
        return {"title": "zima", "file_path": "/docs/zima.txt", "file_type": "txt", "file_size": "254B",
                "site_id": site, "updated_at": "2024-01-02T00:00:00Z", "document_date": None,
                "relevance_score": 0.5, "dense_rank": 1, "fulltext_rank": None, "highlights": [], "context_chunks": []}
    response = {"query": "frost", "mode": "hybrid", "total_results": 2, "page": 1, "limit": 10, "total_pages": 1,
                "search_time": "0.010s", "suggestions": [], "facets": {},
                "results": [hit("walk"), hit("my-documents")]}
    for rendered in (render_text(response), render_markdown(response)):
        assert "site walk" in rendered and "site my-documents" in rendered
    response["results"] = [hit("walk")]
    assert "site walk" not in render_text(response)
