"""Moving nodes between a LlamaIndex PGVectorStore table and the workbench's store, with PGVectorStore itself.

Import reads the table's nodes (text, metadata, relationships, vectors) through PGVectorStore and
stores them like nodes LlamaIndex inserts (one document per ref_doc_id). Their vectors are kept when
they come from the workbench's embedder (checked on a sample node), otherwise every node is embedded
again. Export writes the store's chunks, vectors and citation metadata into a PGVectorStore table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import psycopg
from psycopg import sql
from llama_index.core.schema import MetadataMode

from rag_core.ingest.handle import Store
from rag_core.db.database import URL_FORM, connectable_url, database_url_problem, describe_url, sqlalchemy_url
from rag_core.errors import DatabaseError, InvalidInput, NotFound
from rag_core.llamaindex.retriever import hits_to_nodes
from rag_core.llamaindex.vector_store import WorkbenchVectorStore
from rag_core.search.types import ChunkHit
from rag_core.security.ids import check_users_site

if TYPE_CHECKING:
    from llama_index.vector_stores.postgres import PGVectorStore


Progress = Callable[[int, int], None]
# Cosine similarity above which a stored vector counts as the workbench embedder's own.
SAME_EMBEDDER_COSINE = 0.98


def _checked_url(url: str) -> str:
    """--url as psycopg connects to it (with a connect timeout); a URL libpq cannot read is one line that never
    quotes it, since it may hold a password."""
    problem = database_url_problem(url)
    if problem:
        raise InvalidInput(f"--url is not a PostgreSQL URL: {problem}; write {URL_FORM}.", details={"field": "url"})
    return connectable_url(url)


def _check_table(table: str) -> str:
    name = (table or "").strip()
    if not name or not name.replace("_", "").isalnum():
        raise InvalidInput(f"Table name {table!r} is not valid; give PGVectorStore's table_name (letters, digits, _).")
    return name.lower()  # PGVectorStore lower-cases it and stores the rows in data_<name>


def _table_dimension(url: str, schema: str, table: str) -> int | None:
    try:
        conn = psycopg.connect(url)
    except psycopg.Error as exc:
        raise DatabaseError(f"Cannot connect to PostgreSQL at {describe_url(url)}: "
                            f"{_first_line(exc)}. Check --url and that the server runs.") from None
    with conn:
        row = conn.execute(
            "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding'",
            (f'"{schema}"."data_{table}"',)).fetchone()
    return int(row[0]) if row else None


def _first_line(exc: Exception) -> str:
    """libpq's reason without the rest (libpq never quotes the password in a connection failure)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def pg_vector_store(url: str, table: str, dim: int, schema: str = "public", setup: bool = False) -> "PGVectorStore":
    """LlamaIndex's PGVectorStore for a table (psycopg 3 for both its sync and async engines)."""
    from llama_index.vector_stores.postgres import PGVectorStore

    conn = sqlalchemy_url(url)
    return PGVectorStore.from_params(connection_string=conn, async_connection_string=conn, table_name=table,
                                     schema_name=schema, embed_dim=dim, perform_setup=setup)


def _dispose(pg: "PGVectorStore") -> None:
    # PGVectorStore's own close() is a coroutine; its synchronous engine is all this module used.
    engine = getattr(pg, "_engine", None)
    if engine is not None:
        engine.dispose()


def _same_embedder(handle: Store, node: Any) -> bool:
    if node.embedding is None or len(node.embedding) != len(handle.embedder.get_text_embedding("dimension probe")):
        return False
    ours = np.asarray(handle.embedder.get_text_embedding(node.get_content(metadata_mode=MetadataMode.EMBED)))
    theirs = np.asarray(node.embedding, dtype=np.float64)
    cosine = float(ours @ theirs / ((np.linalg.norm(ours) * np.linalg.norm(theirs)) or 1.0))
    return cosine >= SAME_EMBEDDER_COSINE


def import_table(handle: Store, table: str, *, site_id: str = "default", url: str | None = None,
                 schema: str = "public", batch: int = 500, progress: Progress | None = None) -> dict[str, Any]:
    """Ingest every node of a PGVectorStore table into the workbench's store (site `site_id`); a document the
    document rules refuse is skipped and listed under "refused"."""
    check_users_site(site_id)
    url = _checked_url(url) if url else connectable_url(handle.database_url)
    name = _check_table(table)
    dim = _table_dimension(url, schema, name)
    if dim is None:
        raise NotFound(f"There is no PGVectorStore table '{table}' (rows in {schema}.data_{name}) in that database; "
                       "check the table_name you gave PGVectorStore and --url.")
    with psycopg.connect(url) as conn:
        rows = conn.execute(sql.SQL("SELECT node_id, coalesce(metadata_::jsonb->>'ref_doc_id', node_id) FROM {}.{}"
                                    " ORDER BY 2, id").format(sql.Identifier(schema), sql.Identifier(f"data_{name}"))
                            ).fetchall()
    pg = pg_vector_store(url, name, dim, schema)
    target = WorkbenchVectorStore(handle, site_id=site_id)
    keep_vectors: bool | None = None
    done = 0
    refused: list[str] = []
    try:
        start = 0
        while start < len(rows):
            end = min(start + batch, len(rows))
            while end < len(rows) and rows[end][1] == rows[end - 1][1]:
                end += 1  # a document's nodes stay in one batch: adding them replaces the document
            nodes = pg.get_nodes(node_ids=[r[0] for r in rows[start:end]])
            if keep_vectors is None and nodes:
                keep_vectors = _same_embedder(handle, nodes[0])
            if not keep_vectors:
                for node in nodes:
                    node.embedding = None
            try:
                target.add(nodes)
            except InvalidInput as exc:  # the batch's other documents are stored
                refused.extend((exc.details or {}).get("refused", [exc.message]))
            done += len(nodes)
            start = end
            if progress:
                progress(done, len(rows))
    finally:
        _dispose(pg)
    return {"table": name, "site_id": site_id, "nodes": done, "documents": len({r[1] for r in rows}),
            "dimension": dim, "re_embedded": bool(rows) and not keep_vectors, "refused": refused}


_EXPORT_SQL = """
SELECT c.id, c.document_id, c.site_id, d.source, d.title, d.file_type, c.chunk_index, c.text, c.start_char,
       c.end_char, c.page_number, c.language, c.embedding
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.site_id = %(site)s AND c.embedding IS NOT NULL AND c.id > %(after)s
ORDER BY c.id LIMIT %(batch)s
"""


def export_table(handle: Store, table: str, *, site_id: str = "default", url: str | None = None,
                 schema: str = "public", batch: int = 500, progress: Progress | None = None) -> dict[str, Any]:
    """Write a site's chunks with their vectors and metadata into a PGVectorStore table (created if missing)."""
    url = _checked_url(url) if url else connectable_url(handle.database_url)
    name = _check_table(table)
    handle.require_compatible()
    from rag_core.ingest import store

    dim = store.read_store_info(handle.db)[1]
    existing = _table_dimension(url, schema, name)
    if existing is not None and existing != dim:
        raise InvalidInput(f"The PGVectorStore table '{name}' holds {existing}-dimensional vectors but this store's "
                           f"are {dim}-dimensional; export into a new table name.")
    with handle.db.connection() as conn:
        total = conn.execute("SELECT count(*) FROM chunks WHERE site_id = %s AND embedding IS NOT NULL",
                             (site_id,)).fetchone()[0]
    if not total:
        raise NotFound(f"Site '{site_id}' has no chunks to export; check the site with `rag status --site {site_id}`.")
    pg = pg_vector_store(url, name, dim, schema, setup=True)
    done, after = 0, 0
    try:
        while True:
            with handle.db.connection() as conn:
                rows = conn.execute(_EXPORT_SQL, {"site": site_id, "after": after, "batch": batch}).fetchall()
            if not rows:
                break
            hits = [ChunkHit(chunk_id=r[0], document_id=r[1], site_id=r[2], source=r[3], title=r[4], file_type=r[5],
                             chunk_index=r[6], text=r[7], start_char=r[8], end_char=r[9], page_number=r[10],
                             similarity=0.0, score=0.0, language=r[11]) for r in rows]
            nodes = []
            for row, item in zip(rows, hits_to_nodes(handle, hits)):
                node = item.node
                for key in ("similarity", "score", "dense_rank", "fulltext_rank", "fulltext_score"):
                    node.metadata.pop(key, None)  # scores of a query, not of the chunk
                vector = row[12]
                node.embedding = [float(x) for x in (vector.to_list() if hasattr(vector, "to_list") else vector)]
                nodes.append(node)
            pg.add(nodes)
            done += len(nodes)
            after = rows[-1][0]
            if progress:
                progress(done, total)
    finally:
        _dispose(pg)
    return {"table": name, "site_id": site_id, "nodes": done, "dimension": dim}
