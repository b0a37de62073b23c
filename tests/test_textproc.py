"""Language detection and the text handed to PostgreSQL's full-text search."""

from __future__ import annotations

from rag_core.textproc import cjk_bigrams, detect_language, embedding_input, fts_text


def test_detects_scripts() -> None:
    assert detect_language("Требования к пожарной безопасности зданий") == "ru"
    assert detect_language("東京は日本の首都です。") == "ja"
    assert detect_language("漢字だけ") == "ja"
    assert detect_language("Hybrid search with pgvector") == "en"
    assert detect_language("12345 — 678") == "other"
    assert detect_language("СП 4.13130.2013 Fire protection systems: требования") == "ru"


def test_cjk_runs_become_bigrams_and_other_words_stay() -> None:
    assert cjk_bigrams("東京都") == "東京 京都"
    assert cjk_bigrams("日") == "日"
    assert cjk_bigrams("pgvector の検索") == "pgvector の検 検索"


def test_digits_and_latin_do_not_swallow_following_cjk() -> None:
    # "5月から" once became one opaque token, so no bigram of it could ever match a query
    assert cjk_bigrams("5月から7月") == "5 月か から 7 月"
    assert cjk_bigrams("PostgreSQLで検索") == "PostgreSQL で検 検索"


def test_fts_text_only_rewrites_japanese() -> None:
    assert fts_text("Пожарная безопасность", "ru") == "Пожарная безопасность"
    assert fts_text("検索拡張", "ja") == "検索 索拡 拡張"


def test_embedding_input_prefixes_title_once() -> None:
    assert embedding_input("Guide", "Run make run.") == "Guide\nRun make run."
    assert embedding_input("Guide", "Guide to running") == "Guide to running"
    assert embedding_input("", "text") == "text"
