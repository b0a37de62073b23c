"""One PostgreSQL store as the services see it: settings, primary, read replicas, the embedder that built it.

Every service (documents, search, chat, sessions, jobs, evaluation) is built from a `Store` and nothing
else of ours; the Workbench only wires them together. Writes are announced through `after_write`, which
the search cache and the read router listen to.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Database, create_database_if_missing, upgrade_schema, with_database
from rag_core.db.replicas import ReadRouter
from rag_core.ingest import store, vector_index
from rag_core.providers.embeddings import (
    build_embedder, embedder_identity, embedding_dimension, store_embedder_settings, unknown_embedder,
)
from rag_core.settings import RagSettings

log = logging.getLogger(__name__)

_NOTICES_LOGGED: set[str] = set()  # databases whose embedder notice this process has logged


def adoption_notice(stored: str, default: str) -> str:
    return (f"This store was built with {stored}; the default embedder is now {default} (better search in "
            f"every language). Run `rag reindex` to move this store over, or set RAG_EMBEDDER={stored} to keep "
            "it and silence this.")


class Store:
    """The database (primary for writes, `reads` for searches and listings) and the embedder of one store."""

    def __init__(self, settings: RagSettings, db: Database, database_url: str, embedded: bool, *,
                 embedder: BaseEmbedding | None = None, reads: ReadRouter | None = None) -> None:
        """``embedder`` replaces the one the settings name (a model already loaded, a cached one); it must
        produce the vectors of ``settings.embedder``, whose name the store records.

        With RAG_EMBEDDER left to its default, a store built with another embedder opens with that one
        (``embedder_notice`` says so and how to move the store over); a RAG_EMBEDDER set to another one than
        the store's is refused at first use (EmbedderMismatch).
        """
        self.requested_settings = settings  # what the caller asked for: `reindex` moves the store to it
        self.embedder_notice: str | None = None
        info = None if "embedder" in settings.model_fields_set else store.read_store_info(db)
        adopted = store_embedder_settings(settings, info[0]) if info else None
        if adopted is not None:
            self.embedder_notice = adoption_notice(info[0], embedder_identity(settings))
            settings, embedder = adopted, None  # a model passed in is the default's, not the store's
        self.settings = settings
        self.db = db
        self.reads = reads if reads is not None else ReadRouter(db)
        self.database_url = database_url
        self.embedded = embedded
        self.embedder_name = embedder_identity(settings)
        self._embedder: BaseEmbedding | None = embedder
        self._embedder_lock = threading.Lock()
        self._checked = False
        self._write_listeners: list[Callable[[], None]] = []
        self._settings_listeners: list[Callable[[], None]] = []

    @property
    def embedder(self) -> BaseEmbedding:
        """The configured embedder, loaded on first use (which logs the embedder notice, once per process)."""
        with self._embedder_lock:
            if self._embedder is None:
                if self.embedder_notice and self.database_url not in _NOTICES_LOGGED:
                    _NOTICES_LOGGED.add(self.database_url)
                    log.warning(self.embedder_notice)
                self._embedder = build_embedder(self.settings)
            return self._embedder

    def require_compatible(self) -> None:
        """Record the embedder on first use, or refuse a store built with another one (EmbedderMismatch)."""
        if self._checked:
            return
        info = store.read_store_info(self.db)
        if info and info[0] == self.embedder_name:
            self._checked = True
            return
        store.check_store_identity(self.db, self.embedder_name, embedding_dimension(self.embedder))
        self._checked = True

    def mark_compatible(self) -> None:
        """The store now holds this embedder's vectors (after a reindex)."""
        self._checked = True

    def embedder_mismatch(self) -> str | None:
        """The mismatch message when the store was built with another embedder, else None; a RAG_EMBEDDER that
        names no embedder gets the list of known ones (`rag reindex` would only fail on it)."""
        unknown = unknown_embedder(self.settings.embedder)
        if unknown:
            return unknown
        info = store.read_store_info(self.db)
        if info is None or info[0] == self.embedder_name:
            return None
        return (f"This store was built with '{info[0]}' ({info[1]} dimensions) but RAG_EMBEDDER is "
                f"'{self.embedder_name}'; run `rag reindex` or set RAG_EMBEDDER back to '{info[0]}'.")

    def on_write(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every write to the store's documents (the search cache clears itself)."""
        self._write_listeners.append(listener)

    def on_settings_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the store moves to other settings' embedder (what was built from it is stale)."""
        self._settings_listeners.append(listener)

    def after_write(self) -> None:
        """Announce a write: the reads that follow wait for a replica that has it, caches clear."""
        self.reads.note_write()
        for listener in self._write_listeners:
            listener()

    def use_settings(self, settings: RagSettings) -> None:
        """Move to other settings' embedder (and drop everything built from the old one)."""
        with self._embedder_lock:
            self.settings = settings
            self.embedder_name = embedder_identity(settings)
            self._embedder = None
            self.embedder_notice = None
            self._checked = False
        for listener in self._settings_listeners:
            listener()

    def variant(self, settings: RagSettings) -> "Store":
        """A store handle with other settings on the same database and pools; the loaded model is shared when the
        settings name the same embedder."""
        same_model = settings.embedder == self.settings.embedder and settings.embed_model == self.settings.embed_model
        return Store(settings, self.db, self.database_url, self.embedded,
                     embedder=self.embedder if same_model else None, reads=self.reads)

    def close(self) -> None:
        """Release the connection pools (the embedded server stops when the last process exits)."""
        self.reads.close()
        self.db.close()


def resolve_database(settings: RagSettings) -> tuple[str, bool]:
    """(database URL, embedded?) — DATABASE_URL when set, else the embedded server's 'rag' database."""
    if settings.database_url:
        return settings.database_url, False
    from rag_core.db.server import embedded_server_uri

    return with_database(embedded_server_uri(settings.data_dir), "rag"), True


def upgrade_database(settings: RagSettings, embedder: BaseEmbedding | None = None) -> tuple[str, str, bool]:
    """Create the database when needed and apply every migration; returns (url, revision, embedded)."""
    url, embedded = resolve_database(settings)
    if embedded:
        create_database_if_missing(url)

    def dimension() -> int:
        if embedder is None:
            return embedding_dimension(build_embedder(settings))
        return len(embedder.get_query_embedding("dimension probe"))  # a query: caches of texts stay as they are

    return url, upgrade_schema(url, dimension), embedded


def open_store(settings: RagSettings, *, embedder: BaseEmbedding | None = None) -> Store:
    """Open the store the settings name (migrated, its vector index in place), with its read replicas."""
    url, _, embedded = upgrade_database(settings, embedder)
    restart = alive = None
    if embedded:
        from rag_core.db.server import embedded_server_running, embedded_server_uri

        def restart() -> None:  # the embedded server is ours to start again when it dies
            embedded_server_uri(settings.data_dir)

        def alive() -> bool:
            return embedded_server_running(settings.data_dir)
    db = Database(url, pool_size=settings.db_pool_size, restart=restart, server_alive=alive)
    vector_index.ensure(db)  # rebuilds an index a crashed bulk load left dropped
    reads = ReadRouter(db, settings.database_read_url, max_lag_sec=settings.replica_max_lag_sec,
                       check_every_sec=settings.replica_check_sec, pool_size=settings.db_pool_size)
    return Store(settings, db, url, embedded, embedder=embedder, reads=reads)
