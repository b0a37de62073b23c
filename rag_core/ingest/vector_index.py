"""The HNSW index on chunk embeddings: dropped for bulk loads, rebuilt once afterwards.

Inserting into a live HNSW index costs milliseconds per row; building it once over the loaded
rows is several times cheaper, so a load that at least doubles the table rebuilds instead.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TypedDict

import psycopg
from psycopg import sql

from rag_core.db.database import Connections, Database
from rag_core.errors import InvalidInput
from rag_core.ingest.types import Progress
from rag_core.progress import ProgressCallback
from rag_core.search.sql import like_prefix, source_index_name, source_index_predicate
from rag_core.search.validation import MAX_SOURCE_CHARS
from rag_core.security.ids import check_id
from rag_core.security.text import text_problem

log = logging.getLogger(__name__)

INDEX_NAME = "chunks_embedding_hnsw_idx"
# A load of fewer sources than this keeps the index live: the rebuild would cost more.
BULK_MIN_SOURCES = 1000
# A build over this many chunks takes minutes (eval/results/bench_scale_1m.json): it says so before it starts.
ANNOUNCE_BUILD_CHUNKS = 50_000


def chunk_count(db: Database) -> int:
    with db.connection() as conn:
        # the planner's estimate is enough to decide, and free on a large table
        estimate = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'chunks'").fetchone()[0]
        if estimate is None or estimate < 0:
            estimate = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return int(estimate)


def should_rebuild(db: Database, sources_to_load: int, chunks_per_source: float = 2.0) -> bool:
    """True when a load is big enough, relative to the table, to rebuild the index afterwards."""
    if sources_to_load < BULK_MIN_SOURCES:
        return False
    return sources_to_load * chunks_per_source >= chunk_count(db)


def drop(db: Database) -> None:
    """Drop the HNSW index and those of source filters (ensure() builds them again)."""
    with db.connection() as conn:
        conn.execute(f"DROP INDEX IF EXISTS {INDEX_NAME}")
        for (name,) in conn.execute("SELECT index_name FROM vector_source_indexes").fetchall():
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
    log.info("vector index dropped for a bulk load")


def ensure(db: Database, maintenance_work_mem: str = "1GB", announce_chunks: int = ANNOUNCE_BUILD_CHUNKS) -> bool:
    """Create the index when it is missing; returns True when it had to be built. A build over at least
    `announce_chunks` chunks says so first (the CLI shows the `rag_core.first_use` lines)."""
    with db.connection() as conn:
        exists = conn.execute("SELECT 1 FROM pg_indexes WHERE tablename = 'chunks' AND indexname = %s",
                              (INDEX_NAME,)).fetchone()
        # a bigger maintenance_work_mem keeps the graph in memory: several times faster builds
        conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (maintenance_work_mem,))
        _ensure_source_indexes(conn)
        if exists:
            return False
        chunks = conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL").fetchone()[0]
        if chunks >= announce_chunks:   # at open after a bulk load stopped, the command would wait in silence
            logging.getLogger("rag_core.first_use").info(
                "Building the vector index (HNSW) over %s chunks, once, after a bulk load: this takes minutes "
                "(a bulk load that is stopped and run again drops it again; the last one builds it).", f"{chunks:,}")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON chunks USING hnsw (embedding vector_cosine_ops)")
    log.info("vector index built")
    return True


def _ensure_source_indexes(conn: psycopg.Connection) -> None:
    """Build the listed source filters' indexes that a bulk load dropped."""
    missing = conn.execute("SELECT v.site_id, v.source_filter, v.index_name FROM vector_source_indexes v"
                           " WHERE NOT EXISTS (SELECT 1 FROM pg_indexes i WHERE i.tablename = 'chunks'"
                           " AND i.indexname = v.index_name)").fetchall()
    for site_id, source_filter, name in missing:
        conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON chunks USING hnsw (embedding vector_cosine_ops)"
                             " WHERE {}").format(sql.Identifier(name),
                                                 sql.SQL(source_index_predicate(site_id, source_filter))))
        log.info("HNSW index of %s in site %s built again", source_filter, site_id)


# ----- indexes of one source filter -----------------------------------------------------------------------
# A filtered walk of the whole graph visits every chunk near the query until enough pass the filter: tens of
# thousands when the query's neighbours lie outside it (bench_search.py, one-corpus filter). An index of the
# chunks one source filter keeps is walked instead (planner.plan_search), for that filter and any narrower one.

# Documents whose chunks learn their source in one transaction (an interrupted fill keeps what it filled).
FILL_BATCH_DOCUMENTS = 500
DOCS_SUFFIX = "_docs"   # the btree of the filter's documents beside its chunks' HNSW index


class SourceIndex(TypedDict):
    site_id: str
    source_filter: str
    index_name: str
    chunks: int
    created_at: datetime


def build_source_index(db: Database, site_id: str, source_filter: str,
                       progress: ProgressCallback | None = None, maintenance_work_mem: str = "1GB") -> SourceIndex:
    """Build (or rebuild) the HNSW index of the chunks that `source_filter` keeps in `site_id`.

    Chunks stored before migration 0009 learn their source first, a batch of documents per transaction (an
    interrupted build keeps what it filled: run it again). The index is built CONCURRENTLY, so ingest and
    search go on meanwhile; searches use it once it is listed in vector_source_indexes.
    """
    check_id(site_id, "site_id")
    problem = text_problem(source_filter) if source_filter.strip() else "is empty"
    if problem or source_filter != source_filter.strip() or len(source_filter) > MAX_SOURCE_CHARS:
        raise InvalidInput(f"The source filter {problem or 'has spaces around it or is too long'}; give the path "
                           "or URL part a search filters on, e.g. `rag index source docs/ --site S`.",
                           details={"source_filter": source_filter[:80]})
    pattern = like_prefix(source_filter)
    with db.connection() as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM documents WHERE site_id = %s AND source LIKE %s ORDER BY id",
                                          (site_id, pattern)).fetchall()]
    if not ids:
        raise InvalidInput(f"No document of site '{site_id}' has a source matching '{source_filter}'; "
                           "`rag status --sources --site SITE` lists them.",
                           details={"site_id": site_id, "source_filter": source_filter})
    report = progress or (lambda _: None)
    for start in range(0, len(ids), FILL_BATCH_DOCUMENTS):
        batch = ids[start:start + FILL_BATCH_DOCUMENTS]
        with db.connection() as conn:
            conn.execute("UPDATE chunks c SET source = d.source FROM documents d"
                         " WHERE d.id = ANY(%s) AND c.document_id = d.id AND c.source IS NULL", (batch,))
        report(Progress(start + len(batch), len(ids) + 1, 0, current="chunks learn their source"))
    name = source_index_name(site_id, source_filter)
    with psycopg.connect(db.url, autocommit=True) as conn:   # CONCURRENTLY runs outside a transaction
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
        # A build that was interrupted leaves an invalid index behind: it is dropped and built again.
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
        predicate = sql.SQL(source_index_predicate(site_id, source_filter))
        conn.execute(sql.SQL("CREATE INDEX CONCURRENTLY {} ON chunks USING hnsw (embedding vector_cosine_ops)"
                             " WHERE {}").format(sql.Identifier(name), predicate))
        # The filter's documents too: a search hashes their ids for its postings walk, which read every document
        # of the site to test the pattern (50 ms for 92K of 217K documents; bench_search.py, one-corpus filter),
        # and the planner sums their chunks (planner.filtered_chunks) from the index alone.
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name + DOCS_SUFFIX)))
        conn.execute(sql.SQL("CREATE INDEX CONCURRENTLY {} ON documents (id) INCLUDE (chunk_count) WHERE {}").format(
            sql.Identifier(name + DOCS_SUFFIX), predicate))
        chunks = conn.execute("SELECT count(*) FROM chunks WHERE site_id = %s AND source LIKE %s",
                              (site_id, pattern)).fetchone()[0]
        row = conn.execute(
            "INSERT INTO vector_source_indexes (site_id, source_filter, index_name, chunks) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (site_id, source_filter) DO UPDATE SET index_name = EXCLUDED.index_name,"
            " chunks = EXCLUDED.chunks, created_at = now() RETURNING created_at",
            (site_id, source_filter, name, chunks)).fetchone()
    report(Progress(len(ids) + 1, len(ids) + 1, chunks, current=name))
    log.info("HNSW index of %s in site %s built: %d chunks", source_filter, site_id, chunks)
    return SourceIndex(site_id=site_id, source_filter=source_filter, index_name=name, chunks=int(chunks),
                       created_at=row[0])


def source_indexes(db: Connections, site_id: str | None = None) -> list[SourceIndex]:
    """The source filters with an index of their own, each with the chunks its filter keeps now (documents
    ingested after the build are in the index too), summed from its documents' chunk counts."""
    with db.connection() as conn:
        rows = conn.execute("SELECT site_id, source_filter, index_name, created_at FROM vector_source_indexes"
                            " WHERE %(site)s::text IS NULL OR site_id = %(site)s ORDER BY site_id, source_filter",
                            {"site": site_id}).fetchall()
        return [SourceIndex(site_id=site, source_filter=source_filter, index_name=name, created_at=created,
                            chunks=int(conn.execute(
                                "SELECT coalesce(sum(chunk_count), 0) FROM documents WHERE site_id = %s"
                                " AND source LIKE %s", (site, like_prefix(source_filter))).fetchone()[0]))
                for site, source_filter, name, created in rows]


def drop_source_index(db: Database, site_id: str, source_filter: str) -> bool:
    """Drop a source filter's index; False when there was none. Searches stop using it first."""
    with db.connection() as conn:
        row = conn.execute("DELETE FROM vector_source_indexes WHERE site_id = %s AND source_filter = %s"
                           " RETURNING index_name", (site_id, source_filter)).fetchone()
    if row is None:
        return False
    with psycopg.connect(db.url, autocommit=True) as conn:
        for name in (row[0], row[0] + DOCS_SUFFIX):
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    return True
