"""Spreadsheets (XLSX by openpyxl) and CSV: each row rendered as "header: value; ..." lines."""

from __future__ import annotations

import csv
import datetime as _dt
import io
from collections.abc import Iterable
from typing import Any

from rag_core.errors import LoaderError
from rag_core.ingest.loaders.document import LoadedDocument, check_text_size, clean, json_safe, normalise_newlines
from rag_core.ingest.loaders.encoding import decode_text
from rag_core.limits import MAX_SHEET_CELLS
from rag_core.security.archives import check_office_zip, check_xlsx_strings

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


def _render_rows(rows: Iterable[Iterable[Any]], cells: list[int]) -> tuple[list[str], int]:
    """Rows as 'Header: value; ...' lines, the first non-empty row giving the headers.

    `cells` holds the cells read so far from this file, empty ones included; past MAX_SHEET_CELLS it stops.
    """
    headers: list[str] | None = None
    lines: list[str] = []
    count = 0
    chars = 0
    for raw in rows:
        raw = list(raw)
        cells[0] += len(raw)
        if cells[0] > MAX_SHEET_CELLS:
            raise LoaderError(
                f"The table spans more than {MAX_SHEET_CELLS:,} cells, empty ones included (a row is read as wide as "
                f"its last cell: this one has {len(raw):,}). Delete the stray cells far to the right or below the "
                "data, or split the file.", details={"cells": cells[0], "limit": MAX_SHEET_CELLS, "row_width": len(raw)})
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
        check_text_size(chars, "The table")  # streamed rows: stop before a huge sheet is all in memory
    if headers is not None and not lines:
        lines.append("; ".join(h for h in headers if h))  # a header-only table still has text
    return lines, count


def load_xlsx(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    import openpyxl

    check_office_zip(data, "XLSX")
    check_xlsx_strings(data)
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
        cells = [0]
        for sheet in workbook.worksheets:
            sheet_names.append(sheet.title)
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()  # some writers store a wrong dimension and rows would be lost
            lines, count = _render_rows(sheet.iter_rows(values_only=True), cells)
            if lines:
                sections.append("\n".join([f"## Sheet: {sheet.title}", *lines]))
                total_rows += count
        props = workbook.properties
        title = (getattr(props, "title", None) or "").strip()
        meta: dict[str, Any] = {"sheets": sheet_names, "rows": total_rows}
        for key, value in (("author", getattr(props, "creator", None)),
                           ("created_at", getattr(props, "created", None)),
                           ("modified_at", getattr(props, "modified", None))):
            value = json_safe(value)
            if value not in (None, ""):
                meta[key] = value
    finally:
        try:
            workbook.close()
        except Exception:
            pass
    return LoadedDocument(text=clean("\n\n".join(sections)), title=title or stem, file_type="xlsx", metadata=meta)


def load_csv(data: bytes, stem: str, url: str | None) -> LoadedDocument:
    text, meta = decode_text(data)
    text = normalise_newlines(text).replace("\x00", "")
    sample = text[:32768]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
        delimiter, quotechar = dialect.delimiter, dialect.quotechar or '"'
        skip_space = bool(dialect.skipinitialspace)
    except csv.Error:
        delimiter, quotechar, skip_space = ",", '"', False
    if text.count(delimiter) > MAX_SHEET_CELLS:
        # csv builds a whole row before it is seen: 20 MB of commas was one row of 20 million cells (458 MB).
        raise LoaderError(f"The CSV holds more than {MAX_SHEET_CELLS:,} '{delimiter}' separators, so more cells "
                          "than are read from one table; split the file.",
                          details={"limit": MAX_SHEET_CELLS, "delimiter": delimiter})
    try:
        reader = csv.reader(io.StringIO(text), delimiter=delimiter, quotechar=quotechar,
                            skipinitialspace=skip_space)
        lines, count = _render_rows(reader, [0])
    except csv.Error as exc:
        raise LoaderError(f"CSV is malformed: {exc}. Check the quoting, or save it again as UTF-8 CSV.",
                          details={"error": str(exc), "delimiter": delimiter}) from exc
    meta.update({"delimiter": delimiter, "rows": count})
    return LoadedDocument(text=clean("\n".join(lines)), title=stem, file_type="csv", metadata=meta)
