"""A chunk written without its document's source gets it from the database (`chunks.source`, migration 0009).

A source filter's own HNSW index holds the chunks whose `source` matches it; a chunk stored with a NULL source
is not in it, and a search walking that index does not see the chunk. Today's writers set the column; a
`rag worker` or `rag serve` of a version before 0009, still running while another process upgraded the store,
does not. A row trigger fills it from the chunk's document. Its WHEN clause keeps it off every row that
arrives with a source, so today's bulk loads pay nothing. Rows stored before 0009 keep NULL until an index
is built over them (`rag index source` fills them), as before.

Revision ID: 0011_chunk_source_filled
Revises: 0010_transition_checks
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0011_chunk_source_filled"
down_revision = "0010_transition_checks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION rag_chunk_source_filled() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            SELECT d.source INTO NEW.source FROM documents d WHERE d.id = NEW.document_id;
            RETURN NEW;
        END
        $fn$
    """)
    op.execute("CREATE TRIGGER chunks_source_filled BEFORE INSERT ON chunks FOR EACH ROW"
               " WHEN (NEW.source IS NULL) EXECUTE FUNCTION rag_chunk_source_filled()")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS chunks_source_filled ON chunks")
    op.execute("DROP FUNCTION IF EXISTS rag_chunk_source_filled()")
