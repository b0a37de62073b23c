"""Web ingestion: crawl an index page or one URL, then store the pages through the ingestion pipeline.

The crawler (``rag_core.ingest.crawl``) fetches; this module decides what to (re)ingest:

* The source of a page is its requested, normalised URL; re-crawling it replaces its chunks.
* Unchanged pages are skipped: a 304 answer to the stored ETag / Last-Modified counts as unchanged
  without extracting or embedding, and a page whose extracted text and title hash to the stored
  content hash is skipped by the pipeline.
* One page's failure never stops the others; every failure is reported with its reason. Refusals
  of the URL the user gave (allowlist, scheme, private address) and a failing index page raise.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Union

from llama_index.core.base.embeddings.base import BaseEmbedding

from rag_core.db.database import Database
from rag_core.errors import CrawlRefused, FetchError
from rag_core.ingest import store
from rag_core.ingest.crawl import CrawledPage, PageError, WebCrawler, run
from rag_core.ingest.loaders import LoadedDocument
from rag_core.ingest.loaders.document import parse_date
from rag_core.ingest.pipeline import (
    PIPELINE_VERSION, IngestPipeline, Progress, ProgressCallback, SourceItem, SourceOutcome, sha256,
)
from rag_core.settings import RagSettings

EmbedderSource = Union[BaseEmbedding, Callable[[], BaseEmbedding]]

# Metadata keys that carry a page's HTTP validators between crawls.
VALIDATOR_KEYS = ("etag", "last_modified", "final_url", "crawled_at")


@dataclass
class WebIngestReport:
    """Summary of one crawl: pages stored (unchanged ones included), chunks written, errors."""

    index_url: str | None = None          # None for a single page (`rag add`)
    pages_found: int = 0                  # links kept from the index page (or 1)
    pages_ingested: int = 0               # indexed + updated + unchanged
    unchanged: int = 0
    chunks: int = 0                       # chunks written in this run
    errors: list[dict[str, str]] = field(default_factory=list)  # {url, reason, message}
    duration_s: float = 0.0
    documents: list[dict[str, Any]] = field(default_factory=list)  # {url, status, chunks, document_id}

    @property
    def error_counts(self) -> dict[str, int]:
        return dict(Counter(e["reason"] for e in self.errors))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["duration_s"] = round(self.duration_s, 3)
        data["error_counts"] = self.error_counts
        return data

    def summary_text(self) -> str:
        """The summary the CLI prints (the web-knowledge spec's output examples, in English)."""
        if self.index_url is None:
            return self._page_summary()
        unchanged = f" ({self.unchanged} unchanged)" if self.unchanged else ""
        lines = ["Crawl finished.", f"  Pages ingested: {self.pages_ingested}{unchanged}", f"  Chunks: {self.chunks}"]
        if self.errors:
            counts = ", ".join(f"{reason}: {n}" for reason, n in self.error_counts.items())
            lines.append(f"  Errors: {len(self.errors)} ({counts})")
            lines.extend(f"  - {e['url']}: {e['reason']}: {e['message']}" for e in self.errors)
        else:
            lines.append("  Errors: 0")
        if self.pages_found == 0:
            lines.append("  No link on the index page matched the pattern (and the allowlist).")
        return "\n".join(lines)

    def _page_summary(self) -> str:
        if self.errors and not self.pages_ingested:
            err = self.errors[0]
            return (f"Error: the page could not be ingested.\n  URL: {err['url']}\n"
                    f"  Reason ({err['reason']}): {err['message']}")
        doc = self.documents[0] if self.documents else {"url": "", "status": "", "chunks": 0}
        if doc["status"] == "unchanged":
            return f"Unchanged: {doc['url']} (already up to date)"
        return f"Added: {doc['url']} ({doc['chunks']} chunks)"


def ingest_url(db: Database, embedder: EmbedderSource, settings: RagSettings, url: str, *,
               site_id: str, progress: ProgressCallback | None = None) -> WebIngestReport:
    """Fetch and ingest one page; a refused URL raises CrawlRefused, a failed fetch is a report error."""
    started = time.perf_counter()
    crawler = WebCrawler(settings)
    # CrawlRefused reaches the caller with its message unchanged; the page's own port is allowed.
    normalized = crawler.policy.check(url, start=True)
    known = store.web_versions(db, site_id, [normalized])
    results = run(_fetch(crawler, [normalized], _validators(known, settings), progress))
    report = _ingest_results(db, embedder, settings, results, site_id, progress)
    report.pages_found = 1
    report.duration_s = time.perf_counter() - started
    return report


def ingest_index(db: Database, embedder: EmbedderSource, settings: RagSettings, index_url: str,
                 pattern: str = "", *, site_id: str, progress: ProgressCallback | None = None) -> WebIngestReport:
    """Read an index page (depth 1), keep the links matching ``pattern`` and ingest them."""
    started = time.perf_counter()
    crawler = WebCrawler(settings)
    index_url = crawler.policy.check(index_url, start=True)

    async def crawl() -> tuple[list[str], list[PageError], list[CrawledPage | PageError]]:
        async with crawler:
            try:
                links, refused = await crawler.extract_links(index_url, pattern)
            except (FetchError, CrawlRefused) as exc:
                raise type(exc)(f"Crawl failed: the index page could not be read. URL: {index_url} / "
                                f"Reason: {exc.message}", details=exc.details) from None
            known = await asyncio.to_thread(store.web_versions, db, site_id, links)
            results = await _fetch(crawler, links, _validators(known, settings), progress)
            return links, refused, results

    links, refused, results = run(crawl())
    report = _ingest_results(db, embedder, settings, results, site_id, progress)
    report.index_url = index_url
    report.pages_found = len(links)
    report.errors = [_error(e) for e in refused] + report.errors
    report.duration_s = time.perf_counter() - started
    return report


# --------------------------------------------------------------------------- steps


async def _fetch(crawler: WebCrawler, urls: list[str], validators: dict[str, tuple[str | None, str | None]],
                 progress: ProgressCallback | None) -> list[CrawledPage | PageError]:
    total = len(urls)
    done = 0

    def on_result(result: CrawledPage | PageError) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(Progress(done, total, 0, result.url))

    if progress:
        progress(Progress(0, total, 0, ""))
    return await crawler.fetch_many(urls, validators=validators, on_result=on_result)


def _signature(settings: RagSettings) -> str:
    """The pipeline's chunking signature, as stored in documents.metadata['chunking']."""
    return f"{settings.chunk_size}/{settings.chunk_overlap}/{PIPELINE_VERSION}"


def _validators(known: dict[str, dict[str, Any]], settings: RagSettings) -> dict[str, tuple[str | None, str | None]]:
    """Conditional-request validators of the stored pages; none when the chunking changed since
    (a 304 would then keep chunks built with the old settings)."""
    signature = _signature(settings)
    out: dict[str, tuple[str | None, str | None]] = {}
    for url, row in known.items():
        if row.get("chunking") == signature and (row.get("etag") or row.get("last_modified")):
            out[url] = (row.get("etag"), row.get("last_modified"))
    return out


def _error(err: PageError) -> dict[str, str]:
    return {"url": err.url, "reason": err.reason, "message": err.message}


def page_metadata(page: CrawledPage) -> dict[str, Any]:
    """The validators and fetch facts stored in documents.metadata for a crawled page."""
    crawled_at = None
    if page.document is not None:
        crawled_at = page.document.metadata.get("crawled_at")
    return {
        "url": page.url, "final_url": page.final_url, "etag": page.etag, "last_modified": page.last_modified,
        "crawled_at": crawled_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "content_type": page.content_type or None, "http_status": page.status,
    }


def page_item(page: CrawledPage, site_id: str) -> SourceItem:
    """A SourceItem for a fetched page: hashed on its extracted text and title, loaded already."""
    doc: LoadedDocument = page.document  # type: ignore[assignment]
    data = doc.text.encode("utf-8")
    doc_date = (parse_date(doc.metadata.get("date")) or parse_date(page.last_modified)
                or datetime.now(timezone.utc))
    return SourceItem(source=page.url, site_id=site_id, content_hash=sha256(data + (doc.title or "").encode()),
                      file_size=len(data), category="web", load=lambda: doc, doc_date=doc_date,
                      metadata=page_metadata(page))


def _ingest_results(db: Database, embedder: EmbedderSource, settings: RagSettings,
                    results: list[CrawledPage | PageError], site_id: str,
                    progress: ProgressCallback | None) -> WebIngestReport:
    """One pipeline run over every fetched page (batched embedding); 304s and errors reported."""
    report = WebIngestReport()
    total = len(results)
    outcomes: list[SourceOutcome] = []
    items: list[SourceItem] = []
    pages: dict[str, CrawledPage] = {}
    for result in results:
        if isinstance(result, PageError):
            report.errors.append(_error(result))
        elif result.not_modified:
            outcomes.append(SourceOutcome(result.url, "unchanged", site_id=site_id))
            _refresh_validators(db, site_id, result)
        else:
            items.append(page_item(result, site_id))
            pages[result.url] = result
    if items:
        model = embedder if isinstance(embedder, BaseEmbedding) else embedder()

        def on_progress(p: Progress) -> None:
            if progress:  # pages are all fetched by now; the bar keeps counting chunks
                progress(Progress(total, total, p.chunks_done, p.current))

        run_report = IngestPipeline(db, model, settings).run(items, progress=on_progress)
        for outcome in run_report.outcomes:
            outcomes.append(outcome)
            if outcome.status == "unchanged":
                _refresh_validators(db, site_id, pages[outcome.source])
    for outcome in outcomes:
        if outcome.status == "failed":
            report.errors.append({"url": outcome.source, "reason": "ingest", "message": outcome.reason or "failed"})
            continue
        report.pages_ingested += 1
        if outcome.status == "unchanged":
            report.unchanged += 1
        else:
            report.chunks += outcome.chunks
        report.documents.append({"url": outcome.source, "status": outcome.status, "chunks": outcome.chunks,
                                 "document_id": outcome.document_id})
    return report


def _refresh_validators(db: Database, site_id: str, page: CrawledPage) -> None:
    """Keep the newest validators of an unchanged page so the next crawl can get a 304."""
    meta = page_metadata(page)
    store.merge_document_metadata(db, site_id, page.url, {k: meta[k] for k in VALIDATOR_KEYS if meta[k] is not None})


__all__ = ["WebIngestReport", "ingest_index", "ingest_url", "page_item", "page_metadata"]
