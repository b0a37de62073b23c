"""PDF files (pypdf): text per page with the page spans, the title from metadata or the first line."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from rag_core.errors import LoaderError
from rag_core.ingest.loaders.document import LoadedDocument, check_text_size, clean, json_safe
from rag_core.limits import ARCHIVE_RATIO_FLOOR_BYTES, PDF_MAX_CONTENT_BYTES, PDF_MAX_CONTENT_RATIO

# Titles that PDF printers write when the real one is unknown (a browser's "Save as PDF" of a blank tab,
# an unnamed Word document): the file name says more than these or than the first line of text.
PLACEHOLDER_PDF_TITLES = frozenset({"about:blank", "untitled", "untitled document", "document", "none", "null"})


def load_pdf(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    import pypdf
    from pypdf.errors import PyPdfError

    def corrupt(reason: str, exc: BaseException | None = None) -> LoaderError:
        return LoaderError(
            f"PDF is corrupt or encrypted: {reason}. Re-export or repair the PDF (or remove its password) "
            "and ingest it again.", details={"reason": reason, "error": repr(exc) if exc else None})

    if b"%PDF-" not in data[:1024]:
        raise corrupt("no %PDF header (this is not a PDF file)")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                decrypted = reader.decrypt("")
            except Exception as exc:
                raise corrupt(f"encrypted and cannot be opened ({exc})", exc) from exc
            if not decrypted:
                raise corrupt("it is password-protected")
        page_list = list(reader.pages)
    except LoaderError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError,
            RecursionError, zipfile.BadZipFile) as exc:
        raise corrupt(str(exc) or type(exc).__name__, exc) from exc
    except Exception as exc:
        raise corrupt(f"{type(exc).__name__}: {exc}", exc) from exc
    if not page_list:
        raise corrupt("it has no pages")
    # Every page object has one place in the page tree. A tree whose nodes list the same child again and
    # again (1 KB with ten Kids per level and four levels is 10,000 pages) made one small file cost a
    # minute of text extraction per 100,000 pages; pypdf's own limit stops only at 100,000.
    refs = [p.indirect_reference.idnum for p in page_list if p.indirect_reference is not None]
    if len(set(refs)) < len(refs):
        raise corrupt(f"its page tree lists {len(refs)} pages but only {len(set(refs))} distinct page objects "
                      "(the same page repeated, as a page-tree bomb does)")

    try:
        content = _content_bytes(page_list)
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as exc:
        raise corrupt(f"a page's content cannot be read ({exc})", exc) from exc
    allowed = min(PDF_MAX_CONTENT_BYTES, max(ARCHIVE_RATIO_FLOOR_BYTES, PDF_MAX_CONTENT_RATIO * len(data)))
    if content > allowed:
        raise LoaderError(
            f"The PDF's pages unpack to {content:,} bytes of drawing instructions from a {len(data):,}-byte file "
            f"(the limit is {allowed:,}: at most {PDF_MAX_CONTENT_RATIO} times the file and "
            f"{PDF_MAX_CONTENT_BYTES:,} bytes); it looks like a decompression bomb, so its text was not extracted. "
            "If the file is genuine, split it into smaller PDFs.",
            details={"reason": "archive_limits", "content_bytes": content, "limit": allowed})

    texts: list[tuple[int, str]] = []
    unreadable: list[int] = []
    chars = 0
    for number, page in enumerate(page_list, start=1):
        try:
            raw = page.extract_text() or ""
        except Exception:
            unreadable.append(number)
            continue
        page_text = clean(raw).strip()
        if page_text:
            texts.append((number, page_text))
            chars += len(page_text) + 2
            check_text_size(chars, "The PDF")  # stop at the cap, not after every page is read
    if not texts:
        if len(unreadable) == len(page_list):
            raise corrupt("text extraction failed on every page")
        raise LoaderError(
            "PDF has no extractable text (scanned images?); run OCR on it (e.g. `ocrmypdf in.pdf out.pdf`) "
            "and ingest the result.", details={"page_count": len(page_list)})

    parts: list[str] = []
    pages: list[tuple[int, int, int]] = []
    offset = 0
    for number, page_text in texts:
        if parts:
            parts.append("\n\n")
            offset += 2
        pages.append((number, offset, offset + len(page_text)))
        parts.append(page_text)
        offset += len(page_text)
    text = "".join(parts)

    meta: dict[str, Any] = {"page_count": len(page_list)}
    if unreadable:
        meta["unreadable_pages"] = unreadable
    info_title = ""
    try:
        info = reader.metadata
    except Exception:
        info = None
    if info is not None:
        for key, getter in (("title", lambda: info.title), ("author", lambda: info.author),
                            ("subject", lambda: info.subject), ("creator", lambda: info.creator),
                            ("created_at", lambda: info.creation_date),
                            ("modified_at", lambda: info.modification_date)):
            try:
                value = getter()
            except Exception:  # malformed dates and strings in the info dictionary
                continue
            if isinstance(value, bytes):
                value = value.decode("utf-8", errors="replace")
            value = json_safe(value)
            if isinstance(value, str):
                value = value.replace("\x00", "").strip()
            if value in (None, ""):
                continue
            if key == "title":
                info_title = value
            else:
                meta[key] = value
    if info_title and info_title.lower() in PLACEHOLDER_PDF_TITLES:
        return LoadedDocument(text=text, title=stem, file_type="pdf", pages=pages, metadata=meta)
    first_line = text.split("\n", 1)[0].strip()
    title = info_title or (first_line if 0 < len(first_line) < 120 else "") or stem
    return LoadedDocument(text=text, title=title, file_type="pdf", pages=pages, metadata=meta)



_DRAW_FORM = re.compile(rb"/([^\s/\[\]()<>{}%]+)\s+Do\b")
_MAX_FORM_DEPTH = 12


def _drawn_bytes(data: bytes, resources: Any, memo: dict[tuple[int, int], int], depth: int) -> int:
    """Bytes of drawing instructions `data` runs: its own, plus each form XObject's (recursively) every time
    it is drawn. A 900-byte page drawing one 7 KB form 1,000 times cost 11 s of text extraction."""
    from pypdf.generic import IndirectObject

    total = len(data)
    if depth > _MAX_FORM_DEPTH:
        raise ValueError(f"form XObjects nested more than {_MAX_FORM_DEPTH} deep (or drawing themselves)")
    xobjects = resources.get("/XObject") if resources is not None else None
    xobjects = xobjects.get_object() if xobjects is not None else None
    if not xobjects or b"Do" not in data:
        return total
    for name in _DRAW_FORM.findall(data):
        key = "/" + name.decode("latin-1")
        ref = xobjects.raw_get(key) if key in xobjects else None
        if not isinstance(ref, IndirectObject):
            continue
        memo_key = (ref.idnum, ref.generation)
        if memo_key not in memo:
            form = ref.get_object()
            if form.get("/Subtype") != "/Form":
                memo[memo_key] = 0
                continue
            inner = form.get("/Resources")
            memo[memo_key] = _drawn_bytes(form.get_data(), inner.get_object() if inner is not None else resources,
                                          memo, depth + 1)
        total += memo[memo_key]
        if total > PDF_MAX_CONTENT_BYTES:
            break  # already too much; the caller refuses it
    return total


def _content_bytes(pages: list[Any]) -> int:
    """Bytes of drawing instructions text extraction would read: each page's content streams inflated, with
    the forms they draw, a stream counted again for every page or call that draws it."""
    memo: dict[tuple[int, int], int] = {}
    pages_memo: dict[tuple[int, int], int] = {}
    total = 0
    for page in pages:
        raw = page.raw_get("/Contents") if "/Contents" in page else None
        key = (raw.idnum, raw.generation) if hasattr(raw, "idnum") else None
        if key is None or key not in pages_memo:
            contents = page.get_contents()
            resources = page.get("/Resources")
            size = _drawn_bytes(contents.get_data() if contents is not None else b"",
                                resources.get_object() if resources is not None else None, memo, 0)
            if key is None:
                total += size
                continue
            pages_memo[key] = size
        total += pages_memo[key]
        if total > PDF_MAX_CONTENT_BYTES:
            break
    return total
