"""A spreadsheet whose rows reach column XFD is refused after a bounded number of cells, not read for minutes."""

from __future__ import annotations

import io
import zipfile

import openpyxl
import pytest

from rag_core.errors import LoaderError
from rag_core.ingest.loaders import load_bytes


def far_right_xlsx(rows: int) -> bytes:
    """A valid .xlsx whose rows hold one empty cell in the last column, XFD (16,384 wide)."""
    book = openpyxl.Workbook()
    book.active.append(["Item", "Price"])
    book.active.append(["tea", 3])
    plain = io.BytesIO()
    book.save(plain)
    stray = b"".join(b'<row r="%d"><c r="XFD%d" t="inlineStr"><is><t></t></is></c></row>' % (n, n)
                     for n in range(3, rows + 3))
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(plain.getvalue())) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"</sheetData>", stray + b"</sheetData>")
            z.writestr(item, data)
    return out.getvalue()


def test_rows_padded_to_column_xfd_are_refused_naming_the_stray_cells() -> None:
    data = far_right_xlsx(1_300)  # 21.3 million cells
    assert len(data) < 50_000  # a small upload: each of its rows is 16,384 cells once read
    with pytest.raises(LoaderError, match="more than 20,000,000 cells") as err:
        load_bytes(data, "xlsx", name="stray.xlsx")
    assert "16,384" in err.value.message and "stray cells" in err.value.message


def test_a_few_wide_rows_still_load() -> None:
    doc = load_bytes(far_right_xlsx(20), "xlsx", name="wide.xlsx")
    assert "Item: tea; Price: 3" in doc.text


def many_strings_xlsx(strings: int, part: str = "xl/strings/table.xml") -> bytes:
    """A valid .xlsx whose shared-strings table (under any part name its content types give) holds `strings`."""
    book = openpyxl.Workbook()
    book.active.append(["Item", "Price"])
    book.active.append(["tea", 3])
    plain = io.BytesIO()
    book.save(plain)
    table = (b'<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
             b'2006/main">' + b"".join(b"<si><t>s%x</t></si>" % n for n in range(strings)) + b"</sst>")
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(plain.getvalue())) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "[Content_Types].xml":
                data = data.replace(b"</Types>", b'<Override ContentType="application/vnd.openxmlformats-officedocument.'
                                    b'spreadsheetml.sharedStrings+xml" PartName="/%s"/></Types>' % part.encode())
            z.writestr(item, data)
        z.writestr(part, table)
    return out.getvalue()


def test_a_shared_strings_table_of_600_000_strings_is_refused_before_openpyxl_reads_it() -> None:
    data = many_strings_xlsx(600_000)
    assert len(data) < 5_000_000
    with pytest.raises(LoaderError, match="shared-strings table holds more than 500,000 strings") as err:
        load_bytes(data, "xlsx", name="strings.xlsx")
    assert err.value.details["member"] == "xl/strings/table.xml"


def test_a_workbook_with_a_modest_strings_table_loads() -> None:
    assert "Item: tea; Price: 3" in load_bytes(many_strings_xlsx(1_000), "xlsx", name="ok.xlsx").text


def test_a_csv_of_twenty_million_separators_is_refused_before_csv_builds_the_row() -> None:
    import tracemalloc

    data = b"a,b\n" + b"," * 20_500_000 + b"\n"
    size = len(data)
    tracemalloc.start()
    try:
        with pytest.raises(LoaderError) as err:
            load_bytes(data, "csv", name="commas.csv")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * size, f"peak {peak:,} bytes for a {size:,}-byte file"  # 447,613,681 when csv built the row
    assert "more than 20,000,000 ',' separators" in err.value.message
