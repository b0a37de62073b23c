"""The sample corpus moves out of the default site into its own site, `sample`.

The app's first-run button used to index the project's README.md and docs/*.md into the default site,
where their passages came back among a user's own sources for good. It now indexes them into the site
`sample`, which "every site" leaves out. A store built before keeps its documents: those of the
default site whose source is one of this checkout's sample files move over (chunks, full-text postings
and statistics follow the site column through the chunks triggers); one already in `sample` stays and
the default site's copy is deleted. Documents under other paths are a user's own and stay where they are.

Revision ID: 0007_sample_site
Revises: 0006_inline_vectors
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

from rag_core.ingest.sample import sample_sources
from rag_core.security.ids import DEFAULT_SITE, SAMPLE_SITE

revision = "0007_sample_site"
down_revision = "0006_inline_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    sources = sample_sources()
    if not sources:
        return
    conn = op.get_bind()
    params = {"default": DEFAULT_SITE, "sample": SAMPLE_SITE, "sources": sources}
    conn.execute(sa.text(
        "DELETE FROM documents d WHERE d.site_id = :default AND d.source = ANY(:sources)"
        " AND EXISTS (SELECT 1 FROM documents s WHERE s.site_id = :sample AND s.source = d.source)"), params)
    conn.execute(sa.text("UPDATE chunks SET site_id = :sample WHERE document_id IN"
                         " (SELECT id FROM documents WHERE site_id = :default AND source = ANY(:sources))"), params)
    conn.execute(sa.text("UPDATE documents SET site_id = :sample WHERE site_id = :default AND source = ANY(:sources)"),
                 params)


def downgrade() -> None:
    pass  # the sample stays in its own site: moving it back would mix it into a user's documents again
