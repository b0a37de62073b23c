"""The HNSW index on chunk embeddings: dropped for bulk loads, rebuilt once afterwards.

Inserting into a live HNSW index costs milliseconds per row; building it once over the loaded
rows is several times cheaper, so a load that at least doubles the table rebuilds instead.
"""

from __future__ import annotations

import logging

from rag_core.db.database import Database

log = logging.getLogger(__name__)

INDEX_NAME = "chunks_embedding_hnsw_idx"
# A load of fewer sources than this keeps the index live: the rebuild would cost more.
BULK_MIN_SOURCES = 1000


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
    with db.connection() as conn:
        conn.execute(f"DROP INDEX IF EXISTS {INDEX_NAME}")
    log.info("vector index dropped for a bulk load")


def ensure(db: Database, maintenance_work_mem: str = "1GB") -> bool:
    """Create the index when it is missing; returns True when it had to be built."""
    with db.connection() as conn:
        exists = conn.execute("SELECT 1 FROM pg_indexes WHERE tablename = 'chunks' AND indexname = %s",
                              (INDEX_NAME,)).fetchone()
        if exists:
            return False
        # a bigger maintenance_work_mem keeps the graph in memory: several times faster builds
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON chunks USING hnsw (embedding vector_cosine_ops)")
    log.info("vector index built")
    return True
