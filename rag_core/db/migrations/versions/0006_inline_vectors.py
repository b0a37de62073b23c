"""Chunk vectors stored in the table's own rows instead of out of line.

A 512-dimension vector is 2 KB, past PostgreSQL's 2 KB threshold, so under the column's default
storage every vector went to the TOAST table: each distance computed from a row (the exact scan of a
narrow filter, the cosine of every candidate HNSW or full text returns) fetched it through the TOAST
index first. With storage MAIN a vector stays in the row unless the row would not fit a page (over
about 2,000 dimensions), and the chunk's text, which a search reads only for the results it shows,
moves out of line instead. At 100K chunks (USE vectors, 60 queries in three languages, PostgreSQL CPU
per search): the exact scan of a 5.7K-chunk filter 61 -> 33 ms, unfiltered hybrid 22.3 -> 19.3 ms; an
exact scan of 5.7K vectors alone 28.4 -> 12.4 ms.

The storage setting applies to rows written afterwards, so existing rows are rewritten here while the
store is small enough for that to take a minute or two (CLUSTER rewrites the table and rebuilds its
indexes, the HNSW index included: 62 s at 100K chunks). A larger store keeps its rows as they are,
which still work, until `rag reindex` rewrites them or an operator runs `VACUUM FULL chunks` in a
quiet hour; the upgrade logs that advice.

Revision ID: 0006_inline_vectors
Revises: 0005_filter_indexes
Create Date: 2026-11-26
"""

import logging

import sqlalchemy as sa
from alembic import op

revision = "0006_inline_vectors"
down_revision = "0005_filter_indexes"
branch_labels = None
depends_on = None

log = logging.getLogger("rag_core.db")

# Rewriting more chunks than this at startup would block the store for minutes.
REWRITE_MAX_CHUNKS = 200_000


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN")
    bind = op.get_bind()
    chunks = bind.execute(sa.text("SELECT count(*) FROM (SELECT 1 FROM chunks LIMIT :n) x"),
                          {"n": REWRITE_MAX_CHUNKS + 1}).scalar() or 0
    if chunks == 0:
        return
    if chunks > REWRITE_MAX_CHUNKS:
        log.warning("Chunk vectors of this store (over %d chunks) stay out of line until rewritten: run "
                    "`VACUUM FULL chunks` in a quiet hour (it rebuilds the indexes) or `rag reindex`; "
                    "new chunks are stored inline already.", REWRITE_MAX_CHUNKS)
        return
    log.warning("Rewriting %d chunks to store their vectors inline (one time, about a minute per 100K).", chunks)
    op.execute("SET LOCAL maintenance_work_mem = '1GB'")
    op.execute("CLUSTER chunks USING chunks_pkey")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE EXTENDED")
