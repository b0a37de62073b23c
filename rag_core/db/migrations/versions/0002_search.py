"""Search: BM25 statistics kept by triggers (term_stats, corpus_stats, chunks.fts_len), filter indexes.

Full-text ranking is BM25 computed in SQL. It needs, per site, how many chunks contain each lexeme
(term_stats) and how many chunks there are with what total length (corpus_stats), plus each chunk's
length in lexeme occurrences (chunks.fts_len).

Both tables are append-only ledgers of deltas: statement-level triggers on chunks add one row per
(site, lexeme) for every INSERT (+) and DELETE (-), including deletes cascaded from documents and
deletes issued by hand. Readers sum the rows. Writers never update a shared row, so two processes
ingesting into one site never wait on each other and cannot deadlock; `rag_compact_stats(site)`
folds a site's rows into one per lexeme (the store calls it when enough deltas piled up).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Writers lock documents, then chunks; searches read both, then log. Taking every lock up front
    # in that order means a process ingesting or searching during the upgrade waits, never deadlocks.
    op.execute("LOCK TABLE documents, chunks, query_log IN ACCESS EXCLUSIVE MODE")
    # The table rewrite below rebuilds the vector index; give it memory so it does not crawl.
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(
        """
        CREATE FUNCTION rag_fts_len(tsvector) RETURNS integer
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $fn$ SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0)::integer FROM unnest($1) $fn$
        """
    )
    # Lexeme occurrences in the chunk: BM25's document length. Generated, so no writer can forget it.
    op.execute("ALTER TABLE chunks ADD COLUMN fts_len integer GENERATED ALWAYS AS (rag_fts_len(fts)) STORED")

    op.execute(
        """
        CREATE TABLE term_stats (
            site_id text NOT NULL,
            lexeme text NOT NULL,
            df integer NOT NULL,
            compacted boolean NOT NULL DEFAULT false
        )
        """
    )
    op.execute("CREATE INDEX term_stats_site_lexeme_idx ON term_stats (site_id, lexeme) INCLUDE (df)")
    op.execute("CREATE INDEX term_stats_lexeme_idx ON term_stats (lexeme) INCLUDE (site_id, df)")
    op.execute("CREATE INDEX term_stats_pending_idx ON term_stats (site_id) WHERE NOT compacted")
    op.execute(
        """
        CREATE TABLE corpus_stats (
            site_id text NOT NULL,
            language text NOT NULL,
            n_chunks bigint NOT NULL,
            sum_len bigint NOT NULL,
            compacted boolean NOT NULL DEFAULT false
        )
        """
    )
    op.execute("CREATE INDEX corpus_stats_site_idx ON corpus_stats (site_id)")

    # Backfill from the chunks already stored (the ALTER above holds chunks exclusively until commit).
    op.execute(
        """
        INSERT INTO term_stats (site_id, lexeme, df, compacted)
        SELECT c.site_id, l.lex, count(*), true
        FROM chunks c CROSS JOIN LATERAL unnest(tsvector_to_array(c.fts)) AS l(lex)
        GROUP BY 1, 2
        """
    )
    op.execute(
        """
        INSERT INTO corpus_stats (site_id, language, n_chunks, sum_len, compacted)
        SELECT site_id, coalesce(language, 'other'), count(*), sum(fts_len), true FROM chunks GROUP BY 1, 2
        """
    )

    op.execute(
        """
        CREATE FUNCTION rag_chunks_stats_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO term_stats (site_id, lexeme, df)
            SELECT n.site_id, l.lex, count(*)
            FROM rag_new_chunks n CROSS JOIN LATERAL unnest(tsvector_to_array(n.fts)) AS l(lex)
            GROUP BY 1, 2;
            INSERT INTO corpus_stats (site_id, language, n_chunks, sum_len)
            SELECT site_id, coalesce(language, 'other'), count(*), sum(fts_len) FROM rag_new_chunks GROUP BY 1, 2;
            RETURN NULL;
        END
        $fn$
        """
    )
    op.execute(
        """
        CREATE FUNCTION rag_chunks_stats_removed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO term_stats (site_id, lexeme, df)
            SELECT o.site_id, l.lex, -count(*)
            FROM rag_old_chunks o CROSS JOIN LATERAL unnest(tsvector_to_array(o.fts)) AS l(lex)
            GROUP BY 1, 2;
            INSERT INTO corpus_stats (site_id, language, n_chunks, sum_len)
            SELECT site_id, coalesce(language, 'other'), -count(*), -sum(fts_len) FROM rag_old_chunks GROUP BY 1, 2;
            RETURN NULL;
        END
        $fn$
        """
    )
    # Updates that touch only embeddings (reindex) leave the statistics alone and exit early.
    op.execute(
        """
        CREATE FUNCTION rag_chunks_stats_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF NOT EXISTS (
                SELECT 1 FROM rag_old_chunks o JOIN rag_new_chunks n ON n.id = o.id
                WHERE o.fts IS DISTINCT FROM n.fts OR o.site_id IS DISTINCT FROM n.site_id
                   OR o.language IS DISTINCT FROM n.language
            ) THEN
                RETURN NULL;
            END IF;
            INSERT INTO term_stats (site_id, lexeme, df)
            SELECT site_id, lex, sum(d)::integer FROM (
                SELECT n.site_id, l.lex, 1 AS d
                FROM rag_new_chunks n CROSS JOIN LATERAL unnest(tsvector_to_array(n.fts)) AS l(lex)
                UNION ALL
                SELECT o.site_id, l.lex, -1
                FROM rag_old_chunks o CROSS JOIN LATERAL unnest(tsvector_to_array(o.fts)) AS l(lex)
            ) x GROUP BY 1, 2 HAVING sum(d) <> 0;
            INSERT INTO corpus_stats (site_id, language, n_chunks, sum_len)
            SELECT site_id, language, sum(n), sum(len) FROM (
                SELECT site_id, coalesce(language, 'other') AS language, 1 AS n, fts_len AS len FROM rag_new_chunks
                UNION ALL
                SELECT site_id, coalesce(language, 'other'), -1, -fts_len FROM rag_old_chunks
            ) x GROUP BY 1, 2 HAVING sum(n) <> 0 OR sum(len) <> 0;
            RETURN NULL;
        END
        $fn$
        """
    )
    op.execute(
        """
        CREATE FUNCTION rag_chunks_stats_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            DELETE FROM term_stats;
            DELETE FROM corpus_stats;
            RETURN NULL;
        END
        $fn$
        """
    )
    op.execute(
        "CREATE TRIGGER chunks_stats_added AFTER INSERT ON chunks REFERENCING NEW TABLE AS rag_new_chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_stats_added()"
    )
    op.execute(
        "CREATE TRIGGER chunks_stats_removed AFTER DELETE ON chunks REFERENCING OLD TABLE AS rag_old_chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_stats_removed()"
    )
    op.execute(
        "CREATE TRIGGER chunks_stats_changed AFTER UPDATE ON chunks"
        " REFERENCING OLD TABLE AS rag_old_chunks NEW TABLE AS rag_new_chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_stats_changed()"
    )
    op.execute(
        "CREATE TRIGGER chunks_stats_truncated AFTER TRUNCATE ON chunks"
        " FOR EACH STATEMENT EXECUTE FUNCTION rag_chunks_stats_truncated()"
    )

    # Folds a site's deltas into one row per lexeme. Safe beside concurrent writers: rows they add
    # after this statement's snapshot are not deleted and stay as deltas.
    op.execute(
        """
        CREATE FUNCTION rag_compact_stats(p_site text) RETURNS integer LANGUAGE plpgsql AS $fn$
        DECLARE
            kept integer;
        BEGIN
            IF NOT pg_try_advisory_xact_lock(hashtextextended('rag_compact_stats/' || p_site, 0)) THEN
                RETURN -1;
            END IF;
            WITH gone AS (DELETE FROM term_stats WHERE site_id = p_site RETURNING lexeme, df)
            INSERT INTO term_stats (site_id, lexeme, df, compacted)
            SELECT p_site, lexeme, sum(df), true FROM gone GROUP BY lexeme HAVING sum(df) <> 0;
            GET DIAGNOSTICS kept = ROW_COUNT;
            WITH gone AS (DELETE FROM corpus_stats WHERE site_id = p_site RETURNING language, n_chunks, sum_len)
            INSERT INTO corpus_stats (site_id, language, n_chunks, sum_len, compacted)
            SELECT p_site, language, sum(n_chunks), sum(sum_len), true FROM gone
            GROUP BY language HAVING sum(n_chunks) <> 0 OR sum(sum_len) <> 0;
            RETURN kept;
        END
        $fn$
        """
    )

    # Filters of the search read this index only: documents rows carry their whole content, so a
    # scan of the table itself costs tens of milliseconds at 40k documents.
    op.execute("CREATE INDEX documents_site_source_idx ON documents (site_id, source text_pattern_ops)"
               " INCLUDE (id, chunk_count, file_type, doc_date)")
    # Suggestions: earlier queries of a site sharing a term with this one (query_log.params.terms).
    op.execute("CREATE INDEX query_log_terms_idx ON query_log USING gin ((params -> 'terms'))")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS query_log_terms_idx")
    op.execute("DROP INDEX IF EXISTS documents_site_source_idx")
    for trig in ("chunks_stats_added", "chunks_stats_removed", "chunks_stats_changed", "chunks_stats_truncated"):
        op.execute(f"DROP TRIGGER IF EXISTS {trig} ON chunks")
    for fn in ("rag_chunks_stats_added()", "rag_chunks_stats_removed()", "rag_chunks_stats_changed()",
               "rag_chunks_stats_truncated()", "rag_compact_stats(text)"):
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    op.execute("DROP TABLE IF EXISTS term_stats")
    op.execute("DROP TABLE IF EXISTS corpus_stats")
    op.execute("ALTER TABLE chunks DROP COLUMN IF EXISTS fts_len")
    op.execute("DROP FUNCTION IF EXISTS rag_fts_len(tsvector)")
