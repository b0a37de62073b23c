"""App settings kept in the store: the crawl allowlist an admin edits in the app, on top of the environment's.

One row per setting name with a JSON value, when and by whom it was last changed. The environment
(RAG_ALLOWED_DOMAINS) stays the floor: entries stored here only add to it.

Revision ID: 0004_app
Revises: 0003_bm25_postings
Create Date: 2026-11-25
"""

from alembic import op

revision = "0004_app"
down_revision = "0003_bm25_postings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE app_settings (
            name text PRIMARY KEY,
            value jsonb NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            updated_by text
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE app_settings")
