"""A file name that passes for another (a text-direction override, a control character) is refused on the
upload and folder paths too, not only for text sent through the API."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("name,code_point", [("invoice\u202efdp.exe.md", "U+202E"), ("notes\x1b[2J.md", "U+001B"),
                                             ("two\nlines.md", "U+000A")])
def test_an_uploaded_file_name_with_a_hidden_character_fails_naming_it(wb, site, stored_text, name, code_point):
    outcome = wb.ingest_bytes(name, b"# Invoice\n\nPlease pay the attached amount today.\n", site_id=site)
    assert outcome.status == "failed" and code_point in outcome.reason and "rename" in outcome.reason
    assert "attached amount" not in stored_text(site)


def test_a_folder_file_with_a_hidden_character_fails_and_the_rest_goes_in(wb, site, stored_text, tmp_path: Path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "report\u202etxt.exe.md").write_text("# Report\n\nQuarterly figures, reversed name.\n", encoding="utf-8")
    (folder / "plain.md").write_text("# Plain\n\nA plain note about fire exits.\n", encoding="utf-8")
    report = wb.ingest_paths([folder], site_id=site)
    failed = {Path(o.source).name: o.reason for o in report.outcomes if o.status == "failed"}
    assert "U+202E" in failed["report\u202etxt.exe.md"]
    text = stored_text(site)
    assert "fire exits" in text and "reversed name" not in text


def test_a_title_taken_from_the_document_loses_its_hidden_characters(wb, site, tmp_path: Path) -> None:
    from filebuilders import make_pdf

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Quarterly \x1b]0;owned\x07report\n\n" + "Figures for the warehouse. " * 20,
                                 encoding="utf-8")
    (folder / "b.pdf").write_bytes(make_pdf(["Payment details for the order."], title="invoice\u202efdp.exe"))
    assert wb.ingest_paths([folder], site_id=site).count("indexed") == 2
    titles = {Path(d["source"]).name: d["title"] for d in wb.documents(site_id=site)}
    assert titles == {"a.md": "Quarterly ]0;ownedreport", "b.pdf": "invoicefdp.exe"}
