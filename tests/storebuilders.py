"""Stores built for tests: a schema at a given migration, and small documents written straight to it."""

from __future__ import annotations

import uuid

import numpy as np

from rag_core.ingest.store import ChunkRow, DocumentRow


def alembic_to(url: str, target: str, dim: int) -> None:
    """Migrate the database at `url` to the Alembic revision `target` (an earlier schema, or "head")."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from rag_core.db.database import MIGRATIONS_DIR, ensure_pgvector, sqlalchemy_url

    ensure_pgvector(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["embedding_dim"] = dim
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, target)
            conn.commit()
    finally:
        engine.dispose()


def one_chunk_doc(site_id: str, source: str, text: str, dim: int, file_type: str = "md", start: int = 0) -> DocumentRow:
    """A document of one chunk with a random vector (seeded by the text's length) of `dim` dimensions."""
    chunk = ChunkRow(chunk_index=0, text=text, start_char=start, end_char=len(text), token_count=len(text.split()),
                     page_number=None, language="en", fts_source=text,
                     embedding=np.random.default_rng(len(text)).standard_normal(dim).astype(np.float32))
    return DocumentRow(site_id=site_id, source=source, title=source, file_type=file_type, file_size=len(text),
                       category="text", language="en", content_hash=uuid.uuid4().hex, content=text, doc_date=None,
                       metadata={}, chunks=[chunk])


def clustered_chunks(wb, site: str, seed: int = 11, per_folder: int = 120
                     ) -> tuple[dict[str, np.ndarray], np.random.Generator]:
    """`per_folder` one-chunk documents under near/ and far/ in `site`, their vectors around two random centres,
    written as rows stored before migration 0009 were (no source on the chunk); returns the centres and the
    random generator, to draw a query from."""
    rng = np.random.default_rng(seed)
    dim = len(wb.embedder.get_query_embedding("x"))
    centres = {"near": rng.normal(size=dim), "far": rng.normal(size=dim)}
    with wb.db.connection() as conn:
        # Migration 0011 fills a missing source on insert: rows stored before 0009 were written without it.
        conn.execute("ALTER TABLE chunks DISABLE TRIGGER chunks_source_filled")
        for name, centre in centres.items():
            for i in range(per_folder):
                doc_id = conn.execute(
                    "INSERT INTO documents (site_id, source, file_type, content_hash, content, chunk_count)"
                    " VALUES (%s, %s, 'md', 'x', 'x', 1) RETURNING id", (site, f"{name}/{i}.md")).fetchone()[0]
                v = centre + rng.normal(0, 0.8, dim)
                conn.execute(
                    "INSERT INTO chunks (document_id, site_id, chunk_index, text, start_char, end_char, language, fts,"
                    " embedding) VALUES (%s, %s, 0, 'x', 0, 1, 'en', to_tsvector('english', 'x'), %s)",
                    (doc_id, site, (v / np.linalg.norm(v)).astype(np.float32)))
        conn.execute("ALTER TABLE chunks ENABLE TRIGGER chunks_source_filled")
    return centres, rng
