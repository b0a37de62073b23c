"""Initial schema: documents, chunks (pgvector + full text), chat, query log, instructions, retention audit.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The vector dimension belongs to the embedder that builds the store; rag_core passes it in.
    dim = context.config.attributes.get("embedding_dim", 512)
    dim = int(dim() if callable(dim) else dim)  # a callable probes the embedder only when needed
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        """
        CREATE TABLE store_info (
            id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
            embedder text NOT NULL,
            embedding_dim integer NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE documents (
            id bigserial PRIMARY KEY,
            site_id text NOT NULL DEFAULT 'default',
            source text NOT NULL,
            title text NOT NULL DEFAULT '',
            file_type text NOT NULL,
            file_size bigint NOT NULL DEFAULT 0,
            category text NOT NULL DEFAULT 'other',
            language text,
            content_hash text NOT NULL,
            content text NOT NULL,
            doc_date timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            indexed_at timestamptz NOT NULL DEFAULT now(),
            chunk_count integer NOT NULL DEFAULT 0,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            CONSTRAINT documents_site_source_key UNIQUE (site_id, source)
        )
        """
    )
    op.execute("CREATE INDEX documents_site_type_idx ON documents (site_id, file_type)")
    op.execute("CREATE INDEX documents_site_date_idx ON documents (site_id, doc_date)")
    op.execute("CREATE INDEX documents_source_pattern_idx ON documents (source text_pattern_ops)")
    op.execute(
        f"""
        CREATE TABLE chunks (
            id bigserial PRIMARY KEY,
            document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            site_id text NOT NULL,
            chunk_index integer NOT NULL,
            text text NOT NULL,
            start_char integer NOT NULL,
            end_char integer NOT NULL,
            token_count integer NOT NULL DEFAULT 0,
            page_number integer,
            language text,
            embedding vector({dim}),
            fts tsvector NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            CONSTRAINT chunks_document_index_key UNIQUE (document_id, chunk_index),
            CONSTRAINT chunks_offsets_check CHECK (start_char >= 0 AND end_char >= start_char)
        )
        """
    )
    op.execute("CREATE INDEX chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding vector_cosine_ops)")
    op.execute("CREATE INDEX chunks_fts_gin_idx ON chunks USING gin (fts)")
    op.execute("CREATE INDEX chunks_site_idx ON chunks (site_id)")
    op.execute(
        """
        CREATE TABLE chat_sessions (
            id text PRIMARY KEY,
            site_id text NOT NULL DEFAULT 'default',
            user_id text,
            title text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX chat_sessions_updated_idx ON chat_sessions (updated_at)")
    op.execute("CREATE INDEX chat_sessions_site_user_idx ON chat_sessions (site_id, user_id)")
    op.execute(
        """
        CREATE TABLE chat_messages (
            id bigserial PRIMARY KEY,
            session_id text NOT NULL REFERENCES chat_sessions(id) ON DELETE CASCADE,
            site_id text NOT NULL DEFAULT 'default',
            user_id text,
            role text NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
            content text NOT NULL,
            sources jsonb,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX chat_messages_session_created_idx ON chat_messages (session_id, created_at)")
    op.execute("CREATE INDEX chat_messages_created_idx ON chat_messages (created_at)")
    op.execute("CREATE INDEX chat_messages_site_user_idx ON chat_messages (site_id, user_id, created_at)")
    op.execute(
        """
        CREATE TABLE query_log (
            id bigserial PRIMARY KEY,
            created_at timestamptz NOT NULL DEFAULT now(),
            query text NOT NULL,
            mode text NOT NULL,
            params jsonb NOT NULL DEFAULT '{}'::jsonb,
            result_count integer NOT NULL DEFAULT 0,
            duration_ms double precision NOT NULL DEFAULT 0,
            site_id text,
            user_id text,
            error_code text
        )
        """
    )
    op.execute("CREATE INDEX query_log_created_idx ON query_log (created_at)")
    op.execute("CREATE INDEX query_log_site_created_idx ON query_log (site_id, created_at)")
    op.execute(
        """
        CREATE TABLE agent_instructions (
            id bigserial PRIMARY KEY,
            site_id text NOT NULL,
            resource_name text NOT NULL,
            instruction_text text NOT NULL,
            version integer NOT NULL DEFAULT 1,
            is_active boolean NOT NULL DEFAULT true,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT agent_instructions_version_key UNIQUE (site_id, resource_name, version)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE retention_audit (
            id bigserial PRIMARY KEY,
            ran_at timestamptz NOT NULL DEFAULT now(),
            older_than_days double precision NOT NULL,
            cutoff timestamptz NOT NULL,
            dry_run boolean NOT NULL,
            messages_deleted integer NOT NULL,
            sessions_deleted integer NOT NULL,
            oldest_remaining timestamptz,
            duration_ms double precision NOT NULL,
            triggered_by text NOT NULL DEFAULT 'manual'
        )
        """
    )


def downgrade() -> None:
    for table in ("retention_audit", "agent_instructions", "query_log", "chat_messages",
                  "chat_sessions", "chunks", "documents", "store_info"):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
