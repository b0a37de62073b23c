"""Ingestion end to end on the real PostgreSQL: every file type, failures, re-ingest, replace, delete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from filebuilders import make_docx, make_pdf, make_xlsx, pdf_sentences
from rag_core.errors import EmbedderMismatch, InvalidInput

HTML = """<html><head><title>Crawled handbook</title><script>var SECRET_SCRIPT = 1;</script></head>
<body><nav>NAV_MENU_LINK Home About</nav><header>SITE_BANNER</header>
<article><h1>Handbook of hybrid search</h1>
<p>Hybrid retrieval fuses dense vector ranks with full-text ranks to find relevant passages.</p>
<p>Reciprocal rank fusion is a simple and robust way to combine both rankings.</p></article>
<footer>FOOTER_COPYRIGHT 2026</footer></body></html>"""


def build_corpus(root: Path) -> Path:
    """A folder with a real file of every supported type plus broken and unsupported ones."""
    docs = root / "docs"
    docs.mkdir(parents=True)
    (docs / "guide.md").write_text("# Installation guide\n\nRun make run to start the workbench.\n\n"
                                   "The embedded PostgreSQL starts by itself.\n", encoding="utf-8")
    (root / "notes.txt").write_text("Plain notes about pgvector HNSW indexes and cosine distance.\n", encoding="utf-8")
    (root / "manual.pdf").write_bytes(make_pdf(pdf_sentences(), title="Field manual"))
    make_docx(root / "charter.docx")
    make_xlsx(root / "team.xlsx")
    (root / "prices.csv").write_text("item,price\ntea,3\ncake,5\n", encoding="utf-8")
    (root / "page.html").write_text(HTML, encoding="utf-8")
    (root / "legacy.txt").write_bytes("Пожарная безопасность зданий и сооружений. Эвакуация людей.".encode("cp1251"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(300))
    (root / "empty.md").write_text("", encoding="utf-8")
    (root / "binary.txt").write_bytes(bytes(range(256)) * 8)
    (root / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    return root


def stored(wb, site: str) -> dict[str, dict]:
    with wb.db.connection() as conn:
        rows = conn.execute(
            "SELECT id, source, title, file_type, category, chunk_count, content_hash FROM documents WHERE site_id = %s",
            (site,)).fetchall()
    return {Path(r[1]).name: {"id": r[0], "source": r[1], "title": r[2], "file_type": r[3], "category": r[4],
                              "chunk_count": r[5], "hash": r[6]} for r in rows}


def chunk_ids(wb, document_id: int) -> list[int]:
    with wb.db.connection() as conn:
        return [r[0] for r in conn.execute("SELECT id FROM chunks WHERE document_id = %s ORDER BY chunk_index",
                                           (document_id,)).fetchall()]


def test_folder_of_every_type_with_failures_reported(wb, site, tmp_path: Path) -> None:
    root = build_corpus(tmp_path / "corpus")
    seen = []
    report = wb.ingest_paths([root], site_id=site, progress=seen.append)
    summary = report.to_dict()

    docs = stored(wb, site)
    assert set(docs) == {"guide.md", "notes.txt", "manual.pdf", "charter.docx", "team.xlsx", "prices.csv",
                         "page.html", "legacy.txt"}
    assert summary["indexed"] == 8
    failed = {Path(e["source"]).name: e["reason"] for e in summary["errors"]}
    assert set(failed) == {"broken.pdf", "empty.md", "binary.txt"}
    assert "corrupt" in failed["broken.pdf"].lower()
    assert "empty" in failed["empty.md"].lower()
    assert "utf-8" in failed["binary.txt"].lower()
    assert [Path(s["source"]).name for s in summary["skipped_sources"]] == ["picture.png"]
    # progress reached every file
    assert seen and seen[-1].done == seen[-1].total == 12
    assert (seen[-1].files_done, seen[-1].files_total) == (12, 12)  # the older names still read

    assert docs["guide.md"]["category"] == "docs" and docs["guide.md"]["title"] == "Installation guide"
    assert docs["manual.pdf"]["title"] == "Field manual"
    assert docs["charter.docx"]["file_type"] == "docx"
    with wb.db.connection() as conn:
        # the product's promise: every chunk is exactly its document's text between its offsets
        mismatched = conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.site_id = %s"
            " AND substr(d.content, c.start_char + 1, c.end_char - c.start_char) <> c.text", (site,)).fetchone()[0]
        assert mismatched == 0
        pages = conn.execute(
            "SELECT c.page_number, c.text FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE d.site_id = %s AND d.file_type = 'pdf' ORDER BY c.chunk_index", (site,)).fetchall()
        assert pages and all(p is not None for p, _ in pages)
        html = conn.execute("SELECT content FROM documents WHERE site_id = %s AND file_type = 'html'",
                            (site,)).fetchone()[0]
        assert "Reciprocal rank fusion" in html
        assert not any(junk in html for junk in ("SECRET_SCRIPT", "NAV_MENU_LINK", "FOOTER_COPYRIGHT"))
        legacy = conn.execute("SELECT content, language FROM documents WHERE site_id = %s AND source LIKE '%%legacy.txt'",
                              (site,)).fetchone()
        assert legacy[0].startswith("Пожарная безопасность") and legacy[1] == "ru"
        # Russian chunks are indexed with Russian stemming: a different word form matches
        hit = conn.execute("SELECT count(*) FROM chunks WHERE site_id = %s AND fts @@ to_tsquery('russian', 'безопасностью')",
                           (site,)).fetchone()[0]
        assert hit == 1


def test_unchanged_reingest_skips_without_embedding(wb, site, tmp_path: Path, monkeypatch) -> None:
    root = build_corpus(tmp_path / "corpus")
    wb.ingest_paths([root], site_id=site)
    before = stored(wb, site)

    def refuse(*args, **kwargs):
        raise AssertionError("an unchanged source must not be embedded again")

    monkeypatch.setattr(type(wb.embedder), "get_text_embedding_batch", refuse)
    report = wb.ingest_paths([root], site_id=site)
    assert report.count("unchanged") == 8 and report.count("indexed") == 0 and report.count("updated") == 0
    assert stored(wb, site) == before


def test_changed_source_is_replaced_whole(wb, site, tmp_path: Path) -> None:
    path = tmp_path / "policy.md"
    path.write_text("# Policy\n\n" + "Old rule about visitors. " * 80, encoding="utf-8")
    wb.ingest_paths([path], site_id=site)
    old = stored(wb, site)["policy.md"]
    old_chunks = chunk_ids(wb, old["id"])
    assert len(old_chunks) == old["chunk_count"] > 1

    path.write_text("# Policy\n\nA single new rule.", encoding="utf-8")
    report = wb.ingest_paths([path], site_id=site)
    assert report.count("updated") == 1
    new = stored(wb, site)["policy.md"]
    assert new["id"] == old["id"] and new["hash"] != old["hash"]
    new_chunks = chunk_ids(wb, new["id"])
    assert len(new_chunks) == new["chunk_count"] == 1
    assert not set(new_chunks) & set(old_chunks)
    with wb.db.connection() as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks WHERE document_id = %s", (new["id"],))]
    assert texts == ["# Policy\n\nA single new rule."]


def test_failed_replacement_keeps_old_version_and_others_go_in(wb, site) -> None:
    wb.ingest_text("api/a", "Version one of document A.", site_id=site)
    before = stored(wb, site)["a"]
    # PostgreSQL refuses NUL characters: the write of A fails inside its transaction
    report = wb.ingest_texts([
        {"source": "api/a", "text": "Version two of A with a NUL \x00 byte."},
        {"source": "api/b", "text": "Document B goes in."},
    ], site_id=site)
    outcomes = {o.source: o for o in report.outcomes}
    assert outcomes["api/a"].status == "failed" and "NUL" in outcomes["api/a"].reason
    assert outcomes["api/b"].status == "indexed"
    after = stored(wb, site)
    assert after["a"] == before
    with wb.db.connection() as conn:
        assert [r[0] for r in conn.execute("SELECT text FROM chunks WHERE document_id = %s",
                                           (before["id"],))] == ["Version one of document A."]


def test_uploaded_bytes_over_the_file_limit_fail_and_keep_the_stored_version(wb, site) -> None:
    small = wb.variant(max_file_mb=0.001)  # 1,000 bytes, as a notebook's settings may say
    first = small.ingest_bytes("notes.md", b"# Notes\n\nThe short first version.\n", site_id=site)
    assert first.status == "indexed"
    big = small.ingest_bytes("notes.md", b"# Notes\n\n" + b"A much longer second version. " * 60, site_id=site)
    assert big.status == "failed" and "RAG_MAX_FILE_MB" in big.reason and "1000 bytes" in big.reason, big.reason
    with wb.db.connection() as conn:
        assert [r[0] for r in conn.execute(
            "SELECT c.text FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.site_id = %s"
            " AND d.source = 'notes.md'", (site,))] == ["# Notes\n\nThe short first version."]


def test_embedding_failure_keeps_old_version(wb, site, monkeypatch) -> None:
    wb.ingest_text("api/c", "First text of C.", site_id=site)
    before = stored(wb, site)["c"]

    def broken(self, texts, **kwargs):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(type(wb.embedder), "get_text_embedding_batch", broken)
    outcome = wb.ingest_text("api/c", "Second text of C.", site_id=site)
    assert outcome.status == "failed" and "model crashed" in outcome.reason
    assert stored(wb, site)["c"] == before


def test_include_exclude_globs(wb, site, tmp_path: Path) -> None:
    root = build_corpus(tmp_path / "corpus")
    report = wb.ingest_paths([root], include=["*.md", "*.txt"], exclude=["binary.*", "empty.md"], site_id=site)
    assert sorted(Path(o.source).name for o in report.outcomes) == ["guide.md", "legacy.txt", "notes.txt"]


def test_delete_cascades_to_chunks(wb, site, tmp_path: Path) -> None:
    path = tmp_path / "gone.md"
    path.write_text("# Gone\n\nSoon deleted.", encoding="utf-8")
    wb.ingest_paths([path], site_id=site)
    doc = stored(wb, site)["gone.md"]
    assert wb.delete_source(str(path), site_id=site) == {"documents": 1, "chunks": 1}
    assert chunk_ids(wb, doc["id"]) == []
    assert wb.delete_source(str(path), site_id=site) == {"documents": 0, "chunks": 0}


def test_bad_text_input_names_the_problem(wb, site) -> None:
    with pytest.raises(InvalidInput, match="empty"):
        wb.ingest_text("api/x", "   ", site_id=site)
    with pytest.raises(InvalidInput, match="source"):
        wb.ingest_text("  ", "text", site_id=site)


def test_status_counts_one_site(wb, site) -> None:
    wb.ingest_text("https://example.com/a", "Web page text.", site_id=site, file_type="html")
    wb.ingest_text("api/n", "Note text.", site_id=site)
    info = wb.status(site_id=site)
    assert (info["documents"], info["chunks"], info["sources"], info["web_sources"]) == (2, 2, 2, 1)
    assert info["embedder"] == "e5-small" and info["dimension"] == 384
    assert info["database_bytes"] > 0 and info["vector_index"] is True


@pytest.mark.parametrize("other", ["minilm", "e5-small"])
def test_embedder_mismatch_then_reindex(other, make_settings, pg_server_url) -> None:
    """A store built with one embedder refuses another set explicitly until `reindex` moves it over."""
    import uuid

    from rag_core import open_workbench
    from rag_core.db.database import create_database_if_missing, drop_database, with_database

    url = with_database(pg_server_url, f"rag_reindex_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    try:
        with open_workbench(make_settings(database_url=url, embedder="use-multilingual")) as first:
            first.ingest_text("api/doc", "Hybrid search fuses dense and full-text ranks.", site_id="s")
        with open_workbench(make_settings(database_url=url, embedder=other)) as second:
            with pytest.raises(EmbedderMismatch) as err:
                second.ingest_text("api/other", "More text.", site_id="s")
            assert "use-multilingual" in err.value.message and other in err.value.message
            assert "rag reindex" in err.value.message
            assert second.status()["embedder_mismatch"]
            result = second.reindex()
            assert result == {"embedder": other, "dimension": 384, "chunks": 1}
            assert second.ingest_text("api/other", "More text.", site_id="s").status == "indexed"
            info = second.status()
            assert (info["embedder"], info["dimension"], info["chunks_without_embedding"]) == (other, 384, 0)
            assert info["vector_index"]
    finally:
        drop_database(url)


CONCURRENT_SCRIPT = """
import sys
from rag_core import open_workbench
wb = open_workbench()
report = wb.ingest_paths([sys.argv[1]], site_id=sys.argv[2])
print(report.count("indexed") + report.count("updated") + report.count("unchanged"), report.count("failed"))
wb.close()
"""


def test_two_processes_ingesting_at_once(wb, site, pg_url, tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    for i in range(30):
        (root / f"doc{i:02d}.md").write_text(f"# Doc {i}\n\n" + f"Paragraph {i} about shared ingestion. " * 40,
                                             encoding="utf-8")
    env = {**os.environ, "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data")}
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT_SCRIPT, str(root), site], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, err
        assert out.split() == ["30", "0"]
    with wb.db.connection() as conn:
        docs, chunks, counted = conn.execute(
            "SELECT count(*), (SELECT count(*) FROM chunks WHERE site_id = %s), sum(chunk_count)"
            " FROM documents WHERE site_id = %s", (site, site)).fetchone()
        dup = conn.execute("SELECT count(*) FROM (SELECT document_id, chunk_index FROM chunks WHERE site_id = %s"
                           " GROUP BY 1, 2 HAVING count(*) > 1) d", (site,)).fetchone()[0]
    assert docs == 30 and chunks == counted and dup == 0


def test_delete_url_written_differently(wb, site) -> None:
    wb.ingest_text("https://example.com/", "A page stored under its normalised URL.", site_id=site, file_type="html")
    assert wb.delete_source("HTTPS://Example.COM", site_id=site) == {"documents": 1, "chunks": 1}


def test_bulk_load_rebuilds_vector_index_once(wb, site, monkeypatch) -> None:
    from rag_core.ingest import vector_index

    calls = []
    monkeypatch.setattr(vector_index, "BULK_MIN_SOURCES", 3)
    monkeypatch.setattr(vector_index, "chunk_count", lambda db: 0)
    real_drop = vector_index.drop
    monkeypatch.setattr(vector_index, "drop", lambda db: (calls.append("drop"), real_drop(db)))
    report = wb.ingest_texts([{"source": f"api/bulk{i}", "text": f"Bulk document number {i}."} for i in range(4)],
                             site_id=site)
    assert report.count("indexed") == 4 and calls == ["drop"]
    with wb.db.connection() as conn:
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", (vector_index.INDEX_NAME,)).fetchone()
    # a small load keeps the live index
    monkeypatch.setattr(vector_index, "BULK_MIN_SOURCES", 1000)
    wb.ingest_text("api/small", "One more.", site_id=site)
    assert calls == ["drop"]


def test_an_index_a_stopped_bulk_load_left_dropped_is_built_and_the_wait_announced(wb, site) -> None:
    """Opening a store whose bulk load stopped builds its HNSW index: minutes at scale, said first (the CLI
    shows `rag_core.first_use` lines), so the command does not wait in silence. A small build says nothing."""
    import logging

    from rag_core.ingest import vector_index

    wb.ingest_text("api/announced", "A chunk with a vector of its own.", site_id=site)
    with wb.db.connection() as conn:
        vectors = conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL").fetchone()[0]
    said: list[str] = []
    heard = logging.Handler()
    heard.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    first_use = logging.getLogger("rag_core.first_use")
    first_use.addHandler(heard)
    level, first_use.level = first_use.level, logging.INFO
    try:
        vector_index.drop(wb.db)
        assert vector_index.ensure(wb.db, announce_chunks=1)
        assert said == [
            f"Building the vector index (HNSW) over {vectors:,} chunks, once, after a bulk load: this takes "
            "minutes (a bulk load that is stopped and run again drops it again; the last one builds it)."]
        assert not vector_index.ensure(wb.db, announce_chunks=1) and len(said) == 1   # in place: nothing to say
        vector_index.drop(wb.db)
        assert vector_index.ensure(wb.db) and len(said) == 1   # a small build says nothing
    finally:
        first_use.removeHandler(heard)
        first_use.setLevel(level)
        vector_index.ensure(wb.db)
    with wb.db.connection() as conn:
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", (vector_index.INDEX_NAME,)).fetchone()


def test_a_file_name_that_is_not_utf8_is_listed_as_failed_and_the_rest_goes_in(wb, site, pg_url,
                                                                                 tmp_path: Path) -> None:
    """`rag ingest` on a folder holding a Latin-1 file name: that file is reported, the others are stored
    (one such name used to end the whole run with a traceback before anything went in)."""
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nThis file has a plain UTF-8 name.\n", encoding="utf-8")
    bad = os.path.join(os.fsencode(root), b"caf\xe9-menu.md")  # real bytes on disk, not valid UTF-8
    with open(bad, "wb") as handle:
        handle.write(b"# Menu\n\nCoffee and croissants.\n")
    env = {**os.environ, "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data")}
    run = subprocess.run([str(Path(sys.executable).with_name("rag")), "ingest", str(root), "--site", site, "--json"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    summary = json.loads(run.stdout)
    assert summary["indexed"] == 1 and summary["failed"] == 1
    failed = summary["errors"][0]
    assert failed["source"].endswith("caf\\xe9-menu.md") and "not valid UTF-8" in failed["reason"]
    assert [d["source"] for d in wb.documents(site_id=site)] == [(root / "good.md").resolve().as_posix()]
