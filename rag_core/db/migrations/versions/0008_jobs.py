"""Background jobs: procrastinate's queue tables, and our progress of each job.

procrastinate (a PostgreSQL task queue) keeps the queue: procrastinate_jobs, its workers and their
heartbeats, events. Its schema is the one the installed procrastinate ships (pinned to 3.10.x in
pyproject.toml); raising that pin needs a migration that applies procrastinate's own migration files
between the two versions (procrastinate/sql/migrations), so a store made earlier follows.

`jobs` holds what procrastinate does not: what a job is about (kind, site, a short description), its
progress (files done of total, chunks), the per-file errors and the final report. A row is keyed by
procrastinate's job id and goes when procrastinate deletes the job. `job_files` keeps uploaded files
until their job has stored them, so a worker on another machine can read them.

Revision ID: 0008_jobs
Revises: 0007_sample_site
Create Date: 2026-11-28
"""

from alembic import op

revision = "0008_jobs"
down_revision = "0007_sample_site"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from procrastinate.schema import SchemaManager

    # Several statements with dollar-quoted bodies: sent as they are, without placeholders to parse.
    raw = op.get_bind().connection.driver_connection
    raw.execute(SchemaManager.get_schema())
    op.execute("""
        CREATE TABLE jobs (
            id bigint PRIMARY KEY REFERENCES procrastinate_jobs(id) ON DELETE CASCADE,
            kind text NOT NULL,
            site_id text,
            description text NOT NULL DEFAULT '',
            done integer NOT NULL DEFAULT 0,
            total integer,
            chunks integer NOT NULL DEFAULT 0,
            current text,
            errors jsonb NOT NULL DEFAULT '[]'::jsonb,
            result jsonb,
            runs integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            started_at timestamptz,
            updated_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz
        )
    """)
    op.execute("CREATE INDEX jobs_site_created_idx ON jobs (site_id, created_at DESC)")
    op.execute("CREATE INDEX jobs_created_idx ON jobs (created_at DESC)")
    op.execute("""
        CREATE TABLE job_files (
            id bigserial PRIMARY KEY,
            batch text NOT NULL,
            name text NOT NULL,
            data bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        )
    """)
    op.execute("CREATE INDEX job_files_batch_idx ON job_files (batch)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS job_files")
    op.execute("DROP TABLE IF EXISTS jobs")
