"""Full text from the postings index: exact BM25 top-k, consistency under writes, migration, filters."""

from __future__ import annotations

import math
import random
import re
import uuid
from dataclasses import replace

import psycopg
import pytest

from rag_core.db.database import Database, create_database_if_missing, drop_database, plain_url, with_database
from rag_core.ingest.store import (
    _retype_embedding_column,
    delete_source,
    read_store_info,
    write_documents,
)
from rag_core.search.hybrid import DEFAULT_FUSION, rank_fulltext, rank_chunks
from storebuilders import alembic_to, one_chunk_doc

SYLLABLES = ["ka", "lo", "mi", "ru", "ten", "zor", "vex", "qua", "sil", "bor", "nim", "pra", "dul", "fen", "gor"]
VOCAB = sorted({a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES[:6]})[:900]


def _zipf_text(rng: random.Random, words: int) -> str:
    # Word i is drawn with weight 1 / (i + 1): a few common words, a long tail of rare ones.
    return " ".join(rng.choices(VOCAB, weights=[1 / (i + 1) for i in range(len(VOCAB))], k=words))


def _dim(wb) -> int:
    wb.store.require_compatible()  # records the embedder on a fresh store, as the first ingest does
    info = read_store_info(wb.db)
    assert info is not None
    return info[1]


def _exact_bm25(conn, site_id: str, query: str, k: int, types: tuple[str, ...] = ()) -> list[int]:
    """BM25 (k1 0.9, b 0.4) over the chunks' own tsvector lexemes, computed here in Python."""
    k1, b = DEFAULT_FUSION.k1, DEFAULT_FUSION.b
    rows = conn.execute(
        "SELECT c.id, u.lexeme, greatest(cardinality(u.positions), 1), c.fts_len, d.file_type"
        " FROM chunks c JOIN documents d ON d.id = c.document_id CROSS JOIN LATERAL unnest(c.fts) u"
        " WHERE c.site_id = %s", (site_id,)).fetchall()
    lengths = dict(conn.execute("SELECT id, fts_len FROM chunks WHERE site_id = %s", (site_id,)).fetchall())
    n, avg = len(lengths), sum(lengths.values()) / len(lengths)
    qlex = set(conn.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", (query,)).fetchone()[0])
    df: dict[str, int] = {}
    for _, lex, _, _, _ in rows:
        df[lex] = df.get(lex, 0) + 1
    scores: dict[int, float] = {}
    for cid, lex, tf, length, ftype in rows:
        if lex in qlex and (not types or ftype in types):
            idf = math.log(1 + (n - df[lex] + 0.5) / (df[lex] + 0.5))
            scores[cid] = scores.get(cid, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
    return [cid for cid, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def _postings_mismatch(conn, site_id: str) -> int:
    """Rows in postings that the chunks do not imply, plus rows the chunks imply that postings lack."""
    derived = ("SELECT c.site_id, u.lexeme, c.id, c.document_id, greatest(cardinality(u.positions), 1), c.fts_len"
               " FROM chunks c CROSS JOIN LATERAL unnest(c.fts) u WHERE c.site_id = %(s)s")
    stored = "SELECT site_id, lexeme, chunk_id, document_id, tf, len FROM postings WHERE site_id = %(s)s"
    return conn.execute(f"SELECT (SELECT count(*) FROM ({stored} EXCEPT {derived}) a)"
                        f" + (SELECT count(*) FROM ({derived} EXCEPT {stored}) b)", {"s": site_id}).fetchone()[0]


@pytest.fixture(scope="module")
def zipf_site(wb) -> str:
    """400 one-chunk documents of Zipf-distributed words (common lexemes have long posting lists)."""
    site_id = f"t-zipf-{uuid.uuid4().hex[:6]}"
    rng, dim = random.Random(7), _dim(wb)
    docs = [one_chunk_doc(site_id, f"doc{i}.md", _zipf_text(rng, rng.randint(15, 150)), dim) for i in range(400)]
    assert all(err is None for *_, err in write_documents(wb.db, docs))
    yield site_id
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))


def _queries(n: int) -> list[str]:
    rng = random.Random(11)
    return [" ".join(rng.sample(VOCAB[:40], 2) + rng.sample(VOCAB[40:], rng.randint(0, 5))) for _ in range(n)]


def test_fulltext_top10_equals_exact_bm25(wb, zipf_site) -> None:
    with wb.db.connection() as conn:
        for q in _queries(30):
            expected = _exact_bm25(conn, zipf_site, q, 10)
            ranked, exact = rank_fulltext(wb.db, q, k=10, site_id=zipf_site)
            assert [cid for cid, _ in ranked] == expected, q
            assert exact
            assert [h.chunk_id for h in rank_chunks(wb.db, q, None, k=10, site_id=zipf_site, mode="fulltext")] \
                == expected, q


def test_pruned_lists_stay_exact_when_the_bound_says_so(wb, zipf_site) -> None:
    # Read only 20 postings per lexeme: the common lexemes' lists (hundreds of chunks) are cut.
    shallow = replace(DEFAULT_FUSION, depth=20, rescore=40, deep_depth=20)   # one pass, no deeper retry
    proven = overlap = 0
    queries = _queries(30)
    with wb.db.connection() as conn:
        for q in queries:
            expected = _exact_bm25(conn, zipf_site, q, 10)
            ranked, exact = rank_fulltext(wb.db, q, k=10, site_id=zipf_site, fusion=shallow)
            got = [cid for cid, _ in ranked]
            assert len(got) == len(expected)
            overlap += len(set(got) & set(expected))
            if exact:
                proven += 1
                assert got == expected, q
    assert proven >= 5, f"the bound proved only {proven} of {len(queries)} rankings exact"
    assert proven < len(queries), "no list was cut: the test does not exercise the pruning"
    assert overlap >= 0.9 * 10 * len(queries)
    # With the deeper second pass allowed, every ranking the first pass could not prove is redone.
    retried = replace(DEFAULT_FUSION, depth=20, rescore=40, deep_depth=4000)
    with wb.db.connection() as conn:
        for q in queries:
            ranked, exact = rank_fulltext(wb.db, q, k=10, site_id=zipf_site, fusion=retried)
            assert exact and [cid for cid, _ in ranked] == _exact_bm25(conn, zipf_site, q, 10), q
    # A second pass still too shallow to prove some of them: the third, deeper one proves them all.
    two_passes = replace(DEFAULT_FUSION, depth=20, rescore=40, deep_depth=25, deep_rescore=40, deeper_depth=25)
    three_passes = replace(two_passes, deeper_depth=4000)
    assert not all(rank_fulltext(wb.db, q, k=10, site_id=zipf_site, fusion=two_passes)[1] for q in queries)
    with wb.db.connection() as conn:
        for q in queries:
            ranked, exact = rank_fulltext(wb.db, q, k=10, site_id=zipf_site, fusion=three_passes)
            assert exact and [cid for cid, _ in ranked] == _exact_bm25(conn, zipf_site, q, 10), q


def test_exact_reference_ranking_matches_python(wb, zipf_site) -> None:
    with wb.db.connection() as conn:
        for q in _queries(5):
            ranked, _ = rank_fulltext(wb.db, q, k=10, site_id=zipf_site, exact=True)
            assert [cid for cid, _ in ranked] == _exact_bm25(conn, zipf_site, q, 10)


def test_filtered_full_text_is_never_empty(wb, site) -> None:
    # The word is frequent in 60 markdown documents and said once in two long PDFs: with a shallow
    # walk the PDFs are far below the head of its list, and the filter must still find them.
    dim, rng = _dim(wb), random.Random(3)
    docs = [one_chunk_doc(site, f"m{i}.md", "quasarion " * 5 + _zipf_text(rng, 20), dim) for i in range(60)]
    docs += [one_chunk_doc(site, f"p{i}.pdf", "quasarion " + _zipf_text(rng, 300), dim, file_type="pdf") for i in range(2)]
    assert all(err is None for *_, err in write_documents(wb.db, docs))
    shallow = replace(DEFAULT_FUSION, depth=10, rescore=10, deep_depth=10)
    ranked, _ = rank_fulltext(wb.db, "quasarion", k=10, site_id=site, types=("pdf",), fusion=shallow)
    with wb.db.connection() as conn:
        assert [cid for cid, _ in ranked] == _exact_bm25(conn, site, "quasarion", 10, types=("pdf",))
    assert len(ranked) == 2
    for mode in ("fulltext", "hybrid"):
        response = wb.search("quasarion", mode=mode, site_id=site, types=["pdf"])
        assert {r["file_path"] for r in response["results"]} == {"p0.pdf", "p1.pdf"}, mode


def test_postings_follow_every_write(wb, site) -> None:
    dim, rng = _dim(wb), random.Random(5)
    first = [one_chunk_doc(site, f"d{i}.md", _zipf_text(rng, 40), dim) for i in range(6)]
    assert all(err is None for *_, err in write_documents(wb.db, first))
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM postings WHERE site_id = %s", (site,)).fetchone()[0] > 0
        assert _postings_mismatch(conn, site) == 0
    # Replace two documents with new text.
    assert all(err is None for *_, err in write_documents(
        wb.db, [one_chunk_doc(site, "d0.md", "brand new words here", dim), one_chunk_doc(site, "d1.md", _zipf_text(rng, 80), dim)]))
    # A batch with one document the database rejects (offsets out of order): the batch is retried
    # one document at a time; the rejected one keeps its previous version, postings included.
    with wb.db.connection() as conn:
        before = conn.execute("SELECT lexeme, tf FROM postings p JOIN documents d ON d.id = p.document_id"
                              " WHERE d.site_id = %s AND d.source = 'd2.md' ORDER BY 1", (site,)).fetchall()
    bad = one_chunk_doc(site, "d2.md", "zzbroken " * 3, dim, start=10_000)
    results = write_documents(wb.db, [one_chunk_doc(site, "d3.md", "fresh text for three", dim), bad])
    assert [err is None for *_, err in results] == [True, False]
    with wb.db.connection() as conn:
        after = conn.execute("SELECT lexeme, tf FROM postings p JOIN documents d ON d.id = p.document_id"
                             " WHERE d.site_id = %s AND d.source = 'd2.md' ORDER BY 1", (site,)).fetchall()
        assert after == before
        assert _postings_mismatch(conn, site) == 0
    # Deletes: through the store, and by hand (cascaded from documents).
    assert delete_source(wb.db, "d4.md", site) == (1, 1)
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s AND source = 'd5.md'", (site,))
        assert _postings_mismatch(conn, site) == 0
        assert conn.execute("SELECT count(*) FROM postings p WHERE site_id = %s AND NOT EXISTS"
                            " (SELECT 1 FROM chunks c WHERE c.id = p.chunk_id)", (site,)).fetchone()[0] == 0
    # A transaction that fails after deleting chunks leaves the postings as they were.
    with wb.db.connection() as conn:
        snapshot = conn.execute("SELECT count(*), sum(tf) FROM postings WHERE site_id = %s", (site,)).fetchone()
    with pytest.raises(psycopg.errors.DivisionByZero):
        with wb.db.connection() as conn:
            with conn.transaction():
                conn.execute("DELETE FROM chunks WHERE site_id = %s", (site,))
                conn.execute("SELECT 1 / 0")
    with wb.db.connection() as conn:
        assert conn.execute("SELECT count(*), sum(tf) FROM postings WHERE site_id = %s", (site,)).fetchone() == snapshot
        assert _postings_mismatch(conn, site) == 0


def test_migration_builds_postings_for_an_existing_store(pg_server_url) -> None:
    url = with_database(pg_server_url, f"rag_test_mig_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    try:
        alembic_to(url, "0002", 4)
        with psycopg.connect(plain_url(url)) as conn:
            for i, (lang, cfg, text) in enumerate([("en", "english", "Fire alarms ring in every building"),
                                                  ("ru", "russian", "Пожарная сигнализация в зданиях"),
                                                  ("ja", "simple", "梅雨 は 日本 の 気象")]):
                doc_id = conn.execute(
                    "INSERT INTO documents (site_id, source, title, file_type, file_size, category, language,"
                    " content_hash, content, chunk_count) VALUES ('old', %s, 't', 'md', 1, 'text', %s, 'h', %s, 1)"
                    " RETURNING id", (f"s{i}", lang, text)).fetchone()[0]
                conn.execute("INSERT INTO chunks (document_id, site_id, chunk_index, text, start_char, end_char,"
                             " token_count, language, fts) VALUES (%s, 'old', 0, %s, 0, 1, 1, %s,"
                             " to_tsvector(%s::regconfig, %s))", (doc_id, text, lang, cfg, text))
        alembic_to(url, "head", 4)
        with psycopg.connect(plain_url(url)) as conn:
            assert conn.execute("SELECT count(DISTINCT chunk_id) FROM postings").fetchone()[0] == 3
            assert _postings_mismatch(conn, "old") == 0
            assert conn.execute("SELECT tf FROM postings WHERE lexeme = 'alarm'").fetchone() == (1,)
            # Writes after the upgrade keep the built index current.
            conn.execute("DELETE FROM documents WHERE source = 's0'")
            assert _postings_mismatch(conn, "old") == 0
            assert conn.execute("SELECT count(DISTINCT chunk_id) FROM postings").fetchone()[0] == 2
    finally:
        drop_database(url)


def _toasted_values(conn: psycopg.Connection) -> int:
    """Values of the chunks table stored out of line that are as large as a vector (the short texts and
    tsvectors of these tests are not; they may go out of line to make room for the vector)."""
    toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'chunks'::regclass").fetchone()[0]
    return conn.execute(f"SELECT count(*) FROM (SELECT chunk_id FROM {toast} GROUP BY 1"
                        " HAVING sum(length(chunk_data)) >= 2048) x").fetchone()[0]


def test_migration_moves_vectors_into_the_rows_and_new_ones_stay_there(pg_server_url) -> None:
    """A 512-dimension vector (2 KB) went out of line; after the upgrade the existing ones are rewritten
    into their rows, and vectors written later, also after a change of dimension, are stored there."""
    url = with_database(pg_server_url, f"rag_test_inl_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    try:
        alembic_to(url, "0005_filter_indexes", 512)
        db = Database(url, pool_size=1)
        try:
            with db.connection() as conn:  # today's writer also stores each chunk's source (0009 adds the column)
                conn.execute("ALTER TABLE chunks ADD COLUMN source text")
            write_documents(db, [one_chunk_doc("old", f"s{i}", f"short text number {i}", 512) for i in range(3)])
            with db.connection() as conn:
                assert _toasted_values(conn) == 3  # before: every vector out of line
                before = conn.execute("SELECT id, embedding::text FROM chunks ORDER BY id").fetchall()
            alembic_to(url, "head", 512)
            with db.connection() as conn:
                assert conn.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = 'chunks'::regclass"
                                    " AND attname = 'embedding'").fetchone() == ("m",)
                assert _toasted_values(conn) == 0
                assert conn.execute("SELECT id, embedding::text FROM chunks ORDER BY id").fetchall() == before
            write_documents(db, [one_chunk_doc("old", "s9", "another short text", 512)])
            with db.connection() as conn:
                assert _toasted_values(conn) == 0
                _retype_embedding_column(conn, 768)  # a change of embedder keeps the storage
            write_documents(db, [one_chunk_doc("new", "t0", "a text for the new model", 768)])
            with db.connection() as conn:
                assert _toasted_values(conn) == 0
        finally:
            db.close()
    finally:
        drop_database(url)


def test_a_filtered_walk_checks_each_posting_once(wb, zipf_site) -> None:
    """A filter that rejects most of a long list makes the walk read all of it; each posting's document is
    looked up once (a probe for the list's bound walked the same head a second time, checking it again)."""
    from rag_core.search.sql import Scope, build_statement, statement_params

    query = " ".join(VOCAB[:2])  # the two most common words: lists of most of the 400 documents
    scope = Scope(zipf_site, source="doc39")  # doc39 and doc390..doc399: 11 documents pass
    fusion = replace(DEFAULT_FUSION, candidates=10)
    sql = build_statement("fulltext", fusion, scope, "index", "chunks")  # "index": each posting's document looked up
    params = statement_params(scope, fusion, ["simple"], [query], None) | {"k": 10}

    def lookups(node: dict) -> int:
        own = node.get("Actual Loops", 0) if re.search(r"\bp(_\d+)?\.document_id", node.get("Index Cond", "")) else 0
        return own + sum(lookups(child) for child in node.get("Plans", []))

    with wb.db.connection() as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params, prepare=False).fetchone()[0][0]["Plan"]
        postings = conn.execute("SELECT count(*) FROM postings WHERE site_id = %s AND lexeme = ANY(%s)",
                                (zipf_site, VOCAB[:2])).fetchone()[0]
        rows = conn.execute(sql, params, prepare=False).fetchall()
    assert postings > 300 and lookups(plan) == postings
    assert rows and all("doc39" in r[3] for r in rows)
