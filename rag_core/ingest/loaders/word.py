"""DOCX files (python-docx): paragraphs and tables in document order, headings kept as lines."""

from __future__ import annotations

import io
from typing import Any

from rag_core.errors import LoaderError
from rag_core.ingest.loaders.document import LoadedDocument, clean, json_safe
from rag_core.security.archives import check_office_zip

def load_docx(data: bytes, stem: str, url: str | None) -> LoadedDocument:
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
            para = clean(item.text).strip()
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
            value = json_safe(value)
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
            cells.append(" ".join(clean(cell.text).split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return rows
