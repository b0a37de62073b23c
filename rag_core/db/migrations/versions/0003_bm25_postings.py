"""Full text: an inverted index of BM25 postings kept by triggers on chunks, built for existing stores.

`postings` holds one row per (site, lexeme, chunk): the lexeme's term frequency in the chunk and
the chunk's length in lexeme occurrences, the two facts BM25 needs that stay true as the corpus
grows (weights would go stale with the average length). The lexemes are the chunk's tsvector
lexemes, so full text ranks exactly what `to_tsvector` produced per language (stemmed English and
Russian, character bigrams under 'simple' for Japanese).

`impact` orders a lexeme's postings for a top-k search that reads only the head of each list (see
rag_core/search/hybrid.py): it is the BM25 term-frequency factor tf / (tf + k1 (1 - b + b len / L0))
at the default k1 0.9, b 0.4 and a fixed reference length L0, so it never goes stale either; the
search derives from it a bound on what any unread posting can add at the corpus's current average
length.

Statement-level triggers write the postings in the transaction that writes the chunks, so an
ingest, a replace or a delete (cascaded from documents too) changes chunks, statistics and
postings together or not at all; TRUNCATE of chunks empties postings.

Revision ID: 0003_bm25_postings
Revises: 0002
Create Date: 2026-11-25
"""

from alembic import op

revision = "0003_bm25_postings"
down_revision = "0002"
branch_labels = None
depends_on = None

# The reference chunk length of the impact order; the search module reads the same constants.
IMPACT_K1, IMPACT_B, IMPACT_LEN = 0.9, 0.4, 100.0

_POSTINGS_OF = """
    SELECT {t}.site_id, u.lexeme, {t}.id, {t}.document_id, greatest(cardinality(u.positions), 1), {t}.fts_len
    FROM {table} {t} CROSS JOIN LATERAL unnest({t}.fts) AS u
"""

_DELETE_POSTINGS_OF = """
    DELETE FROM postings p
    USING (SELECT o.site_id, l.lex, o.id FROM rag_old_chunks o
           CROSS JOIN LATERAL unnest(tsvector_to_array(o.fts)) AS l(lex)) x
    WHERE p.site_id = x.site_id AND p.lexeme = x.lex AND p.chunk_id = x.id;
"""


def upgrade() -> None:
    # Same lock order as every writer (documents, then chunks): ingests during the upgrade wait.
    op.execute("LOCK TABLE documents, chunks IN SHARE ROW EXCLUSIVE MODE")
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(
        f"""
        CREATE FUNCTION rag_bm25_impact(tf integer, len integer) RETURNS real
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $fn$ SELECT (tf / (tf + {IMPACT_K1} * (1 - {IMPACT_B} + {IMPACT_B} * len / {IMPACT_LEN})))::real $fn$
        """
    )
    op.execute(
        """
        CREATE TABLE postings (
            site_id text NOT NULL,
            lexeme text NOT NULL,
            chunk_id bigint NOT NULL,
            document_id bigint NOT NULL,
            tf integer NOT NULL,
            len integer NOT NULL,
            impact real GENERATED ALWAYS AS (rag_bm25_impact(tf, len)) STORED
        )
        """
    )
    # Build the index of the chunks already stored, then its btrees (faster than row by row).
    op.execute("INSERT INTO postings (site_id, lexeme, chunk_id, document_id, tf, len)"
               + _POSTINGS_OF.format(t="c", table="chunks"))
    # Exact lookups (rescoring a candidate, deleting a chunk's postings) and the impact-ordered walk.
    op.execute("ALTER TABLE postings ADD CONSTRAINT postings_pkey PRIMARY KEY (site_id, lexeme, chunk_id)"
               " INCLUDE (tf, len)")
    op.execute("CREATE INDEX postings_impact_idx ON postings (site_id, lexeme, impact DESC, chunk_id)"
               " INCLUDE (document_id, tf, len)")
    op.execute("ANALYZE postings")

    insert_new = ("INSERT INTO postings (site_id, lexeme, chunk_id, document_id, tf, len)"
                  + _POSTINGS_OF.format(t="n", table="rag_new_chunks") + ";")
    # Updates that touch only embeddings (reindex) leave the postings alone and exit early.
    unchanged = """
        IF NOT EXISTS (
            SELECT 1 FROM rag_old_chunks o JOIN rag_new_chunks n ON n.id = o.id
            WHERE o.fts IS DISTINCT FROM n.fts OR o.site_id IS DISTINCT FROM n.site_id
               OR o.document_id IS DISTINCT FROM n.document_id
        ) THEN
            RETURN NULL;
        END IF;
    """
    for name, body in (("added", insert_new), ("removed", _DELETE_POSTINGS_OF),
                       ("changed", unchanged + _DELETE_POSTINGS_OF + insert_new),
                       ("truncated", "DELETE FROM postings;")):
        op.execute(f"CREATE FUNCTION rag_chunks_postings_{name}() RETURNS trigger LANGUAGE plpgsql"
                   f" AS $fn$ BEGIN {body} RETURN NULL; END $fn$")
    op.execute(
        "CREATE TRIGGER chunks_postings_added AFTER INSERT ON chunks REFERENCING NEW TABLE AS rag_new_chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_postings_added()"
    )
    op.execute(
        "CREATE TRIGGER chunks_postings_removed AFTER DELETE ON chunks REFERENCING OLD TABLE AS rag_old_chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_postings_removed()"
    )
    op.execute(
        "CREATE TRIGGER chunks_postings_changed AFTER UPDATE ON chunks"
        " REFERENCING OLD TABLE AS rag_old_chunks NEW TABLE AS rag_new_chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_postings_changed()"
    )
    op.execute(
        "CREATE TRIGGER chunks_postings_truncated AFTER TRUNCATE ON chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_postings_truncated()"
    )


def downgrade() -> None:
    for trig in ("chunks_postings_added", "chunks_postings_removed", "chunks_postings_changed",
                 "chunks_postings_truncated"):
        op.execute(f"DROP TRIGGER IF EXISTS {trig} ON chunks")
    for fn in ("rag_chunks_postings_added()", "rag_chunks_postings_removed()", "rag_chunks_postings_changed()",
               "rag_chunks_postings_truncated()"):
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    op.execute("DROP TABLE IF EXISTS postings")
    op.execute("DROP FUNCTION IF EXISTS rag_bm25_impact(integer, integer)")
