"""SQL that writes and reads documents and chunks: batched, one savepoint per document."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence, cast

import numpy as np
import psycopg
from typing_extensions import NotRequired, TypedDict

from rag_core.db.database import Connections, Database
from rag_core.errors import EmbedderMismatch, RagError
from rag_core.security.documents import check_document
from rag_core.security.ids import every_site_sql
from rag_core.textproc import FTS_CONFIG

log = logging.getLogger(__name__)


@dataclass
class ChunkRow:
    chunk_index: int
    text: str
    start_char: int
    end_char: int
    token_count: int
    page_number: int | None
    language: str
    fts_source: str
    embedding: Sequence[float] | np.ndarray


@dataclass
class DocumentRow:
    site_id: str
    source: str
    title: str
    file_type: str
    file_size: int
    category: str
    language: str
    content_hash: str
    content: str
    doc_date: datetime | None
    metadata: dict[str, Any]
    chunks: list[ChunkRow] = field(default_factory=list)


def read_store_info(db: Database) -> tuple[str, int] | None:
    """(embedder, dimension) recorded for the store, or None before the first use."""
    with db.connection() as conn:
        row = conn.execute("SELECT embedder, embedding_dim FROM store_info WHERE id = 1").fetchone()
    return (row[0], row[1]) if row else None


def check_store_identity(db: Database, embedder: str, dim: int) -> None:
    """Record the embedder on first use; refuse to mix vector spaces afterwards."""
    with db.connection() as conn:
        row = conn.execute("SELECT embedder, embedding_dim FROM store_info WHERE id = 1").fetchone()
        if row is None:
            column_dim = conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
            ).fetchone()[0]
            if column_dim != dim:
                # The schema was created for another dimension before any embedder was recorded.
                _retype_embedding_column(conn, dim)
            conn.execute(
                "INSERT INTO store_info (id, embedder, embedding_dim) VALUES (1, %s, %s) ON CONFLICT (id) DO NOTHING",
                (embedder, dim),
            )
            row = conn.execute("SELECT embedder, embedding_dim FROM store_info WHERE id = 1").fetchone()
    if (row[0], row[1]) != (embedder, dim):
        raise EmbedderMismatch(
            f"This store was built with the embedder '{row[0]}' ({row[1]} dimensions) but RAG_EMBEDDER "
            f"is '{embedder}' ({dim} dimensions). Either set RAG_EMBEDDER back to '{row[0]}', or run "
            "`rag reindex` to re-embed every chunk with the new embedder.",
            details={"store_embedder": row[0], "store_dim": row[1], "configured_embedder": embedder, "configured_dim": dim},
        )


def _retype_embedding_column(conn: psycopg.Connection, dim: int) -> None:
    conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw_idx")
    conn.execute("UPDATE chunks SET embedding = NULL")
    conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({int(dim)})")
    # A new type brings its default storage back; vectors stay in the row (migration 0006_inline_vectors).
    conn.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN")
    conn.execute("CREATE INDEX chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding vector_cosine_ops)")


def existing_versions(db: Database, site_id: str, sources: Sequence[str]) -> dict[str, tuple[str, str]]:
    """source -> (content_hash, chunking signature) for the sources already stored."""
    return {src: (v["content_hash"], v["chunking"] or "") for src, v in web_versions(db, site_id, sources).items()}


_UPSERT = """
INSERT INTO documents (site_id, source, title, file_type, file_size, category, language,
                       content_hash, content, doc_date, chunk_count, metadata, indexed_at, updated_at)
VALUES (%(site_id)s, %(source)s, %(title)s, %(file_type)s, %(file_size)s, %(category)s, %(language)s,
        %(content_hash)s, %(content)s, %(doc_date)s, %(chunk_count)s, %(metadata)s, now(), now())
ON CONFLICT (site_id, source) DO UPDATE SET
    title = EXCLUDED.title, file_type = EXCLUDED.file_type, file_size = EXCLUDED.file_size,
    category = EXCLUDED.category, language = EXCLUDED.language, content_hash = EXCLUDED.content_hash,
    content = EXCLUDED.content, doc_date = EXCLUDED.doc_date, chunk_count = EXCLUDED.chunk_count,
    metadata = EXCLUDED.metadata, indexed_at = now(), updated_at = now()
RETURNING id, (xmax = 0) AS inserted
"""


def _lock_source(conn: psycopg.Connection, site_id: str, source: str) -> None:
    # Two processes replacing the same source wait for each other instead of interleaving.
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (f"{site_id}\x1f{source}",))


def _write_one(conn: psycopg.Connection, doc: DocumentRow) -> tuple[int, str]:
    """Write one document under its (site, source) lock: 'indexed', 'updated', or 'unchanged' when a concurrent
    ingest stored the same content with the same chunking while this one was embedding it."""
    _lock_source(conn, doc.site_id, doc.source)
    chunking = doc.metadata.get("chunking")
    if chunking:
        same = conn.execute("SELECT id FROM documents WHERE site_id = %s AND source = %s AND content_hash = %s"
                            " AND metadata->>'chunking' = %s",
                            (doc.site_id, doc.source, doc.content_hash, chunking)).fetchone()
        if same:
            return same[0], "unchanged"
    params = {
        "site_id": doc.site_id, "source": doc.source, "title": doc.title, "file_type": doc.file_type,
        "file_size": doc.file_size, "category": doc.category, "language": doc.language,
        "content_hash": doc.content_hash, "content": doc.content, "doc_date": doc.doc_date,
        "chunk_count": len(doc.chunks), "metadata": json.dumps(doc.metadata, default=str),
    }
    doc_id, inserted = conn.execute(_UPSERT, params).fetchone()
    if not inserted:
        conn.execute("DELETE FROM chunks WHERE document_id = %s", (doc_id,))
    return doc_id, "indexed" if inserted else "updated"


def _copy_chunks(conn: psycopg.Connection, items: list[tuple[int, DocumentRow]]) -> None:
    """COPY chunks into a staging table, then compute their tsvectors in one INSERT ... SELECT."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS chunk_stage ("
        " document_id bigint, site_id text, chunk_index int, text text, start_char int, end_char int,"
        " token_count int, page_number int, language text, fts_config text, fts_source text, embedding vector"
        ") ON COMMIT DELETE ROWS"
    )
    with conn.cursor().copy(
        "COPY chunk_stage (document_id, site_id, chunk_index, text, start_char, end_char, token_count,"
        " page_number, language, fts_config, fts_source, embedding) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["int8", "text", "int4", "text", "int4", "int4", "int4", "int4", "text", "text", "text", "vector"])
        for doc_id, doc in items:
            for ch in doc.chunks:
                copy.write_row((doc_id, doc.site_id, ch.chunk_index, ch.text, ch.start_char, ch.end_char,
                                ch.token_count, ch.page_number, ch.language,
                                FTS_CONFIG.get(ch.language, "simple"), ch.fts_source,
                                np.asarray(ch.embedding, dtype=np.float32)))
    conn.execute(
        "INSERT INTO chunks (document_id, site_id, chunk_index, text, start_char, end_char, token_count,"
        " page_number, language, fts, embedding, source)"
        " SELECT s.document_id, s.site_id, s.chunk_index, s.text, s.start_char, s.end_char, s.token_count,"
        " s.page_number, s.language, to_tsvector(s.fts_config::regconfig, s.fts_source), s.embedding,"
        # the document's source on each chunk: what a prefix's HNSW index selects (migration 0009); a subquery,
        # not a join, so the chunks keep the staging order (and their ids the order of their documents)
        " (SELECT d.source FROM documents d WHERE d.id = s.document_id) FROM chunk_stage s"
    )
    conn.execute("DELETE FROM chunk_stage")


def write_documents(db: Database, docs: list[DocumentRow]) -> list[tuple[DocumentRow, int | None, str, str | None]]:
    """Replace each document and its chunks; returns (doc, id, status, error) per document, in order; the status
    is 'indexed', 'updated', 'unchanged' (see _write_one) or 'failed' (with the error).

    Every document first passes the document rules (security/documents.py): this is the one gate every
    way into the store goes through. Fast path: the whole batch in one transaction. If it fails, each
    document is retried in its own transaction so one bad document cannot take the others down, and a
    failed document keeps its previous version whole.
    """
    refused: dict[int, str] = {}
    for doc in docs:
        try:
            check_document(doc.site_id, doc.source, doc.content)
        except RagError as exc:
            refused[id(doc)] = exc.message
    valid = [doc for doc in docs if id(doc) not in refused]
    outcome = {id(doc): (doc_id, status, error) for doc, doc_id, status, error in _write_valid(db, valid)}
    return [(doc, None, "failed", refused[id(doc)]) if id(doc) in refused else (doc, *outcome[id(doc)])
            for doc in docs]


def _write_valid(db: Database, docs: list[DocumentRow]) -> list[tuple[DocumentRow, int | None, str, str | None]]:
    if not docs:
        return []
    try:
        with db.connection() as conn:
            with conn.transaction():
                written = [(doc, *_write_one(conn, doc)) for doc in docs]
                _copy_chunks(conn, [(doc_id, doc) for doc, doc_id, status in written if status != "unchanged"])
    except psycopg.Error:
        pass
    else:
        compact_term_stats(db, {doc.site_id for doc in docs})
        return [(doc, doc_id, status, None) for doc, doc_id, status in written]
    results: list[tuple[DocumentRow, int | None, str, str | None]] = []
    for doc in docs:
        try:
            with db.connection() as conn:
                with conn.transaction():
                    doc_id, status = _write_one(conn, doc)
                    if status != "unchanged":
                        _copy_chunks(conn, [(doc_id, doc)])
            results.append((doc, doc_id, status, None))
        except psycopg.Error as exc:
            results.append((doc, None, "failed", f"database rejected the document: {str(exc).splitlines()[0]}"))
    compact_term_stats(db, {doc.site_id for doc, doc_id, _, _ in results if doc_id is not None})
    return results


def sources_under(db: Database, site_id: str, folders: Sequence[str]) -> list[str]:
    """The site's stored sources whose path starts with one of `folders` (each ending in '/')."""
    if not folders:
        return []
    with db.connection() as conn:
        rows = conn.execute("SELECT source FROM documents WHERE site_id = %s AND source ^@ ANY(%s)",
                            (site_id, list(folders))).fetchall()
    return sorted(r[0] for r in rows)


def delete_source(db: Database, source: str, site_id: str | None = None) -> tuple[int, int]:
    """Delete a source (in one site or all); returns (documents, chunks) deleted."""
    with db.connection() as conn:
        rows = conn.execute(
            "DELETE FROM documents WHERE source = %s AND (%s::text IS NULL OR site_id = %s) RETURNING chunk_count, site_id",
            (source, site_id, site_id),
        ).fetchall()
    compact_term_stats(db, {r[1] for r in rows})
    return len(rows), sum(r[0] for r in rows)


def delete_site_documents(db: Database, site_id: str) -> tuple[int, int]:
    """Delete every document of one site with its chunks; returns (documents, chunks) deleted."""
    with db.connection() as conn:
        docs, chunks = conn.execute(
            "WITH gone AS (DELETE FROM documents WHERE site_id = %s RETURNING chunk_count)"
            " SELECT count(*), coalesce(sum(chunk_count), 0) FROM gone", (site_id,)).fetchone()
    compact_term_stats(db, {site_id})
    return int(docs), int(chunks)


# BM25 statistics (term_stats, corpus_stats) are ledgers of deltas appended by triggers on chunks
# (migration 0002), so concurrent writers never contend for a row. Readers sum a lexeme's rows;
# once a site has this many unfolded rows they are folded into one row per lexeme.
STATS_COMPACT_AFTER = 50_000


def compact_term_stats(db: Database, site_ids: "set[str] | Sequence[str]", force: bool = False) -> None:
    """Fold the BM25 statistics deltas of these sites when enough piled up (or always with force)."""
    for site in sorted(set(site_ids)):
        try:
            with db.connection() as conn:
                if not force:
                    pending = conn.execute(
                        "SELECT count(*) FROM (SELECT 1 FROM term_stats WHERE site_id = %s AND NOT compacted LIMIT %s) x",
                        (site, STATS_COMPACT_AFTER + 1),
                    ).fetchone()[0]
                    if pending <= STATS_COMPACT_AFTER:
                        continue
                conn.execute("SELECT rag_compact_stats(%s)", (site,))
        except (psycopg.Error, RagError) as exc:  # folding is housekeeping: the deltas stay correct without it
            log.warning("Could not compact the search statistics of site %s: %s", site, exc)


# One site, or with none every site of the user's: never the evaluation sites nor the sample corpus.
_SITE_FILTER = f"((%(site)s::text IS NULL AND {every_site_sql('site_id')}) OR site_id = %(site)s)"


class StoreCounts(TypedDict):
    """What the store holds: documents, chunks and sources (of one site or all), the embedder, the database size."""

    documents: int
    chunks: int
    sources: int
    web_sources: int
    by_type: dict[str, int]
    by_site: dict[str, int]
    last_indexed_at: str | None
    embedder: str | None
    dimension: int | None
    database_bytes: int
    vector_index: bool
    chunks_without_embedding: int


class StoreStatusInfo(StoreCounts):
    """`Workbench.status()`: the counts with the configured embedder and where the database is."""

    configured_embedder: str
    embedder_mismatch: str | None
    embedder_notice: str | None  # the store opened with its own embedder instead of the default; how to move it
    database: str  # "embedded", or the server's URL without its password
    data_dir: NotRequired[str]  # the embedded server's folder


class DocumentListing(TypedDict):
    """A stored document as listed (`Workbench.documents()`)."""

    id: int
    site_id: str
    source: str
    title: str
    file_type: str
    file_size: int
    category: str
    language: str | None
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime
    doc_date: datetime | None


class DeletedCounts(TypedDict):
    """What deleting a source removed."""

    documents: int
    chunks: int


class ReindexSummary(TypedDict):
    """What `Workbench.reindex()` did: the embedder now recorded, its dimension and the chunks embedded."""

    embedder: str
    dimension: int
    chunks: int


def store_status(db: Database, site_id: str | None = None) -> StoreCounts:
    """Counts of documents, chunks, sources, per type and per site, plus the database size."""
    where = f"WHERE {_SITE_FILTER}"
    args = {"site": site_id}
    with db.connection() as conn:
        docs, chunks, sources, last = conn.execute(
            f"SELECT count(*), coalesce(sum(chunk_count), 0), count(DISTINCT source), max(indexed_at) FROM documents {where}",
            args,
        ).fetchone()
        by_type = dict(conn.execute(
            f"SELECT file_type, count(*) FROM documents {where} GROUP BY 1 ORDER BY 2 DESC", args).fetchall())
        by_site = dict(conn.execute(
            f"SELECT site_id, count(*) FROM documents {where} GROUP BY 1 ORDER BY 1", args).fetchall())
        web = conn.execute(
            f"SELECT count(*) FROM documents {where} AND (source LIKE 'http://%%' OR source LIKE 'https://%%')", args
        ).fetchone()[0]
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        info = conn.execute("SELECT embedder, embedding_dim FROM store_info WHERE id = 1").fetchone()
        unembedded = conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NULL").fetchone()[0]
        has_index = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'chunks' AND indexname = 'chunks_embedding_hnsw_idx'"
        ).fetchone()[0]
    return {
        "documents": docs, "chunks": int(chunks), "sources": sources, "web_sources": web,
        "by_type": by_type, "by_site": by_site, "last_indexed_at": last.isoformat() if last else None,
        "embedder": info[0] if info else None, "dimension": info[1] if info else None,
        "database_bytes": size, "vector_index": bool(has_index), "chunks_without_embedding": unembedded,
    }


def list_documents(db: Connections, site_id: str | None = None, limit: int = 100, offset: int = 0) -> list[DocumentListing]:
    """Documents, newest first, one page at a time."""
    with db.connection() as conn:
        cur = conn.execute(
            "SELECT id, site_id, source, title, file_type, file_size, category, language, chunk_count,"
            " created_at, updated_at, indexed_at, doc_date FROM documents"
            f" WHERE {_SITE_FILTER} ORDER BY indexed_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s",
            {"site": site_id, "limit": limit, "offset": offset},
        )
        names = [c.name for c in cur.description]
        return [cast(DocumentListing, dict(zip(names, row))) for row in cur.fetchall()]


def begin_reindex(db: Database, embedder: str, dim: int) -> None:
    """Switch the store to a new embedder: clear vectors (and retype them if the dimension changed)."""
    with db.connection() as conn:
        row = conn.execute("SELECT embedder, embedding_dim FROM store_info WHERE id = 1").fetchone()
        if row and row[0] == embedder and row[1] == dim:
            return  # resuming an interrupted reindex, or nothing to switch
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw_idx")
        conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({int(dim)}) USING NULL")
        conn.execute(
            "INSERT INTO store_info (id, embedder, embedding_dim) VALUES (1, %s, %s) ON CONFLICT (id) DO UPDATE"
            " SET embedder = EXCLUDED.embedder, embedding_dim = EXCLUDED.embedding_dim, updated_at = now()",
            (embedder, dim),
        )


def chunks_to_reembed(db: Database, embedder: str) -> int:
    """The chunks a reindex to `embedder` embeds: all of them when the store holds another one's vectors."""
    info = read_store_info(db)
    missing = "" if info is None or info[0] != embedder else " WHERE embedding IS NULL"
    with db.connection() as conn:
        return conn.execute(f"SELECT count(*) FROM chunks{missing}").fetchone()[0]


def reembed_missing(db: Database, embedder: Any, batch: int = 512, progress: Any = None) -> int:
    """Embed every chunk whose vector is NULL, one committed batch at a time."""
    from rag_core.ingest.types import Progress
    from rag_core.textproc import embedding_input

    with db.connection() as conn:
        total = conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NULL").fetchone()[0]
    if progress:
        progress(Progress(0, total, 0))
    done = 0
    while True:
        with db.connection() as conn:
            rows = conn.execute(
                "SELECT c.id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.embedding IS NULL ORDER BY c.id LIMIT %s", (batch,),
            ).fetchall()
            if not rows:
                return done
            vectors = embedder.get_text_embedding_batch([embedding_input(t, x) for _, t, x in rows])
            with conn.cursor() as cur:
                cur.executemany("UPDATE chunks SET embedding = %s WHERE id = %s",
                                [(np.asarray(v, dtype=np.float32), r[0]) for v, r in zip(vectors, rows)])
        done += len(rows)
        if progress:
            progress(Progress(done, total, done))



def web_versions(db: Database, site_id: str, sources: Sequence[str]) -> dict[str, dict[str, Any]]:
    """source -> {content_hash, chunking, etag, last_modified} of stored sources (crawl validators included)."""
    if not sources:
        return {}
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT source, content_hash, metadata->>'chunking', metadata->>'etag', metadata->>'last_modified'"
            " FROM documents WHERE site_id = %s AND source = ANY(%s)",
            (site_id, list(sources)),
        ).fetchall()
    return {r[0]: {"content_hash": r[1], "chunking": r[2], "etag": r[3], "last_modified": r[4]} for r in rows}


def documents_by_hash(db: Database, site_id: str, hashes: Sequence[str]) -> dict[str, tuple[str, bool]]:
    """content_hash -> (source, uploaded?) of the site's stored documents with one of these hashes (the
    oldest per hash)."""
    if not hashes:
        return {}
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT DISTINCT ON (content_hash) content_hash, source, coalesce((metadata->>'uploaded')::boolean, false)"
            " FROM documents WHERE site_id = %s AND content_hash = ANY(%s) ORDER BY content_hash, id",
            (site_id, list(set(hashes))),
        ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def move_source(db: Database, site_id: str, old: str, new: str, category: str, metadata: dict[str, Any]) -> bool:
    """Give a stored document another source (its chunks stay); `metadata` is merged in and 'uploaded'
    dropped. False when `old` is not stored or `new` already is."""
    with db.connection() as conn:
        with conn.transaction():
            _lock_source(conn, site_id, new)
            moved = conn.execute(
                "UPDATE documents SET source = %s, category = %s,"
                " metadata = (coalesce(metadata, '{}'::jsonb) - 'uploaded') || %s::jsonb, updated_at = now()"
                " WHERE site_id = %s AND source = %s"
                " AND NOT EXISTS (SELECT 1 FROM documents WHERE site_id = %s AND source = %s)",
                (new, category, json.dumps(metadata, default=str), site_id, old, site_id, new)).rowcount
    return bool(moved)


def stored_sources(db: Database, site_id: str, candidates: Sequence[str]) -> set[str]:
    """Those of `candidates` that are sources of stored documents of the site."""
    if not candidates:
        return set()
    with db.connection() as conn:
        rows = conn.execute("SELECT source FROM documents WHERE site_id = %s AND source = ANY(%s)",
                            (site_id, list(candidates))).fetchall()
    return {r[0] for r in rows}


def merge_document_metadata(db: Database, site_id: str, source: str, patch: dict[str, Any]) -> None:
    """Merge keys into a stored document's metadata without touching its content or chunks."""
    with db.connection() as conn:
        conn.execute(
            "UPDATE documents SET metadata = coalesce(metadata, '{}'::jsonb) || %s::jsonb"
            " WHERE site_id = %s AND source = %s",
            (json.dumps(patch, default=str), site_id, source),
        )
