"""A page of a hundred thousand tiny elements is read in linear time, and a page too large to parse is refused."""

from __future__ import annotations

import pytest

from rag_core.errors import LoaderError
from rag_core.ingest.loaders import load_bytes


def test_a_page_of_125_000_paragraphs_is_read_by_lxml_alone() -> None:
    """1 MB of <p> elements took trafilatura 9.6 s (a 5 MB crawled page about 40 s); lxml reads it in under one."""
    page = b"<html><head><title>Many</title></head><body>" + b"<p>word</p>" * 125_000 + b"</body></html>"
    doc = load_bytes(page, "html", name="many.html")
    assert doc.metadata["extractor"] == "lxml" and "250" in doc.metadata["extractor_reason"]
    assert doc.text.count("word") == 125_000 and doc.title == "Many"


def test_an_ordinary_page_still_gets_main_text_extraction() -> None:
    page = (b"<html><body><nav>MENU Home About</nav><article><h1>Kites</h1>"
            + b"<p>Red kites nest in tall trees near open farmland and hunt small mammals.</p>" * 20
            + b"</article><footer>FOOTER 2026</footer></body></html>")
    doc = load_bytes(page, "html", name="kites.html")
    assert "extractor" not in doc.metadata and "Red kites nest" in doc.text and "FOOTER" not in doc.text


def test_markup_past_ten_million_characters_is_refused_before_parsing() -> None:
    page = b"<html><body><p>" + b"word " * 2_100_000 + b"</p></body></html>"
    with pytest.raises(LoaderError, match="characters of markup; at most 10,000,000 are parsed"):
        load_bytes(page, "html", name="huge.html")


def test_a_page_of_unclosed_tags_keeps_all_its_text() -> None:
    """libxml2 stops reading at 256 nested elements: a forum page of 400 unclosed <font> tags lost every reply
    after the 253rd (trafilatura's text simply stopped), and a page nested 300 deep lost all of its text."""
    replies = b"".join(b"<font size=2>Reply %d says the fire exit must stay clear. " % i for i in range(400))
    doc = load_bytes(b"<html><head><title>Forum</title></head><body><nav>MENU Home</nav>" + replies + b"</body></html>",
                     "html", name="forum.html")
    assert all(f"Reply {i} says" in doc.text for i in range(400)) and "MENU" not in doc.text
    assert doc.metadata["extractor"] == "lxml" and "402 deep" in doc.metadata["extractor_reason"]

    deep = b"<html><body>" + b"<div>" * 300 + b"Deep text." + b"</div>" * 300 + b"<p>Shallow text.</p></body></html>"
    assert load_bytes(deep, "html", name="deep.html").text.split() == ["Deep", "text.", "Shallow", "text."]


def test_a_page_nested_past_what_the_parser_reads_says_so() -> None:
    page = b"<html><body>" + b"<div>" * 2100 + b"Deep text." + b"</div>" * 2100 + b"</body></html>"
    with pytest.raises(LoaderError, match="nests its elements more than 2,048 deep"):
        load_bytes(page, "html", name="deeper.html")
