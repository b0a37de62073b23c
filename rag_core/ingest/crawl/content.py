"""What a fetched body is: content-type parsing and sniffing, text extraction, links of a page."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from rag_core.errors import LoaderError
from rag_core.ingest.loaders import LoadedDocument, load_bytes, load_html_bytes
from rag_core.ingest.loaders.encoding import refuse_binary_format, web_codec

HTML_TYPES = {"text/html", "application/xhtml+xml"}
TEXT_TYPES = {"text/plain"}
PDF_TYPES = {"application/pdf", "application/x-pdf"}


@dataclass
class RawResponse:
    """A response as received: status, declared type and charset, body bytes (bounded), validators."""

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    etag: str | None
    last_modified: str | None
    not_modified: bool = False


def _name_from_url(url: str) -> str:
    parts = urlsplit(url)
    last = parts.path.rstrip("/").rsplit("/", 1)[-1]
    return last or parts.hostname or url


def parse_content_type(header: str) -> tuple[str, str | None]:
    main, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("'\"")
    return main.strip().lower(), charset


def supported_type(content_type: str) -> bool:
    return content_type in HTML_TYPES or content_type in TEXT_TYPES or content_type in PDF_TYPES


def sniff_type(data: bytes) -> str:
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or b"<html" in head:
        return "text/html"
    return ""


def _decode(raw: RawResponse) -> str | None:
    codec = web_codec(raw.charset) if raw.charset else None  # an exotic codec is ignored: the body is sniffed
    return raw.body.decode(codec, errors="replace") if codec else None


def load_document(raw: RawResponse) -> LoadedDocument:
    """Bytes -> LoadedDocument by content type; any loader failure becomes a LoaderError."""
    try:
        if raw.content_type not in PDF_TYPES:
            if sniff_type(raw.body) == "application/pdf":
                # A PDF served as text/html or text/plain (a misconfigured server) is read as the PDF it is.
                return load_bytes(raw.body, "pdf", name=_name_from_url(raw.final_url), url=raw.final_url)
            refuse_binary_format(raw.body)  # before a declared charset turns its bytes into text
        if raw.content_type in HTML_TYPES:
            text = _decode(raw)
            return load_html_bytes(text if text is not None else raw.body, url=raw.final_url)
        name = _name_from_url(raw.final_url)
        if raw.content_type in PDF_TYPES:
            return load_bytes(raw.body, "pdf", name=name, url=raw.final_url)
        if raw.content_type in TEXT_TYPES:
            text = _decode(raw)
            data = text.encode("utf-8") if text is not None else raw.body
            return load_bytes(data, "txt", name=name, url=raw.final_url)
    except LoaderError as exc:
        details = exc.details if isinstance(exc.details, dict) else {}
        raise LoaderError(exc.message, details={**details, "url": raw.final_url, "reason": "extract"}) from None
    except ImportError as exc:
        raise LoaderError(f"No loader for {raw.content_type} ({exc})",
                          details={"url": raw.final_url, "reason": "extract"}) from None
    except Exception as exc:  # noqa: BLE001 - third-party extractors raise anything
        raise LoaderError(f"Could not extract text: {type(exc).__name__}: {exc}",
                          details={"url": raw.final_url, "reason": "extract"}) from None
    raise LoaderError(f"Unsupported content type {raw.content_type!r}",
                      details={"url": raw.final_url, "reason": "extract"})


def parse_links(raw: RawResponse) -> tuple[list[str], str | None]:
    """href values of <a> elements in document order, and the <base href> if any."""
    import lxml.html

    text = _decode(raw)
    # bytes to lxml (a str with an XML encoding declaration is rejected); declared charset wins
    source = text.encode("utf-8") if text is not None else raw.body
    if not source.strip():
        return [], None
    parser = lxml.html.HTMLParser(encoding="utf-8") if text is not None else None
    try:
        tree = lxml.html.fromstring(source, parser=parser)
    except Exception:  # noqa: BLE001 - lxml raises ParserError on empty/odd documents
        return [], None
    base = None
    for element in tree.iter("base"):
        if element.get("href"):
            base = element.get("href")
            break
    hrefs = [a.get("href") or "" for a in tree.iter("a") if a.get("href") is not None]
    return hrefs, base
