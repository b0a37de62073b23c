"""Which loader reads which file: supported suffixes, size limits, and the one entry point per source
(a path on disk, or bytes with a type)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rag_core.errors import LoaderError
from rag_core.security.paths import check_size
from rag_core.ingest.loaders.document import LoadedDocument, check_text_size, stem_of
from rag_core.ingest.loaders.html_text import load_html_bytes
from rag_core.ingest.loaders.pdf import load_pdf
from rag_core.ingest.loaders.sheets import load_csv, load_xlsx
from rag_core.ingest.loaders.text import load_text
from rag_core.ingest.loaders.word import load_docx


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


def unsupported_reason(name: str) -> str:
    """Why a file of this name is not ingested: its suffix is not a supported type, or it has none."""
    suffix = Path(name).suffix.lower()
    if not suffix:
        return (f"'{Path(name).name}' has no file extension, so its type is unknown; rename it with one of "
                f"{_supported_list()}")
    return f"unsupported file type '{suffix}'; supported: {_supported_list()}"


def _unsupported(what: str, name: str = "") -> LoaderError:
    return LoaderError(
        f"Unsupported file type '{what}'; supported: {_supported_list()}. "
        "Convert the file to one of these formats.",
        details={"file": name or None, "file_type": what, "supported": sorted(SUPPORTED_TYPES)},
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
        check_size(path.stat().st_size, max_bytes, path.name)
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
    check_size(len(data), max_bytes, name)
    if not data:
        raise LoaderError("File is empty. Add content to it or leave it out.", details={"file": name or url or None})
    stem = stem_of(name, url)
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
    check_text_size(len(doc.text), label)
    if not doc.title:
        doc.title = stem
    return doc


_LOADERS: dict[str, Callable[[bytes, str, str | None], LoadedDocument]] = {
    "md": lambda data, stem, url: load_text(data, stem, url, "md"),
    "txt": lambda data, stem, url: load_text(data, stem, url, "txt"),
    "pdf": load_pdf,
    "docx": load_docx,
    "xlsx": load_xlsx,
    "csv": load_csv,
    "html": lambda data, stem, url: load_html_bytes(data, url, stem),
}
