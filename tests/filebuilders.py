"""Real files of every supported type, built in tests (shared by loader and pipeline tests)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

PAGE_SENTENCES = [
    "Page one explains how apple orchards are irrigated in spring.",
    "Page two describes the blue submarine engine and its cooling loop.",
    "Третья страница рассказывает о русской зиме и глубоком снеге.",
]


def make_pdf(sentences: list[str], title: str | None = None, author: str | None = None) -> bytes:
    """A real PDF with one sentence per page, written with fpdf2 (DejaVu for Cyrillic when present)."""
    from fpdf import FPDF

    pdf = FPDF()
    if DEJAVU.exists():
        pdf.add_font("DejaVu", "", str(DEJAVU))
        pdf.set_font("DejaVu", size=12)
    else:
        pdf.set_font("Helvetica", size=12)
    if title:
        pdf.set_title(title)
    if author:
        pdf.set_author(author)
    for sentence in sentences:
        pdf.add_page()
        if sentence:
            pdf.multi_cell(0, 10, sentence)
    return bytes(pdf.output())


def pdf_of(objects: dict[int, bytes]) -> bytes:
    """A PDF of these numbered objects (1 is the catalog), written by hand with a correct xref table."""
    out, offsets = bytearray(b"%PDF-1.4\n"), {}
    for i in sorted(objects):
        offsets[i] = len(out)
        out += b"%d 0 obj\n" % i + objects[i] + b"\nendobj\n"
    xref, size = len(out), max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    out += b"".join(b"%010d 00000 n \n" % offsets[i] for i in range(1, size))
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


def pdf_sentences() -> list[str]:
    """Three pages with a Russian one when a Cyrillic font is available, else two English pages."""
    return PAGE_SENTENCES if DEJAVU.exists() else PAGE_SENTENCES[:2]


def make_docx(path: Path, core_title: str = "") -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = core_title
    document.core_properties.author = "Grace Writer"
    document.add_paragraph("Intro paragraph before the heading.")
    document.add_heading("Project Charter", level=1)
    document.add_paragraph("The project builds a retrieval workbench.")
    table = document.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Name", "Role"), ("Alice", "Engineer"), ("Bob", "Designer")]):
        table.cell(r, 0).text = a
        table.cell(r, 1).text = b
    document.add_paragraph("")
    document.add_paragraph("Closing words after the table.")
    document.save(str(path))
    return path


def make_xlsx(path: Path, title: str | None = None) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Staff"
    ws.append([])  # leading empty row: headers are the first non-empty row
    ws.append(["Name", "Age", "Joined", None])
    ws.append(["Alice", 34, dt.datetime(2021, 3, 1), None])
    ws.append([None, None, None, None])  # skipped
    ws.append(["Bob", 41.5, None, "note without header"])
    prices = wb.create_sheet("Prices")
    prices.append(["Item", "Price"])
    prices.append(["Tea", 3.0])
    prices.append(["Cake", "=1+1"])  # a formula without a cached value reads as empty
    wb.create_sheet("Empty")
    if title:
        wb.properties.title = title
    wb.save(str(path))
    return path


def ingest_dated_files(wb, root: Path, files: list[tuple[str, str, str]], prefix: str) -> str:
    """Write (name, YYYY-MM-DD, text) files under root dated by their mtime, ingest them into a new site.

    Returns the site id; the caller deletes its documents afterwards.
    """
    import os
    import uuid

    for name, day, text in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        stamp = dt.datetime.fromisoformat(day).replace(hour=12, tzinfo=dt.timezone.utc).timestamp()
        os.utime(path, (stamp, stamp))
    site_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
    report = wb.ingest_paths([root], site_id=site_id)
    assert report.count("indexed") == len(files), report.to_dict()
    return site_id
