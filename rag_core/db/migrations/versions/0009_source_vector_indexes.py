"""HNSW indexes of one source filter: a folder that searches filter on often gets a graph of its own.

A filtered HNSW walk of the whole store visits every chunk near the query until enough of them pass the
filter; when the query's neighbours lie outside the filter (a question in a language the folder does not
hold), that is tens of thousands of visits (bench_search.py, one-corpus filter). A partial index walks
only the filter's chunks. Its predicate must be on the chunks' own row, so a chunk now keeps its
document's source (`chunks.source`, set on insert). Rows stored before this revision keep NULL until an
index is made over them (`rag index source`, which fills them first): no store is rewritten here.

`vector_source_indexes` lists the filters whose index is built; a search uses one only from that list.

Revision ID: 0009_source_vector_indexes
Revises: 0008_jobs
Create Date: 2026-11-29
"""

from alembic import op

revision = "0009_source_vector_indexes"
down_revision = "0008_jobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ADD COLUMN IF NOT EXISTS source text")
    op.execute("""
        CREATE TABLE vector_source_indexes (
            site_id text NOT NULL,
            source_filter text NOT NULL,
            index_name text NOT NULL UNIQUE,
            chunks bigint NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (site_id, source_filter)
        )
    """)


def downgrade() -> None:
    for (name,) in op.get_bind().exec_driver_sql("SELECT index_name FROM vector_source_indexes").fetchall():
        op.execute(f'DROP INDEX IF EXISTS "{name}"')
        op.execute(f'DROP INDEX IF EXISTS "{name}_docs"')   # its documents' index (ingest/vector_index.py)
    op.execute("DROP TABLE vector_source_indexes")
    op.execute("ALTER TABLE chunks DROP COLUMN source")
