"""Search results as markdown (`rag search --format markdown`, the MCP search tool, a notebook's display) carry
documents' and other callers' text as text: no image, link or HTML of theirs renders."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

from rag_core.render.search import render_markdown

PIXEL = "https://evil.example/p.png?leak=1"


def test_a_documents_images_links_and_html_render_as_text(wb, site, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    body = (f"Pump maintenance schedule for the cooling loop. ![pixel]({PIXEL}) "
            f"<img src=\"{PIXEL}\"> \\![pixel\\]({PIXEL}) [click](https://evil.example/) <https://evil.example/a> ")
    (folder / "pump.md").write_text(f"# Pump <img src=\"{PIXEL}\"> guide\n\n{body * 3}\n", encoding="utf-8")
    (folder / "x` ![p](https:evil.example) `.md").write_text(f"# Other\n\nPump maintenance notes. {body}\n",
                                                           encoding="utf-8")
    assert wb.ingest_paths([folder], site_id=site).count("indexed") == 2
    response = wb.search(f"pump maintenance schedule ![q]({PIXEL})", site_id=site, include_context=True)
    response["suggestions"] = [f"![s]({PIXEL}) pump"]  # earlier queries of the site's other users
    assert response["total_results"] == 2

    html = MarkdownIt("commonmark").render(render_markdown(response))

    assert "<img" not in html and "<a " not in html, html
    assert "Pump maintenance" in html and "evil.example" in html  # shown, as text
