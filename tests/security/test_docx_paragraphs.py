"""A .docx of many paragraphs without a heading is read in linear work: its styles are looked up once."""

from __future__ import annotations

import cProfile
import io
import pstats

import docx

from rag_core.ingest.loaders import load_bytes


def many_paragraphs(count: int) -> bytes:
    document = docx.Document()
    for n in range(count):
        document.add_paragraph(f"line {n}")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_the_default_style_is_not_looked_up_once_per_paragraph() -> None:
    """python-docx's Paragraph.style scans every style for the default on each call: about a millisecond a
    paragraph, so a 1 MB file of 250,000 paragraphs took 258 s (now 7.5 s). The work is counted, not timed."""
    data = many_paragraphs(3_000)
    profiler = cProfile.Profile()
    profiler.enable()
    doc = load_bytes(data, "docx", name="lines.docx")
    profiler.disable()
    lookups = sum(stat[1] for (path, _, name), stat in pstats.Stats(profiler).stats.items()  # type: ignore[attr-defined]
                  if name == "default_for" and path.endswith("styles.py"))
    assert lookups <= 2, f"{lookups} default-style lookups for 3,000 paragraphs"
    assert doc.text.count("line ") == 3_000


def test_a_heading_still_gives_the_title() -> None:
    document = docx.Document()
    document.add_paragraph("Preface without a style")
    document.add_heading("Pump maintenance", level=1)
    document.add_paragraph("Body text.")
    out = io.BytesIO()
    document.save(out)
    assert load_bytes(out.getvalue(), "docx", name="pump.docx").title == "Pump maintenance"
