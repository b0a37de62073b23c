"""Bombs: Office files built here that unpack to far more than they weigh, a gzip body served from a
real 127.0.0.1 server, and a text over the document cap. Each is refused with its reason, the rest of
the run goes in, and memory stays near the cap."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

from crawl_server import Route, article_html, base_url
import pytest
from filebuilders import make_docx, make_xlsx, pdf_of

from rag_core.errors import LoaderError
from rag_core.ingest.loaders import load_bytes
from rag_core.limits import MAX_DOCUMENT_CHARS

MB = 1_000_000


def inflate_member(src: Path, dest: Path, member: str, anchor: bytes, filler: bytes, total: int) -> Path:
    """A copy of an Office file whose `member` holds `total` more bytes of `filler` right after `anchor`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename != member:
                zout.writestr(item, data)
                continue
            head, sep, tail = data.partition(anchor)
            assert sep, f"{anchor!r} not in {member}"
            with zout.open(member, "w", force_zip64=True) as out:
                out.write(head + sep)
                block = filler * (MB // len(filler))
                for _ in range(total // len(block)):
                    out.write(block)
                out.write(tail)
    return dest


def test_office_bombs_are_refused_before_opening_and_the_rest_goes_in(wb, site, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.md").write_text("# Fire safety\n\nEvacuation routes are at least 1.2 metres wide.\n")
    # 60 MB of XML (a comment the parser would read whole) in a docx of about 60 KB.
    docx = make_docx(tmp_path / "plain.docx")
    inflate_member(docx, folder / "bomb.docx", "word/document.xml", b"?>", b"<!--" + b" " * 4092 + b"-->", 60 * MB)
    # 12 MB of identical rows in an xlsx: it used to go in as millions of characters of text.
    xlsx = make_xlsx(tmp_path / "plain.xlsx")
    row = b'<row><c t="inlineStr"><is><t>boom</t></is></c></row>'
    inflate_member(xlsx, folder / "bomb.xlsx", "xl/worksheets/sheet1.xml", b"<sheetData>", row, 12 * MB)
    assert (folder / "bomb.docx").stat().st_size < MB and (folder / "bomb.xlsx").stat().st_size < MB

    report = wb.ingest_paths([folder], site_id=site)
    outcomes = {Path(o.source).name: o for o in report.outcomes}
    assert outcomes["good.md"].status == "indexed"
    for name in ("bomb.docx", "bomb.xlsx"):
        assert outcomes[name].status == "failed", outcomes[name]
        assert "zip bomb" in outcomes[name].reason and "times larger than it is stored" in outcomes[name].reason
    assert wb.status(site_id=site)["documents"] == 1


def test_a_text_over_the_document_cap_is_refused(wb, site, tmp_path: Path) -> None:
    big = tmp_path / "huge.txt"
    big.write_text("word " * (MAX_DOCUMENT_CHARS // 5 + 10))
    report = wb.ingest_paths([big], site_id=site).to_dict()
    assert report["failed"] == 1 and f"more than {MAX_DOCUMENT_CHARS} characters" in report["errors"][0]["reason"]


FETCH_AND_MEASURE = """
import asyncio, json, sys, tracemalloc
from rag_core.errors import RagError
from rag_core.ingest.crawl import WebCrawler
from rag_core.settings import RagSettings

settings = RagSettings(_env_file=None, allowed_domains=["127.0.0.1"], allow_private_networks=True,
                       crawl_delay_sec=0, crawl_respect_robots=False, crawl_timeout_sec=60,
                       crawl_max_bytes=int(sys.argv[3]))
asyncio.run(WebCrawler(settings).fetch_page(sys.argv[1]))   # warm: imports and first allocations
tracemalloc.start()
try:
    asyncio.run(WebCrawler(settings).fetch_page(sys.argv[2]))
    outcome = "fetched"
except RagError as exc:
    outcome = exc.details["reason"]
print(json.dumps({"outcome": outcome, "peak_kb": tracemalloc.get_traced_memory()[1] // 1024}))
"""


def gzip_bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * MB
    return b"".join(packer.compress(block) for _ in range(size // MB)) + packer.flush()


def test_a_gzip_bomb_is_refused_with_memory_near_the_cap(srv: Any) -> None:
    """200 MB of zeros in a 200 KB gzip body, against a 1 MB cap: refused, and the fetch's peak of
    Python allocations stays near the cap (each network chunk was inflated whole: +140 MB was seen
    against a 5 MB cap, and every chunk here inflates to 7-64 MB)."""
    srv.state.routes["/warm.html"] = Route(article_html("warm"))
    srv.state.routes["/bomb.html"] = Route(gzip_bomb(200 * MB), headers={"Content-Encoding": "gzip"})
    base = base_url(srv)
    run = subprocess.run([sys.executable, "-c", FETCH_AND_MEASURE, f"{base}/warm.html", f"{base}/bomb.html",
                          str(MB)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "too_large"
    assert result["peak_kb"] < 3_500, result  # the 1 MB body, one bounded step, working room


def page_tree_bomb(fanout: int, depth: int) -> bytes:
    """A PDF whose every /Pages node lists the same child `fanout` times: fanout**depth pages in about 1 KB."""
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>"}
    n = 2
    for level in range(depth):
        kid = n + 1
        objs[n] = (b"<< /Type /Pages /Kids [" + b" ".join([b"%d 0 R" % kid] * fanout)
                   + b"] /Count %d >>" % fanout ** (depth - level))
        n = kid
    objs[n] = (b"<< /Type /Page /MediaBox [0 0 612 792] /Contents %d 0 R "
               b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (n + 1, n + 2))
    stream = b"BT /F1 12 Tf 72 720 Td (hello bomb) Tj ET"
    objs[n + 1] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    objs[n + 2] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    return pdf_of(objs)


def test_a_pdf_page_tree_bomb_is_refused_before_extraction(wb, site) -> None:
    """10,000 pages from 1 KB (one page listed ten times per level) cost 6 s of extraction; now refused."""
    bomb = page_tree_bomb(10, 4)
    assert len(bomb) < 2000
    outcome = wb.ingest_bytes("bomb.pdf", bomb, site_id=site)
    assert outcome.status == "failed"
    assert "10000 pages but only 1 distinct page objects" in outcome.reason
    assert wb.ingest_bytes("one.pdf", page_tree_bomb(1, 1), site_id=site).status == "indexed"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def flate_stream(data: bytes, extra: bytes = b"") -> bytes:
    packed = zlib.compress(data, 9)
    return b"<< %s/Length %d /Filter /FlateDecode >>\nstream\n" % (extra, len(packed)) + packed + b"\nendstream"


def shared_content_bomb(pages: int, stream_bytes: int) -> bytes:
    """Distinct pages that all draw one content stream: `pages` times `stream_bytes` of text to extract."""
    text = b"BT /F1 12 Tf 72 720 Td " + b"(x) Tj " * (stream_bytes // 7) + b" ET"
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>", 2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
            3: flate_stream(text), 4: FONT}
    for i in range(pages):
        objs[5 + i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
                       b"/Resources << /Font << /F1 4 0 R >> >> >>")
    return pdf_of(objs)


def form_bomb(draws: int, form_bytes: int) -> bytes:
    """One page that draws the same form XObject `draws` times."""
    form = b"BT /F1 12 Tf 72 720 Td " + b"(x) Tj " * (form_bytes // 7) + b" ET"
    return pdf_of({
        1: b"<< /Type /Catalog /Pages 2 0 R >>", 2: b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        3: flate_stream(b"/Fm0 Do " * draws), 4: FONT,
        5: (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
            b"/Resources << /Font << /F1 4 0 R >> /XObject << /Fm0 6 0 R >> >> >>"),
        6: flate_stream(form, b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "),
    })


@pytest.mark.parametrize("bomb", [shared_content_bomb(3, 1_000_000), form_bomb(300, 7_000)],
                         ids=["pages-sharing-one-stream", "one-form-drawn-300-times"])
def test_a_pdf_whose_pages_unpack_far_past_its_size_is_refused_before_extraction(wb, site, bomb) -> None:
    """Three pages sharing one 1 MB stream, or a form drawn 300 times, in about 2 KB: seconds of extraction each
    (20 pages took 55 s, 1,000 draws 11 s), minutes within the upload cap; refused before any text is read."""
    assert len(bomb) < 3_000
    outcome = wb.ingest_bytes("bomb.pdf", bomb, site_id=site)
    assert outcome.status == "failed"
    assert "drawing instructions" in outcome.reason and "decompression bomb" in outcome.reason


def test_a_form_drawing_itself_is_refused_as_corrupt() -> None:
    form = b"/Fm0 Do"
    looped = pdf_of({
        1: b"<< /Type /Catalog /Pages 2 0 R >>", 2: b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        3: flate_stream(b"/Fm0 Do"), 4: FONT,
        5: (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
            b"/Resources << /XObject << /Fm0 6 0 R >> >> >>"),
        6: flate_stream(form, b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /Fm0 6 0 R >> >> "),
    })
    with pytest.raises(LoaderError, match="nested more than 12 deep"):
        load_bytes(looped, "pdf", name="loop.pdf")


def test_a_docx_of_millions_of_elements_is_refused_before_python_docx_reads_it(tmp_path: Path) -> None:
    """A 2.5 MB .docx of a million short paragraphs passes the zip caps (it compresses 17 fold), and python-docx
    held its whole tree (about 200 bytes an element: 1.4 GB for 2.3 million paragraphs, 32 s) before the text cap
    refused it. Its elements are now counted as the part inflates."""
    import random

    from rag_core.limits import DOCX_MAX_ELEMENTS

    pick = random.Random(1).choices
    words = [b"w%d" % i for i in range(8)]
    paragraphs = b"".join(b"<w:p><w:r><w:t>" + b" ".join(pick(words, k=3)) + b"</w:t></w:r></w:p>"
                          for _ in range(DOCX_MAX_ELEMENTS // 3 + 1000))
    with zipfile.ZipFile(make_docx(tmp_path / "plain.docx")) as zin, \
            zipfile.ZipFile(tmp_path / "many.docx", "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "word/document.xml":
                head, sep, tail = data.partition(b"<w:body>")
                data = head + sep + paragraphs + tail
            zout.writestr(item, data)
    data = (tmp_path / "many.docx").read_bytes()
    assert len(data) < 5 * MB

    with pytest.raises(LoaderError, match=f"more than {DOCX_MAX_ELEMENTS:,} XML elements") as refused:
        load_bytes(data, "docx", name="many.docx")
    assert refused.value.details["member"] == "word/document.xml"
