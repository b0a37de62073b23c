"""The ingestion pipeline: skip unchanged sources, load, chunk, embed in batches, write per document."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Database
from rag_core.errors import LoaderError, RagError
from rag_core.ingest import store, vector_index
from rag_core.ingest.chunking import chunk_text
from rag_core.ingest.loaders import SUPPORTED_TYPES, LoadedDocument, load_bytes, unsupported_reason
from rag_core.ingest.loaders.document import document_date
from rag_core.security.documents import check_document
from rag_core.security.paths import entry_problem, read_regular_file, user_path
from rag_core.security.text import file_name_problem, visible_title
from rag_core.ingest.types import Progress, ProgressCallback
from rag_core.settings import RagSettings
from rag_core.textproc import detect_language, embedding_input, fts_text

# Folders never worth indexing when walking a tree.
SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache",
             ".pytest_cache", ".ipynb_checkpoints", ".tox", "site-packages"}
# Bumped when loaders or chunking change in a way that should re-chunk unchanged files.
PIPELINE_VERSION = "2"


@dataclass
class SourceItem:
    """One source waiting to be ingested; `load` is called only when the content changed."""

    source: str
    site_id: str
    content_hash: str
    file_size: int
    category: str
    load: Callable[[], LoadedDocument]
    doc_date: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # When the content arrived (an upload, which has no file date): the document's date is then the one its own
    # metadata gives (PDF, DOCX, XLSX properties, an HTML page's date), else this.
    received_at: datetime | None = None
    # The hash is of the file's bytes (a file read from a path, an upload): within a site one such content is
    # one document, whichever way it came in.
    file_bytes: bool = False

    @property
    def uploaded(self) -> bool:
        return bool(self.metadata.get("uploaded"))


@dataclass
class SourceOutcome:
    source: str
    status: str  # indexed | updated | unchanged | skipped | failed
    chunks: int = 0
    reason: str | None = None
    document_id: int | None = None
    site_id: str | None = None


@dataclass
class IngestReport:
    """Summary of one ingestion run."""

    outcomes: list[SourceOutcome] = field(default_factory=list)
    duration_s: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def counts(self) -> dict[str, int]:
        """Sources per outcome: indexed, updated, unchanged, skipped, failed."""
        return {status: self.count(status) for status in ("indexed", "updated", "unchanged", "skipped", "failed")}

    @property
    def chunks(self) -> int:
        return sum(o.chunks for o in self.outcomes if o.status in ("indexed", "updated"))

    @property
    def failures(self) -> list[SourceOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.counts(), "chunks": self.chunks,
            "duration_s": round(self.duration_s, 3),
            "errors": [{"source": o.source, "reason": o.reason} for o in self.failures],
            "skipped_sources": [{"source": o.source, "reason": o.reason} for o in self.outcomes if o.status == "skipped"],
            "documents": [asdict(o) for o in self.outcomes if o.status in ("indexed", "updated")],
        }


def category_for(source: str) -> str:
    """Category derived from the path (the document-store spec): docs, documents, readme, web, or other."""
    if source.startswith(("http://", "https://")):
        return "web"
    parts = [p.lower() for p in Path(source).parts]
    if parts and parts[-1].startswith("readme"):
        return "readme"
    if "docs" in parts[:-1] or "doc" in parts[:-1]:
        return "docs"
    if "documents" in parts[:-1]:
        return "documents"
    return "other"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _matches(rel: str, name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)


def _utf8_path(path: Path) -> bool:
    """Whether the path's bytes on disk are UTF-8 (Python keeps other bytes as surrogate escapes)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: Path) -> str:
    """The path as printable text: bytes that are not UTF-8 appear as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


def discover_files(paths: Sequence[str | Path], include: Sequence[str] = (), exclude: Sequence[str] = ()
                   ) -> tuple[list[Path], list[SourceOutcome]]:
    """Files under the given paths (recursive), filtered by glob patterns; problems as outcomes."""
    found: list[Path] = []
    problems: list[SourceOutcome] = []
    seen: set[Path] = set()
    for raw in paths:
        root = user_path(raw)
        if not root.exists():
            problems.append(SourceOutcome(shown_path(Path(raw)), "failed", reason="path does not exist"))
            continue
        root = root.resolve()
        single = not root.is_dir()
        if single:
            candidates = [(root, root.name)]
        else:
            candidates = []
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(filenames):
                    if name.startswith("."):
                        continue
                    full = Path(dirpath) / name
                    candidates.append((full, full.relative_to(root).as_posix()))
        for full, rel in candidates:
            if include and not _matches(rel, full.name, include):
                continue
            if exclude and _matches(rel, full.name, exclude):
                continue
            # A link to a file outside the folder, a FIFO, a socket or a device is never opened.
            target, problem = entry_problem(full, full.parent if single else root)
            if problem is not None:
                problems.append(SourceOutcome(shown_path(full), "failed" if single else "skipped", reason=problem))
                continue
            full = target
            if full in seen:
                continue
            seen.add(full)
            if not _utf8_path(full):
                # Such a name cannot be stored (PostgreSQL text is UTF-8) nor printed; one of them used
                # to end the whole run with a traceback.
                problems.append(SourceOutcome(
                    shown_path(full), "failed",
                    reason="the file name is not valid UTF-8 (it was written in another encoding); rename it, "
                           "e.g. with `convmv -f cp1251 -t utf-8 --notest FILE`"))
                continue
            bad_name = file_name_problem(full.name)
            if bad_name and full.suffix.lower() in SUPPORTED_TYPES:
                # Such a name passes for another in every list that shows it ("report\u202etxt.exe.md").
                problems.append(SourceOutcome(shown_path(full), "failed", reason=bad_name))
                continue
            if full.suffix.lower() not in SUPPORTED_TYPES:
                status = "failed" if single else "skipped"
                problems.append(SourceOutcome(
                    str(full), status,
                    reason=unsupported_reason(full.name),
                ))
                continue
            found.append(full)
    return found, problems


def file_item(path: Path, site_id: str, max_bytes: int) -> SourceItem:
    """A SourceItem for a file; its hash is the hash of its bytes.

    The bytes are read again when the file is loaded, not kept: a folder's items held every file's bytes
    until the run ended (a 763 MB folder took the process to 883 MB). The second read must hash the same.
    """
    data, stat = read_regular_file(path, max_bytes)
    digest = sha256(data)
    del data
    source = path.as_posix()

    def load() -> LoadedDocument:
        try:
            again, _ = read_regular_file(path, max_bytes)
        except OSError as exc:
            raise LoaderError(f"{path.name} could not be read again ({exc.strerror or exc}): it was moved or "
                              "deleted during the run; ingest it again if it is still wanted.",
                              details={"file": path.name}) from exc
        if sha256(again) != digest:
            raise LoaderError(f"{path.name} changed while it was being ingested; ingest it again once it is "
                              "completely written.", details={"file": path.name})
        return load_bytes(again, SUPPORTED_TYPES[path.suffix.lower()], name=path.name)

    return SourceItem(
        source=source, site_id=site_id, content_hash=digest, file_size=stat.st_size,
        category=category_for(source), load=load, file_bytes=True,
        doc_date=datetime.fromtimestamp(stat.st_mtime, tz=timezone.utc),
        metadata={"file_name": path.name,
                  "modified_at": datetime.fromtimestamp(stat.st_mtime, tz=timezone.utc).isoformat(),
                  "created_at": datetime.fromtimestamp(getattr(stat, "st_birthtime", stat.st_ctime), tz=timezone.utc).isoformat()},
    )


def text_item(source: str, text: str, site_id: str, title: str | None = None, file_type: str = "txt",
              metadata: dict[str, Any] | None = None, doc_date: datetime | None = None) -> SourceItem:
    """A SourceItem for text handed over directly (the API, the evaluation corpora)."""
    data = text.encode("utf-8")
    doc = LoadedDocument(text=text, title=title or "", file_type=file_type, metadata=dict(metadata or {}))
    return SourceItem(source=source, site_id=site_id, content_hash=sha256(data + (title or "").encode()),
                      file_size=len(data), category=category_for(source), load=lambda: doc,
                      doc_date=doc_date, metadata=dict(metadata or {}))


class IngestPipeline:
    """Turns SourceItems into stored documents and chunks."""

    def __init__(self, db: Database, embedder: BaseEmbedding, settings: RagSettings) -> None:
        self.db = db
        self.embedder = embedder
        self.settings = settings
        self.signature = f"{settings.chunk_size}/{settings.chunk_overlap}/{PIPELINE_VERSION}"
        # Embed this many chunks at a time; large enough to keep the encoder busy.
        self.flush_chunks = max(256, settings.embed_batch_size * 4)

    def run(self, items: Iterable[SourceItem], total: int | None = None,
            progress: ProgressCallback | None = None, preloaded: Sequence[SourceOutcome] = ()) -> IngestReport:
        started = time.perf_counter()
        report = IngestReport(outcomes=list(preloaded))
        items = list(items)
        total = total if total is not None else len(items) + len(preloaded)
        versions: dict[tuple[str, str], tuple[str, str]] = {}
        for site in {i.site_id for i in items}:
            sources = [i.source for i in items if i.site_id == site]
            for src, ver in store.existing_versions(self.db, site, sources).items():
                versions[(site, src)] = ver
        changed = sum(1 for i in items if versions.get((i.site_id, i.source)) != (i.content_hash, self.signature))
        twins: dict[tuple[str, str], tuple[str, bool]] = {}
        for site in {i.site_id for i in items}:
            hashes = [i.content_hash for i in items
                      if i.site_id == site and i.file_bytes and (site, i.source) not in versions]
            for digest, stored in store.documents_by_hash(self.db, site, hashes).items():
                twins[(site, digest)] = stored
        rebuild_index = vector_index.should_rebuild(self.db, changed)
        if rebuild_index:
            vector_index.drop(self.db)
        try:
            self._load_all(items, versions, twins, report, total, progress)
        finally:
            if rebuild_index:
                vector_index.ensure(self.db)
        report.duration_s = time.perf_counter() - started
        return report

    def _load_all(self, items: list[SourceItem], versions: dict[tuple[str, str], tuple[str, str]],
                  twins: dict[tuple[str, str], tuple[str, bool]], report: IngestReport, total: int,
                  progress: ProgressCallback | None) -> None:
        pending: list[tuple[store.DocumentRow, list[str], bool]] = []
        pending_chunks = 0
        chunks_done = 0

        def tick(current: str = "") -> None:
            if progress:
                progress(Progress(len(report.outcomes), total, chunks_done, current))

        def flush() -> None:
            nonlocal pending, pending_chunks, chunks_done
            if not pending:
                return
            texts = [t for _, embed_texts, _ in pending for t in embed_texts]
            try:
                vectors = self.embedder.get_text_embedding_batch(texts)
            except Exception as exc:  # a provider failure fails this batch, never the stored data
                for doc, _, _ in pending:
                    report.outcomes.append(SourceOutcome(doc.source, "failed", reason=f"embedding failed: {exc}",
                                                         site_id=doc.site_id))
                pending, pending_chunks = [], 0
                tick()
                return
            pos = 0
            for doc, embed_texts, _ in pending:
                for ch in doc.chunks:
                    ch.embedding = vectors[pos]
                    pos += 1
            for doc, doc_id, status, error in store.write_documents(self.db, [d for d, _, _ in pending]):
                if error:
                    report.outcomes.append(SourceOutcome(doc.source, "failed", reason=error, site_id=doc.site_id))
                elif status == "unchanged":  # a concurrent ingest stored the same content first
                    report.outcomes.append(SourceOutcome(doc.source, "unchanged", document_id=doc_id,
                                                         site_id=doc.site_id))
                else:
                    chunks_done += len(doc.chunks)
                    report.outcomes.append(SourceOutcome(doc.source, status, len(doc.chunks), document_id=doc_id,
                                                         site_id=doc.site_id))
            pending, pending_chunks = [], 0
            tick()

        in_run: dict[tuple[str, str], str] = {}  # files of this run: (site, hash) -> source
        for item in items:
            known = versions.get((item.site_id, item.source))
            if known == (item.content_hash, self.signature):
                report.outcomes.append(SourceOutcome(item.source, "unchanged", site_id=item.site_id))
                tick(item.source)
                continue
            twin_key = (item.site_id, item.content_hash) if known is None and item.file_bytes else None
            if twin_key and (twin_key in twins or twin_key in in_run):
                report.outcomes.append(self._same_file(item, twins.get(twin_key), in_run.get(twin_key)))
                tick(item.source)
                continue
            try:
                doc = self._prepare(item)
            except RagError as exc:
                report.outcomes.append(SourceOutcome(item.source, "failed", reason=exc.message, site_id=item.site_id))
                tick(item.source)
                continue
            except Exception as exc:  # a loader bug must not stop the other files
                report.outcomes.append(SourceOutcome(item.source, "failed", reason=f"{type(exc).__name__}: {exc}",
                                                     site_id=item.site_id))
                tick(item.source)
                continue
            if twin_key:  # only a copy of a file that loaded is the same document: copies of a broken one fail too
                in_run[twin_key] = item.source
            embed_texts = [embedding_input(doc.title, ch.text) for ch in doc.chunks]
            pending.append((doc, embed_texts, known is None))
            pending_chunks += len(doc.chunks)
            if pending_chunks >= self.flush_chunks:
                flush()
        flush()

    def _same_file(self, item: SourceItem, stored: tuple[str, bool] | None, earlier: str | None) -> SourceOutcome:
        """A file whose bytes the site already holds under another source: one document, not two.

        The document keeps a path on disk over an upload's bare name (a path can be ingested again and pruned
        when its file is gone); an upload of a file stored from a path, or a second copy, adds nothing."""
        if stored is not None:
            twin, twin_uploaded = stored
            if twin_uploaded and not item.uploaded:
                patch = {**item.metadata, "uploaded_as": twin}
                if store.move_source(self.db, item.site_id, twin, item.source, item.category, patch):
                    return SourceOutcome(item.source, "unchanged", site_id=item.site_id,
                                         reason=f"the same file as the upload '{twin}', which now keeps this path")
        else:
            twin = earlier or ""
        return SourceOutcome(item.source, "unchanged", site_id=item.site_id,
                             reason=f"the same file as '{twin}', already stored; one document is kept")

    def _prepare(self, item: SourceItem) -> store.DocumentRow:
        loaded = item.load()
        text = loaded.text
        check_document(item.site_id, item.source, text)  # before any chunking or embedding
        if not text.strip():
            raise LoaderError("the document has no text")
        pieces = chunk_text(text, self.settings.chunk_size, self.settings.chunk_overlap, pages=loaded.pages or None)
        if not pieces:
            raise LoaderError("the document has no text")
        title = visible_title((loaded.title or Path(item.source.rstrip("/")).name or item.source).strip())
        doc_language = loaded.language if loaded.language in ("ru", "en", "ja") else detect_language(text)
        chunks = []
        for piece in pieces:
            lang = detect_language(piece.text)
            if lang == "other":
                lang = doc_language
            fts_source = fts_text(f"{title}\n{piece.text}" if title else piece.text, lang)
            chunks.append(store.ChunkRow(
                chunk_index=piece.index, text=piece.text, start_char=piece.start_char, end_char=piece.end_char,
                token_count=piece.token_count, page_number=piece.page_number, language=lang,
                fts_source=fts_source, embedding=[],
            ))
        metadata = {**item.metadata, **loaded.metadata, "chunking": self.signature}
        doc_date = item.doc_date
        if doc_date is None and item.received_at is not None:
            doc_date = document_date(loaded.metadata) or item.received_at
        return store.DocumentRow(
            site_id=item.site_id, source=item.source, title=title, file_type=loaded.file_type,
            file_size=item.file_size, category=item.category, language=doc_language,
            content_hash=item.content_hash, content=text, doc_date=doc_date, metadata=metadata, chunks=chunks,
        )
