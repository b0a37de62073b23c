"""The sample corpus (the project's README and docs) lives in its own site: never among a user's sources."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from rag_core.cli import app
from rag_core.errors import IndexUnavailable
from rag_core.db.database import Database, create_database_if_missing, drop_database, with_database
from rag_core.ingest.sample import sample_corpus_paths, sample_sources
from rag_core.ingest.store import write_documents
from rag_core.security.ids import DEFAULT_SITE, SAMPLE_SITE
from storebuilders import alembic_to, one_chunk_doc

runner = CliRunner()
QUERY = "hybrid search full text and dense ranks"


def found_sources(wb, site_id: str | None) -> set[str]:
    try:
        return {r["file_path"] for r in wb.search(QUERY, limit=20, site_id=site_id)["results"]}
    except IndexUnavailable:  # nothing is indexed there
        return set()


def test_the_sample_goes_to_its_own_site_and_one_command_removes_it(wb, cli_env, site) -> None:
    sample = set(sample_sources())
    wb.ingest_text("notes/boilers.md", "Boilers are descaled every autumn; hybrid search finds this note too.",
                   site_id=site, file_type="md")
    try:
        report = wb.ingest_sample_corpus()
        assert {o.site_id for o in report.outcomes} == {SAMPLE_SITE}
        assert found_sources(wb, SAMPLE_SITE) & sample  # the sample answers in its own site
        # Every site (the app's "All sites", the CLI's default) and the default site: a user's documents only.
        assert not found_sources(wb, None) & sample
        assert not found_sources(wb, DEFAULT_SITE) & sample
        assert "notes/boilers.md" in found_sources(wb, None)
        assert SAMPLE_SITE not in wb.status()["by_site"]

        removed = runner.invoke(app, ["sample", "remove"])
        assert removed.exit_code == 0, removed.output
        assert f"{len(sample_corpus_paths())} documents" in removed.stdout
        assert wb.status(SAMPLE_SITE)["documents"] == 0
    finally:
        wb.remove_sample_corpus()


def test_an_older_store_moves_its_sample_out_of_the_default_site(pg_server_url) -> None:
    """A store whose first-run button put the sample into the default site: the upgrade moves those documents
    (chunks and full-text postings with them) and leaves a user's own documents where they are."""
    url = with_database(pg_server_url, f"rag_test_smp_{uuid.uuid4().hex[:8]}")
    create_database_if_missing(url)
    readme, guide = sample_sources()[:2]
    try:
        alembic_to(url, "0006_inline_vectors", 4)
        db = Database(url, pool_size=1)
        try:
            with db.connection() as conn:  # today's writer also stores each chunk's source (0009 adds the column)
                conn.execute("ALTER TABLE chunks ADD COLUMN source text")
            write_documents(db, [one_chunk_doc(DEFAULT_SITE, readme, "the workbench readme text", 4),
                                 one_chunk_doc(DEFAULT_SITE, guide, "a user guide of the workbench", 4),
                                 one_chunk_doc(SAMPLE_SITE, guide, "a user guide of the workbench", 4),
                                 one_chunk_doc(DEFAULT_SITE, "/kb/me/README.md", "my own readme", 4)])
            alembic_to(url, "head", 4)
            with db.connection() as conn:
                docs = sorted(conn.execute("SELECT site_id, source FROM documents").fetchall())
                chunk_sites = dict(conn.execute(
                    "SELECT d.source, array_agg(DISTINCT c.site_id) FROM chunks c JOIN documents d"
                    " ON d.id = c.document_id GROUP BY 1").fetchall())
                postings = conn.execute("SELECT DISTINCT site_id FROM postings WHERE lexeme = 'readm'").fetchall()
            assert docs == sorted([(DEFAULT_SITE, "/kb/me/README.md"), (SAMPLE_SITE, readme),
                                   (SAMPLE_SITE, guide)])
            assert chunk_sites[readme] == [SAMPLE_SITE] and chunk_sites["/kb/me/README.md"] == [DEFAULT_SITE]
            assert sorted(postings) == sorted([(DEFAULT_SITE,), (SAMPLE_SITE,)])
        finally:
            db.close()
    finally:
        drop_database(url)
