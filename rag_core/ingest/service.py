"""Documents of one store: ingest (files, uploads, texts, web pages), delete, list, status and reindex."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, cast

from psycopg.types.json import Jsonb

from rag_core.db.database import describe_url
from rag_core.errors import InvalidInput, LoaderError, NotFound
from rag_core.ingest import store as stored
from rag_core.ingest import vector_index
from rag_core.ingest.handle import Store
from rag_core.ingest.loaders import SUPPORTED_TYPES, unsupported_reason
from rag_core.ingest.pipeline import (
    IngestPipeline, IngestReport, ProgressCallback, SourceItem, SourceOutcome, category_for, discover_files,
    file_item, sha256, text_item,
)
from rag_core.ingest.sample import PROJECT_ROOT, sample_corpus_paths
from rag_core.ingest.store import DeletedCounts, DocumentListing, ReindexSummary, StoreStatusInfo
from rag_core.ingest.types import Progress, TextRecord
from rag_core.progress import notebook_progress
from rag_core.providers.embeddings import embedding_dimension
from rag_core.records import Records, StoreStatus
from rag_core.security.documents import check_document
from rag_core.security.ids import DEFAULT_SITE, SAMPLE_SITE, check_id
from rag_core.security.paths import check_size, user_path
from rag_core.security.text import check_label, file_name_problem
from rag_core.security.url_policy import CrawlAllowlist, canonical_url
from rag_core.settings import RagSettings

if TYPE_CHECKING:
    from rag_core.ingest.web import WebIngestReport

CRAWL_ALLOWLIST_SETTING = "crawl_allowed_domains"  # app_settings row: domains an admin added in the app
SOURCE_LOCK_STRIPES = 64


class DocumentService:
    """Ingestion and the stored documents of one `Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # Ingests of one (site, source) in this process wait for each other, so the second finds the first's
        # version and skips embedding it again (across processes the store's own check reports 'unchanged').
        self._source_locks = [threading.Lock() for _ in range(SOURCE_LOCK_STRIPES)]

    def ingest_paths(self, paths: Sequence[str | Path], include: Sequence[str] = (), exclude: Sequence[str] = (),
                     site_id: str = DEFAULT_SITE, progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest files and folders (recursively); unchanged files are skipped without embedding."""
        check_id(site_id, "site_id")
        self.store.require_compatible()
        files, problems = discover_files(paths, include, exclude)
        max_bytes = int(self.store.settings.max_file_mb * 1_000_000)
        items: list[SourceItem] = []
        for path in files:
            try:
                items.append(file_item(path, site_id, max_bytes))
            except (OSError, InvalidInput) as exc:
                problems.append(SourceOutcome(path.as_posix(), "failed", reason=str(exc), site_id=site_id))
            except Exception as exc:  # LoaderError for oversized files
                problems.append(SourceOutcome(path.as_posix(), "failed", reason=getattr(exc, "message", str(exc)),
                                              site_id=site_id))
        return self._run(items, progress, preloaded=problems)

    def vanished_sources(self, paths: Sequence[str | Path], site_id: str = DEFAULT_SITE) -> list[str]:
        """Stored sources under the given folders whose files are gone (deleted or renamed since they were
        ingested): re-ingesting a folder does not remove them, so they would still be found and cited."""
        folders = [user_path(p).resolve().as_posix().rstrip("/") + "/" for p in paths if user_path(p).is_dir()]
        return [s for s in stored.sources_under(self.store.db, site_id, folders) if not Path(s).exists()]

    def ingest_sample_corpus(self, site_id: str = SAMPLE_SITE,
                             progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest the project's own README.md and docs/*.md (the first-run sample corpus) into the site
        `sample`, which 'every site' leaves out: its passages never come back among a user's own sources."""
        paths = sample_corpus_paths()
        if not paths:
            raise NotFound(f"The sample corpus (README.md and docs/*.md) is not in {PROJECT_ROOT}; "
                           "run from a source checkout or ingest your own folder instead.")
        return self.ingest_paths(paths, site_id=site_id, progress=progress)

    def remove_sample_corpus(self) -> DeletedCounts:
        """Delete the sample corpus: every document of the site `sample`, with its chunks."""
        docs, chunks = stored.delete_site_documents(self.store.db, SAMPLE_SITE)
        self.store.after_write()
        return DeletedCounts(documents=docs, chunks=chunks)

    def ingest_text(self, source: str, text: str, *, site_id: str = DEFAULT_SITE, title: str | None = None,
                    file_type: str = "txt", metadata: dict[str, Any] | None = None) -> SourceOutcome:
        """Ingest raw text under a source name; the same source again replaces it."""
        check_document(site_id, source, text or "")
        if not text or not text.strip():
            raise InvalidInput(f"content of '{source}' is empty; send the document's full text.")
        check_label(title, "title")
        with self._source_locks[hash((site_id, source.strip())) % SOURCE_LOCK_STRIPES]:
            report = self._run([text_item(source.strip(), text, site_id, title, file_type, metadata)], None)
        return report.outcomes[0]

    def ingest_texts(self, records: Sequence[TextRecord], *, site_id: str,
                     progress: ProgressCallback | None = None) -> IngestReport:
        """Ingest many texts (dicts with source, text and optional title, metadata) in one run; a text the document
        rules refuse (`security/documents.py`) is reported as failed, the others are stored."""
        check_id(site_id, "site_id")
        self.store.require_compatible()
        items = [text_item(r["source"], r["text"], site_id, r.get("title"), r.get("file_type", "txt"),
                           r.get("metadata")) for r in records if r.get("text", "").strip()]
        return self._run(items, progress)

    def ingest_bytes(self, name: str, data: bytes, *, site_id: str = DEFAULT_SITE, source: str | None = None) -> SourceOutcome:
        """Ingest an uploaded file's bytes; its type comes from the name's suffix."""
        from rag_core.ingest.loaders import load_bytes

        check_id(site_id, "site_id")
        suffix = Path(name).suffix.lower()
        if suffix not in SUPPORTED_TYPES:
            return SourceOutcome(source or name, "failed", site_id=site_id,
                                 reason=unsupported_reason(name))
        src = source or name
        bad_name = file_name_problem(name)
        if bad_name:
            return SourceOutcome(src, "failed", site_id=site_id, reason=bad_name)
        check_label(source, "source")
        try:  # the limit a folder's files meet (REST caps a request, the app its uploader; a notebook neither)
            check_size(len(data), int(self.store.settings.max_file_mb * 1_000_000), name)
        except LoaderError as exc:
            return SourceOutcome(src, "failed", site_id=site_id, reason=exc.message)
        item = SourceItem(source=src, site_id=site_id, content_hash=sha256(data), file_size=len(data),
                          category=category_for(src), load=lambda: load_bytes(data, SUPPORTED_TYPES[suffix], name=name),
                          metadata={"file_name": name, "uploaded": True}, file_bytes=True,
                          received_at=datetime.now(timezone.utc))
        return self._run([item], None).outcomes[0]

    # ----- web -----
    def crawl_allowlist(self) -> CrawlAllowlist:
        """The domains the crawler may fetch: the environment's (RAG_ALLOWED_DOMAINS, the floor), the ones
        an admin stored in the database, and their union, which every crawl uses."""
        with self.store.db.connection() as conn:
            row = conn.execute("SELECT value, updated_at, updated_by FROM app_settings WHERE name = %s",
                               (CRAWL_ALLOWLIST_SETTING,)).fetchone()
        environment = list(self.store.settings.allowed_domains or [])
        stored = [d for d in (row[0] if row else []) if d not in environment]
        return CrawlAllowlist(environment=environment, stored=stored, effective=environment + stored,
                              updated_at=row[1] if row else None, updated_by=row[2] if row else None)

    def set_crawl_allowlist(self, domains: Sequence[str] | str, updated_by: str = "admin") -> CrawlAllowlist:
        """Store the domains an admin allows on top of the environment's; an entry like `example.com`,
        `*.example.com`, `example.com:8080` or a URL. Returns the new `crawl_allowlist()`."""
        from rag_core.security.url_policy import parse_entry

        if isinstance(domains, str):
            domains = domains.replace("\n", ",").split(",")
        entries: list[str] = []
        for raw in domains:
            text = str(raw).strip().lower().rstrip(".")
            if not text:
                continue
            try:
                parse_entry(text)
            except ValueError as exc:
                raise InvalidInput(f"'{raw}' is not a domain the crawler can allow ({exc}); write it as "
                                   "example.com, *.example.com or example.com:8080.") from None
            if " " in text or "/" in text.split("://", 1)[-1].rstrip("/"):
                raise InvalidInput(f"'{raw}' is not a domain; write the host only, e.g. example.com.")
            if text not in entries:
                entries.append(text)
        with self.store.db.connection() as conn:
            conn.execute(
                "INSERT INTO app_settings (name, value, updated_by) VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE"
                " SET value = EXCLUDED.value, updated_at = now(), updated_by = EXCLUDED.updated_by",
                (CRAWL_ALLOWLIST_SETTING, Jsonb(entries), updated_by))
        return self.crawl_allowlist()

    def _crawl_settings(self) -> RagSettings:
        """The settings a crawl runs with: the allowlist is the environment's plus the stored one."""
        effective = self.crawl_allowlist()["effective"]
        if effective == list(self.store.settings.allowed_domains or []):
            return self.store.settings
        return self.store.settings.model_copy(update={"allowed_domains": effective})

    def check_url(self, url: str) -> str:
        """The URL as the crawler would fetch it, or CrawlRefused naming the rule and the fix (no request is made).

        Front-ends that run crawls in the background call it first so a refusal is answered at once.
        """
        from rag_core.security.url_policy import UrlPolicy

        # The URL is one the user asked for, so its own port counts as allowed, as in a real crawl.
        return UrlPolicy(self._crawl_settings()).check(url, start=True)

    def ingest_url(self, url: str, site_id: str = DEFAULT_SITE,
                   progress: ProgressCallback | None = None) -> WebIngestReport:
        """Fetch and ingest one web page (`rag add`); a URL the crawl policy refuses raises CrawlRefused."""
        from rag_core.ingest import web

        check_id(site_id, "site_id")
        self.store.require_compatible()
        with notebook_progress(progress, "fetching", unit="page") as progress:
            report = web.ingest_url(self.store.db, lambda: self.store.embedder, self._crawl_settings(), url,
                                    site_id=site_id, progress=progress)
        self.store.after_write()
        return report

    def ingest_index(self, index_url: str, pattern: str = "", site_id: str = DEFAULT_SITE,
                     progress: ProgressCallback | None = None) -> WebIngestReport:
        """Ingest the pages linked from an index page (depth 1) whose URL matches the regex `pattern`."""
        from rag_core.ingest import web

        check_id(site_id, "site_id")
        self.store.require_compatible()
        with notebook_progress(progress, "pages", unit="page") as progress:
            report = web.ingest_index(self.store.db, lambda: self.store.embedder, self._crawl_settings(), index_url,
                                      pattern, site_id=site_id, progress=progress)
        self.store.after_write()
        return report

    def _run(self, items: list[SourceItem], progress: ProgressCallback | None,
             preloaded: Sequence[SourceOutcome] = ()) -> IngestReport:
        self.store.require_compatible()
        pipeline = IngestPipeline(self.store.db, self.store.embedder, self.store.settings)
        with notebook_progress(progress, "ingest") as progress:
            report = pipeline.run(items, progress=progress, preloaded=preloaded)
        self.store.after_write()
        return report

    def _after_write(self) -> None:
        """Hook for caches that depend on the store's content (the search cache clears here).

        The reads that follow wait for a replica that has this write (none is cached before that)."""
        self.store.reads.note_write()
        engine = self.__dict__.get("_search_engine")
        if engine is not None:
            engine.invalidate()

    def delete_source(self, source: str, site_id: str | None = None) -> DeletedCounts:
        """Delete a source (path or URL) with its chunks; a relative path is resolved like `rag ingest` does."""
        if not source or not source.strip():
            raise InvalidInput("source is empty; give the path or URL shown by `rag status` or the sources table.")
        candidates = [source.strip()]
        if source.strip().lower().startswith(("http://", "https://")):
            try:
                candidates.append(canonical_url(source))
            except ValueError:
                pass  # not a URL the crawler could have stored: only the text as given can match
        else:
            try:
                resolved = user_path(source.strip()).resolve().as_posix()
            except (OSError, RuntimeError):   # a symbolic link loop: only the text as given can match
                resolved = candidates[0]
            if resolved not in candidates:
                candidates.append(resolved)
        docs = chunks = 0
        for cand in candidates:
            d, c = stored.delete_source(self.store.db, cand, site_id)
            docs, chunks = docs + d, chunks + c
            if d:
                break
        self.store.after_write()
        return DeletedCounts(documents=docs, chunks=chunks)


    def status(self, site_id: str | None = None) -> StoreStatusInfo:
        """Documents, chunks, sources, embedder, dimension and database size."""
        result = StoreStatusInfo(**stored.store_status(self.store.db, site_id), configured_embedder=self.store.embedder_name,
                                 embedder_mismatch=self.store.embedder_mismatch(), embedder_notice=self.store.embedder_notice,
                                 database="embedded" if self.store.embedded else describe_url(self.store.database_url))
        if self.store.embedded:
            result["data_dir"] = str(self.store.settings.data_dir)
        return cast(StoreStatusInfo, StoreStatus(result))  # a type of its own, which a notebook shows as a table

    def documents(self, site_id: str | None = None, limit: int = 100, offset: int = 0) -> Records[DocumentListing]:
        """Stored documents, newest first."""
        return Records(stored.list_documents(self.store.reads, site_id, limit, offset))

    # ----- maintenance -----
    def index_source(self, source_filter: str, site_id: str, progress: ProgressCallback | None = None
                     ) -> vector_index.SourceIndex:
        """Give the chunks that a search's `source` filter keeps in a site an HNSW index of their own: searches with
        that filter (or a narrower one) walk it instead of the whole store's graph. Rerun to rebuild it."""
        with notebook_progress(progress, "indexing", unit="document") as progress:
            return vector_index.build_source_index(self.store.db, site_id, source_filter, progress)

    def source_indexes(self, site_id: str | None = None) -> list[vector_index.SourceIndex]:
        """The source filters that have an HNSW index of their own."""
        return vector_index.source_indexes(self.store.db, site_id)

    def drop_source_index(self, source_filter: str, site_id: str) -> bool:
        """Drop a source filter's own index (False when it had none); its searches walk the whole graph again."""
        return vector_index.drop_source_index(self.store.db, site_id, source_filter)

    def reindex(self, progress: ProgressCallback | None = None, batch: int = 512) -> ReindexSummary:
        """Re-embed every chunk with the configured embedder (resumable: rerun to continue).

        A store opened with its own embedder because RAG_EMBEDDER was left unset moves to the default.
        """
        if self.store.embedder_notice is not None:
            self.store.use_settings(self.store.requested_settings)
        with notebook_progress(progress, "re-embedding", unit="chunk") as progress:
            if progress:  # the total shows while the model loads
                progress(Progress(0, stored.chunks_to_reembed(self.store.db, self.store.embedder_name), 0,
                                  current=f"loading {self.store.embedder_name}"))
            dim = embedding_dimension(self.store.embedder)
            stored.begin_reindex(self.store.db, self.store.embedder_name, dim)
            done = stored.reembed_missing(self.store.db, self.store.embedder, batch=batch, progress=progress)
        vector_index.ensure(self.store.db)
        self.store.mark_compatible()
        self.store.after_write()
        return ReindexSummary(embedder=self.store.embedder_name, dimension=dim, chunks=done)
