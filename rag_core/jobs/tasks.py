"""What each kind of job runs: one DocumentService call, with its report turned into (result, per-file errors).

Each runner takes the document service, the job's arguments as procrastinate stored them (JSON) and a
progress callback.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rag_core.ingest.pipeline import IngestReport
from rag_core.ingest.types import Progress, ProgressCallback
from rag_core.jobs import records
from rag_core.jobs.records import JobError

if TYPE_CHECKING:
    from rag_core.ingest.service import DocumentService

Outcome = tuple[dict[str, Any], list[JobError]]


def _ingest_errors(report: dict[str, Any]) -> list[JobError]:
    return [JobError(source=e["source"], reason=e["reason"] or "failed") for e in report["errors"]]


def _web_errors(report: dict[str, Any]) -> list[JobError]:
    return [JobError(source=e["url"], reason=f"{e['reason']}: {e['message']}") for e in report["errors"]]


def ingest_paths(documents: DocumentService, progress: ProgressCallback, *, paths: list[str], site_id: str,
                 include: list[str] | None = None, exclude: list[str] | None = None, prune: bool = False) -> Outcome:
    """Files and folders on the worker's machine (a shared disk when workers run elsewhere)."""
    report = documents.ingest_paths(paths, include=include or (), exclude=exclude or (), site_id=site_id,
                             progress=progress).to_dict()
    report.pop("documents", None)
    vanished = documents.vanished_sources(paths, site_id=site_id)
    for source in vanished if prune else []:
        documents.delete_source(source, site_id=site_id)
    report["pruned" if prune else "vanished"] = vanished
    return report, _ingest_errors(report)


def ingest_uploads(documents: DocumentService, progress: ProgressCallback, *, batch: str, site_id: str) -> Outcome:
    """Uploaded files kept in the database until stored; each one its own run, so each is reported."""
    files = records.file_names(documents.store.db, batch)
    report = IngestReport()
    for done, (file_id, name) in enumerate(files):
        progress(Progress(done, len(files), report.chunks, name))
        report.outcomes.append(
            documents.ingest_bytes(name, records.file_data(documents.store.db, file_id), site_id=site_id))
    progress(Progress(len(files), len(files), report.chunks, ""))
    records.drop_files(documents.store.db, batch)
    errors = [JobError(source=o.source, reason=o.reason or "failed") for o in report.failures]
    return {**report.counts(), "chunks": report.chunks, "errors": [dict(e) for e in errors]}, errors


def ingest_texts(documents: DocumentService, progress: ProgressCallback, *, texts: list[dict[str, Any]], site_id: str) -> Outcome:
    report = documents.ingest_texts(texts, site_id=site_id, progress=progress).to_dict()  # type: ignore[arg-type]
    return report, _ingest_errors(report)


def crawl(documents: DocumentService, progress: ProgressCallback, *, index_url: str, site_id: str, pattern: str = "") -> Outcome:
    report = documents.ingest_index(index_url, pattern, site_id=site_id, progress=progress).to_dict()
    return report, _web_errors(report)


def add_page(documents: DocumentService, progress: ProgressCallback, *, url: str, site_id: str) -> Outcome:
    report = documents.ingest_url(url, site_id=site_id, progress=progress).to_dict()
    return report, _web_errors(report)


def reindex(documents: DocumentService, progress: ProgressCallback) -> Outcome:
    return dict(documents.reindex(progress=progress)), []


def source_index(documents: DocumentService, progress: ProgressCallback, *, source_filter: str, site_id: str) -> Outcome:
    """`rag index source` as a job: the source-index advisor queues it for a filter whose searches were slow."""
    made = documents.index_source(source_filter, site_id=site_id, progress=progress)
    return {"source_filter": made["source_filter"], "index_name": made["index_name"], "chunks": made["chunks"]}, []


RUNNERS: dict[str, Callable[..., Outcome]] = {
    "ingest": ingest_paths, "upload": ingest_uploads, "texts": ingest_texts, "crawl": crawl,
    "add": add_page, "reindex": reindex, "source_index": source_index,
}


def describe(kind: str, args: dict[str, Any]) -> str:
    """A short line that says what a job is about (lists and the Ingestion page show it)."""
    if kind == "ingest":
        paths = [Path(p).name or p for p in args["paths"]]
        return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    if kind == "crawl":
        return args["index_url"] + (f" ({args['pattern']})" if args.get("pattern") else "")
    if kind == "add":
        return args["url"]
    if kind == "upload":
        return args.get("names", "uploaded files")
    if kind == "texts":
        return f"{len(args['texts'])} texts"
    if kind == "source_index":
        return f"HNSW index of {args['source_filter']}"
    return "re-embed every chunk"
