"""Turn files and fetched bytes into plain text with a title, type and page spans.

Every loader returns the text exactly as it will be chunked: chunks store character offsets
into `LoadedDocument.text`, and PDF page spans are computed on that same final string.
Every failure is raised as `LoaderError` with a message that names the problem and the fix;
library exceptions never escape unwrapped.
"""

from __future__ import annotations

import codecs
import csv
import datetime as _dt
import io
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable
from urllib.parse import unquote, urlsplit

import trafilatura

from rag_core.errors import LoaderError
from rag_core.limits import MAX_DOCUMENT_CHARS
from rag_core.security.archives import check_office_zip


@dataclass
class LoadedDocument:
    """A source turned into one text; `pages` holds (page_number, start_char, end_char) spans."""

    text: str
    title: str
    file_type: str
    pages: list[tuple[int, int, int]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    language: str | None = None


# File suffix -> file type.
SUPPORTED_TYPES: dict[str, str] = {
    ".md": "md",
    ".markdown": "md",
    ".txt": "txt",
    ".text": "txt",
    ".pdf": "pdf",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".html": "html",
    ".htm": "html",
}
_FILE_TYPES = frozenset(SUPPORTED_TYPES.values())


def file_type_for(path: Path | str) -> str | None:
    """The file type for a path's suffix (case-insensitive), or None when it is not supported."""
    return SUPPORTED_TYPES.get(Path(path).suffix.lower())


def _supported_list() -> str:
    return ", ".join(sorted(SUPPORTED_TYPES))


def _unsupported(what: str, name: str = "") -> LoaderError:
    return LoaderError(
        f"Unsupported file type '{what}'; supported: {_supported_list()}. "
        "Convert the file to one of these formats.",
        details={"file": name or None, "file_type": what, "supported": sorted(SUPPORTED_TYPES)},
    )


def _human_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


def _human_limit(n: int) -> str:
    return f"{round(n / 1e6, 1):g} MB" if n >= 100_000 else f"{n} bytes"


def _check_size(size: int, max_bytes: int | None, name: str) -> None:
    if max_bytes is not None and size > max_bytes:
        raise LoaderError(
            f"File is {_human_size(size)}; the limit is {_human_limit(max_bytes)} (RAG_MAX_FILE_MB). "
            "Split the file or raise RAG_MAX_FILE_MB.",
            details={"file": name or None, "size_bytes": size, "max_bytes": max_bytes},
        )


def load_file(path: Path | str, max_bytes: int | None = None) -> LoadedDocument:
    """Read a file from disk into a LoadedDocument; the type comes from the suffix."""
    path = Path(path)
    file_type = file_type_for(path)
    if file_type is None:
        raise _unsupported(path.suffix.lower() or "(no suffix)", path.name)
    try:
        if not path.exists():
            raise LoaderError(f"File not found: {path}. Check the path.", details={"file": str(path)})
        if not path.is_file():
            raise LoaderError(f"Not a regular file: {path}. Give a file, not a folder or device.",
                              details={"file": str(path)})
        _check_size(path.stat().st_size, max_bytes, path.name)
        data = path.read_bytes()
    except LoaderError:
        raise
    except OSError as exc:
        raise LoaderError(f"Cannot read file {path}: {exc.strerror or exc}. Check that it exists and is readable.",
                          details={"file": str(path), "error": str(exc)}) from exc
    return load_bytes(data, file_type, name=path.name, max_bytes=max_bytes)


def load_bytes(data: bytes, file_type: str, name: str = "", url: str | None = None,
               max_bytes: int | None = None) -> LoadedDocument:
    """Turn a file's bytes into a LoadedDocument (uploads, PDFs fetched by the crawler).

    `file_type` is one of SUPPORTED_TYPES' values ('pdf', 'md'...); a suffix ('.pdf') is accepted too.
    `name` (a file name) and `url` only serve the title fallback and error messages.
    """
    ft = (file_type or "").strip().lower()
    if ft.startswith(".") or ft not in _FILE_TYPES:
        ft = SUPPORTED_TYPES.get(ft if ft.startswith(".") else "." + ft, "")
    if not ft:
        raise _unsupported(file_type or "(none)", name)
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise LoaderError(f"Expected the file's bytes, got {type(data).__name__}.", details={"file": name or None})
    label = name or url or "File"
    _check_size(len(data), max_bytes, name)
    if not data:
        raise LoaderError("File is empty. Add content to it or leave it out.", details={"file": name or url or None})
    stem = _stem(name, url)
    loader = _LOADERS[ft]
    try:
        doc = loader(data, stem, url)
    except LoaderError as exc:
        if exc.details is None:
            exc.details = {"file": name or url or None, "file_type": ft}
        raise
    except Exception as exc:  # any library failure becomes a LoaderError with the reason
        raise LoaderError(
            f"Could not read {ft.upper()} file {label!r}: {type(exc).__name__}: {exc}. "
            "Check that the file is not corrupt, or convert it to another supported format.",
            details={"file": name or url or None, "file_type": ft, "error": f"{type(exc).__name__}: {exc}"},
        ) from exc
    if not doc.text or doc.text.isspace():
        raise LoaderError(f"{label} has no text; add content to the file or leave it out.",
                          details={"file": name or url or None, "file_type": ft})
    _check_text_size(len(doc.text), label)
    if not doc.title:
        doc.title = stem
    return doc


# ----------------------------------------------------------------- helpers


def _check_text_size(chars: int, label: str) -> None:
    """Refuse a document whose extracted text passes MAX_DOCUMENT_CHARS: every character gets embedded."""
    if chars > MAX_DOCUMENT_CHARS:
        raise LoaderError(f"{label} holds more than {MAX_DOCUMENT_CHARS} characters of text; the limit per "
                          "document is that. Split it into smaller files.",
                          details={"chars": chars, "limit": MAX_DOCUMENT_CHARS})


def _stem(name: str, url: str | None) -> str:
    """A fallback title: the file name without suffix, else the last segment of the URL path."""
    if name:
        return Path(name).stem or name
    if url:
        try:
            parts = urlsplit(url)
        except ValueError:
            return url
        segment = unquote(PurePosixPath(parts.path).name)
        return PurePosixPath(segment).stem or segment or parts.netloc or url
    return ""


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _clean(text: str) -> str:
    """Newlines to LF, NULs removed (PostgreSQL text cannot hold them), outer blank space trimmed."""
    text = _normalise_newlines(text).replace("\x00", "")
    # Drop leading blank lines but keep a first line's indentation; drop trailing whitespace.
    return re.sub(r"\A(?:[^\S\n]*\n)+", "", text).rstrip()


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    return str(value)


# ----------------------------------------------------------------- text decoding

_UNDECODABLE = "Cannot decode text: not UTF-8 and no reliable encoding detected; convert the file to UTF-8."

# Among equally plausible decodings the first of these wins: the workbench's corpus is English,
# Russian and Japanese, and these are the legacy encodings such files come in.
_PREFERRED_ENCODINGS = (
    "cp1252", "latin_1", "iso8859_15", "cp1251", "koi8_r", "cp932", "shift_jis", "euc_jp", "iso2022_jp",
    "cp866", "mac_cyrillic", "koi8_u", "iso8859_5", "gb18030", "big5", "euc_kr", "cp1250", "cp1253",
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)


def _implausibility(text: str) -> float:
    """How unlike natural text a decoding looks: 0 is clean, higher means mojibake or binary."""
    sample = text[:20000]
    if not sample:
        return 0.0
    bad = 0.0
    latin = latin_ext = 0
    for ch in sample:
        o = ord(ch)
        if o < 128:
            if ch.isalpha():
                latin += 1
            elif o < 32 and ch not in "\t\n\r\f\v":
                bad += 3
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Co", "Cs", "Cn") or ch == "\ufffd":
            bad += 3
        elif 0x2500 <= o <= 0x259F or cat in ("So", "Sk"):
            bad += 1  # box drawing and stray symbols: a DOS/Mac code page read wrongly
        elif o < 0x250 and ch.isalpha():
            latin += 1
            latin_ext += 1
    # Western languages use accents sparingly; Cyrillic read as Latin-1 is all accents.
    if latin >= 3 and latin_ext > 0.4 * latin:
        bad += latin_ext
    return bad / len(sample)


def _preference(encodings: Iterable[str]) -> int:
    ranks = [_PREFERRED_ENCODINGS.index(e) for e in encodings if e in _PREFERRED_ENCODINGS]
    return min(ranks) if ranks else len(_PREFERRED_ENCODINGS)


def _detect_encoding(data: bytes) -> tuple[str, str] | None:
    """(text, encoding) from charset-normalizer when one decoding is clearly plausible, else None."""
    from charset_normalizer import from_bytes

    try:
        matches = list(from_bytes(data))
    except Exception:
        return None
    if not matches:
        return None
    best_chaos = min(m.chaos for m in matches)
    if best_chaos > 0.2:
        return None
    candidates = []
    for order, m in enumerate(matches):
        if m.chaos > best_chaos + 0.1:
            continue
        try:
            text = str(m)
        except Exception:
            continue
        encodings = [m.encoding, *m.could_be_from_charset]
        candidates.append((_implausibility(text), _preference(encodings), order, m, text, encodings))
    if not candidates:
        return None
    lowest = min(c[0] for c in candidates)
    if lowest > 0.02:
        return None
    near = [c for c in candidates if c[0] <= lowest + 0.005]
    _, rank, _, match, text, encodings = min(near, key=lambda c: (c[1], c[2]))
    encoding = _PREFERRED_ENCODINGS[rank] if rank < len(_PREFERRED_ENCODINGS) else match.encoding
    if encoding != match.encoding:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            encoding = match.encoding
    return text, encoding


def _decode_text(data: bytes) -> tuple[str, dict[str, Any]]:
    """Decode a text file: BOM, then strict UTF-8, then a confident detection; else LoaderError."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as exc:
                raise LoaderError(_UNDECODABLE, details={"reason": f"invalid {encoding} after its BOM: {exc}"}) from exc
            text = text.lstrip("\ufeff")
            if _implausibility(text) > 0.1:
                raise LoaderError(_UNDECODABLE, details={"reason": f"{encoding} BOM but the text looks binary"})
            return text, {"encoding": "utf-8" if encoding == "utf-8-sig" else encoding}
    if b"\x00" in data:
        raise LoaderError("Cannot decode text: the file looks binary (it contains NUL bytes); "
                          "give a text file or convert it to UTF-8 text.", details={"reason": "NUL bytes"})
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        controls = sum(1 for ch in text[:20000] if ord(ch) < 32 and ch not in "\t\n\r\f\v")
        if controls > 0.05 * min(len(text), 20000):
            raise LoaderError(_UNDECODABLE, details={"reason": "control characters: the file looks binary"})
        return text, {"encoding": "utf-8"}
    detected = _detect_encoding(data)
    if detected is not None:
        return detected[0], {"encoding": detected[1]}
    # Mostly valid UTF-8 with a few broken bytes: keep it, marking the broken bytes.
    text = data.decode("utf-8", errors="replace")
    broken = text.count("\ufffd")
    multibyte = sum(1 for ch in text if ord(ch) > 127) - broken
    if broken <= max(1, len(data) // 1000) and multibyte >= 10 * broken:
        return text, {"encoding": "utf-8", "decode_errors": broken}
    raise LoaderError(_UNDECODABLE, details={"reason": "charset detection was not confident"})


# ----------------------------------------------------------------- md / txt

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FRONT_TITLE = re.compile(r"^title\s*:\s*(.+?)\s*$", re.IGNORECASE)


def _markdown_title(text: str) -> str:
    """Front-matter `title:`, else the first heading outside code fences (ATX `# x` or setext)."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        for i in range(1, min(len(lines), 200)):
            if lines[i].strip() in ("---", "..."):
                for line in lines[1:i]:
                    m = _FRONT_TITLE.match(line)
                    if m:
                        title = m.group(1).strip().strip("\"'").strip()
                        if title:
                            return title
                start = i + 1
                break
    in_fence = False
    previous = ""
    for line in lines[start:]:
        if _FENCE.match(line):
            in_fence = not in_fence
            previous = ""
            continue
        if in_fence:
            continue
        m = _ATX.match(line)
        if m:
            return m.group(2).strip()
        if previous.strip() and _SETEXT.match(line):
            return previous.strip()
        previous = line
    return ""


def _load_text(data: bytes, stem: str, url: str | None, file_type: str) -> LoadedDocument:
    text, meta = _decode_text(data)
    text = _clean(text)
    title = _markdown_title(text) if file_type == "md" else ""
    if not title and not stem:
        first = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
        title = first if len(first) < 120 else ""
    return LoadedDocument(text=text, title=title or stem, file_type=file_type, metadata=meta)


# ----------------------------------------------------------------- pdf


# Titles that PDF printers write when the real one is unknown (a browser's "Save as PDF" of a blank tab,
# an unnamed Word document): the file name says more than these or than the first line of text.
PLACEHOLDER_PDF_TITLES = frozenset({"about:blank", "untitled", "untitled document", "document", "none", "null"})


def _load_pdf(data: bytes, stem: str, url: str | None) -> LoadedDocument:
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

    texts: list[tuple[int, str]] = []
    unreadable: list[int] = []
    for number, page in enumerate(page_list, start=1):
        try:
            raw = page.extract_text() or ""
        except Exception:
            unreadable.append(number)
            continue
        page_text = _clean(raw).strip()
        if page_text:
            texts.append((number, page_text))
    if not texts:
        if len(unreadable) == len(page_list):
            raise corrupt("text extraction failed on every page")
        raise LoaderError(
            f"PDF has no extractable text (scanned images?); run OCR on it (e.g. `ocrmypdf in.pdf out.pdf`) "
            f"and ingest the result.", details={"page_count": len(page_list)})

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
            value = _json_safe(value)
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


# ----------------------------------------------------------------- docx


def _load_docx(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    check_office_zip(data, "DOCX")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise LoaderError(
            f"DOCX is corrupt or not a Word .docx file: {exc}. Old .doc files must be saved as .docx "
            "in Word or LibreOffice first.", details={"error": f"{type(exc).__name__}: {exc}"}) from exc

    blocks: list[str] = []
    heading = ""
    tables = 0
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            para = _clean(item.text).strip()
            if not para:
                continue
            if not heading:
                try:
                    style = (item.style.name or "") if item.style is not None else ""
                except Exception:
                    style = ""
                if style.startswith(("Title", "Heading")):
                    heading = para
            blocks.append(para)
        elif isinstance(item, Table):
            rows = _docx_table_rows(item)
            if rows:
                tables += 1
                blocks.append("\n".join(rows))
    text = "\n\n".join(blocks)

    meta: dict[str, Any] = {"tables": tables}
    props_title = ""
    try:
        props = document.core_properties
        props_title = (props.title or "").strip()
        for key, value in (("author", props.author), ("created_at", props.created),
                           ("modified_at", props.modified), ("subject", props.subject)):
            value = _json_safe(value)
            if value not in (None, ""):
                meta[key] = value
    except Exception:
        pass
    return LoadedDocument(text=text, title=props_title or heading or stem, file_type="docx", metadata=meta)


def _docx_table_rows(table: Any) -> list[str]:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            key = id(cell._tc)  # a merged cell is returned once per grid column it spans
            if key in seen:
                continue
            seen.add(key)
            cells.append(" ".join(_clean(cell.text).split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


# ----------------------------------------------------------------- xlsx / csv


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, _dt.datetime):
        if value.time() == _dt.time(0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat(sep=" ")
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    return " ".join(str(value).replace("\x00", "").split())


def _column_name(index: int) -> str:
    name = ""
    n = index + 1
    while n:
        n, r = divmod(n - 1, 26)
        name = chr(65 + r) + name
    return name


def _render_rows(rows: Iterable[Iterable[Any]]) -> tuple[list[str], int]:
    """Rows as 'Header: value; ...' lines, the first non-empty row giving the headers."""
    headers: list[str] | None = None
    lines: list[str] = []
    count = 0
    chars = 0
    for raw in rows:
        values = [_cell_text(v) for v in raw]
        if not any(values):
            continue
        if headers is None:
            headers = values
            continue
        parts = []
        for i, value in enumerate(values):
            if value:
                header = headers[i] if i < len(headers) and headers[i] else f"Column {_column_name(i)}"
                parts.append(f"{header}: {value}")
        lines.append("; ".join(parts))
        count += 1
        chars += len(lines[-1]) + 1
        _check_text_size(chars, "The table")  # streamed rows: stop before a huge sheet is all in memory
    if headers is not None and not lines:
        lines.append("; ".join(h for h in headers if h))  # a header-only table still has text
    return lines, count


def _load_xlsx(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    import openpyxl

    check_office_zip(data, "XLSX")
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:
        raise LoaderError(
            f"XLSX is corrupt or not an Excel .xlsx workbook: {exc}. Old .xls files must be saved as .xlsx first.",
            details={"error": f"{type(exc).__name__}: {exc}"}) from exc
    try:
        sections: list[str] = []
        sheet_names: list[str] = []
        total_rows = 0
        for sheet in workbook.worksheets:
            sheet_names.append(sheet.title)
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()  # some writers store a wrong dimension and rows would be lost
            lines, count = _render_rows(sheet.iter_rows(values_only=True))
            if lines:
                sections.append("\n".join([f"## Sheet: {sheet.title}", *lines]))
                total_rows += count
        props = workbook.properties
        title = (getattr(props, "title", None) or "").strip()
        meta: dict[str, Any] = {"sheets": sheet_names, "rows": total_rows}
        for key, value in (("author", getattr(props, "creator", None)),
                           ("created_at", getattr(props, "created", None)),
                           ("modified_at", getattr(props, "modified", None))):
            value = _json_safe(value)
            if value not in (None, ""):
                meta[key] = value
    finally:
        try:
            workbook.close()
        except Exception:
            pass
    return LoadedDocument(text=_clean("\n\n".join(sections)), title=title or stem, file_type="xlsx", metadata=meta)


def _load_csv(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    text, meta = _decode_text(data)
    text = _normalise_newlines(text).replace("\x00", "")
    sample = text[:32768]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
        delimiter, quotechar = dialect.delimiter, dialect.quotechar or '"'
        skip_space = bool(dialect.skipinitialspace)
    except csv.Error:
        delimiter, quotechar, skip_space = ",", '"', False
    try:
        reader = csv.reader(io.StringIO(text), delimiter=delimiter, quotechar=quotechar,
                            skipinitialspace=skip_space)
        lines, count = _render_rows(reader)
    except csv.Error as exc:
        raise LoaderError(f"CSV is malformed: {exc}. Check the quoting, or save it again as UTF-8 CSV.",
                          details={"error": str(exc), "delimiter": delimiter}) from exc
    meta.update({"delimiter": delimiter, "rows": count})
    return LoadedDocument(text=_clean("\n".join(lines)), title=stem, file_type="csv", metadata=meta)


# ----------------------------------------------------------------- html

_DROP_TAGS = ("script", "style", "nav", "header", "footer", "noscript", "template", "svg", "iframe",
              "head", "object", "canvas", "button", "select")
_BLOCK_TAGS = frozenset({
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "tr",
    "table", "thead", "tbody", "section", "article", "main", "aside", "blockquote", "pre", "figure",
    "figcaption", "hr", "address", "details", "summary", "body", "caption",
})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")


def _decode_html(data: bytes) -> tuple[str, str]:
    """HTML bytes to text: BOM, strict UTF-8, the declared charset, detection, else UTF-8 with replacements."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace").lstrip("\ufeff"), encoding.replace("-sig", "")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    m = _META_CHARSET.search(data[:4096])
    if m:
        declared = m.group(1).decode("ascii", errors="ignore")
        try:
            return data.decode(declared), codecs.lookup(declared).name
        except (LookupError, UnicodeDecodeError):
            pass
    detected = _detect_encoding(data)
    if detected is not None:
        return detected[0], detected[1]
    return data.decode("utf-8", errors="replace"), "utf-8"


def _lxml_extract(markup: str) -> tuple[str, str]:
    """(text, title) of an HTML page with lxml alone; navigation, headers, footers and scripts dropped."""
    import lxml.etree
    import lxml.html

    markup = _XML_DECL.sub("", markup, count=1)
    if not markup.strip():
        return "", ""
    try:
        root = lxml.html.document_fromstring(markup)
    except (lxml.etree.ParserError, ValueError):
        return "", ""
    title = " ".join((root.findtext(".//title") or "").split())
    if not title:
        h1 = root.find(".//h1")
        title = " ".join(h1.text_content().split()) if h1 is not None else ""
    lxml.etree.strip_tags(root, lxml.etree.Comment, lxml.etree.ProcessingInstruction)  # keeps their tails
    for element in root.xpath("|".join(f"//{tag}" for tag in _DROP_TAGS)):
        if element.getparent() is not None:
            element.drop_tree()
    parts: list[str] = []
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else None
        if event == "start":
            if tag in _BLOCK_TAGS:
                parts.append("\n")
            if tag is not None and element.text:
                parts.append(element.text if tag == "pre" else _squash(element.text))
        else:
            if tag in _BLOCK_TAGS:
                parts.append("\n")
            if element.tail and element is not root:
                parts.append(_squash(element.tail))
    lines = (line.strip() for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line), title


def _squash(text: str) -> str:
    """Source line breaks and runs of spaces inside HTML text are one space when rendered."""
    return re.sub(r"\s+", " ", text)


def _extract_html(markup: str, url: str | None) -> LoadedDocument | None:
    """Main text via trafilatura, falling back to lxml; None when the page has no text at all."""
    doc = None
    try:
        doc = trafilatura.bare_extraction(
            markup, url=url, with_metadata=True, include_comments=False, include_tables=True,
            favor_recall=True,
        )
    except Exception:
        doc = None
    text = _clean(getattr(doc, "text", None) or "") if doc is not None else ""
    title = " ".join((getattr(doc, "title", None) or "").split()) if doc is not None else ""
    language = getattr(doc, "language", None) if doc is not None else None
    meta: dict[str, Any] = {}
    if doc is not None:
        for key in ("author", "date", "sitename", "description"):
            value = _json_safe(getattr(doc, key, None))
            if value:
                meta[key] = value
    fallback_text, fallback_title = _lxml_extract(markup)
    if not text:
        text = _clean(fallback_text)
        meta["extractor"] = "lxml"
    elif not fallback_text and len(text) < 500:
        # Nothing outside nav/header/footer/scripts: trafilatura's recall fallback returned menu links.
        text = ""
    if not text or text.isspace():
        return None
    return LoadedDocument(text=text, title=title or fallback_title, file_type="html", metadata=meta,
                          language=language if isinstance(language, str) and language else None)


def load_html_bytes(data: bytes | str, url: str | None = None) -> LoadedDocument:
    """Main text, title and language of an HTML page; navigation, headers, footers and scripts dropped."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        markup, encoding = _decode_html(bytes(data))
    else:
        markup, encoding = data, None
    doc = _extract_html(markup, url)
    if doc is None:
        raise LoaderError("No readable main text in the HTML page; it may need JavaScript to render, "
                          "or contain only navigation.", details={"url": url})
    if encoding:
        doc.metadata.setdefault("encoding", encoding)
    return doc


def _load_html(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    markup, encoding = _decode_html(data)
    doc = _extract_html(markup, url)
    if doc is None:
        raise LoaderError(f"HTML page {stem or url or ''!r} has no text (only markup, scripts or navigation); "
                          "give a page with readable content.")
    doc.metadata.setdefault("encoding", encoding)
    doc.title = doc.title or stem
    return doc


_LOADERS: dict[str, Callable[[bytes, str, str | None], LoadedDocument]] = {
    "md": lambda data, stem, url: _load_text(data, stem, url, "md"),
    "txt": lambda data, stem, url: _load_text(data, stem, url, "txt"),
    "pdf": _load_pdf,
    "docx": _load_docx,
    "xlsx": _load_xlsx,
    "csv": _load_csv,
    "html": _load_html,
}
