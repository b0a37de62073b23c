"""HTML pages: decoding (BOM, UTF-8, declared charset, detection) and main-text extraction
(trafilatura, falling back to lxml); navigation, headers, footers and scripts are dropped."""

from __future__ import annotations

import re
from typing import Any

import trafilatura

from rag_core.errors import LoaderError
from rag_core.ingest.loaders.document import LoadedDocument, clean, json_safe
from rag_core.ingest.loaders.encoding import BOMS, detect_encoding, implausibility, refuse_binary_format, web_codec
from rag_core.limits import HTML_MAX_EXTRACTOR_TAGS, HTML_MAX_MARKUP_CHARS

_DROP_TAGS = ("script", "style", "nav", "header", "footer", "noscript", "template", "svg", "iframe",
              "head", "object", "canvas", "button", "select")
_BLOCK_TAGS = frozenset({
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "tr",
    "table", "thead", "tbody", "section", "article", "main", "aside", "blockquote", "pre", "figure",
    "figcaption", "hr", "address", "details", "summary", "body", "caption",
})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
# How deep libxml2 reads nested elements with huge_tree, and without it (trafilatura's parse: its text
# stops where a page nests deeper).
PARSER_MAX_DEPTH, EXTRACTOR_MAX_DEPTH = 2048, 255


def _decode_html(data: bytes) -> tuple[str, str]:
    """HTML bytes to text: BOM, strict UTF-8, the declared charset, detection, else UTF-8 with replacements."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace").lstrip("\ufeff"), encoding.replace("-sig", "")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    m = _META_CHARSET.search(data[:4096])
    if m:
        declared = web_codec(m.group(1).decode("ascii", errors="ignore"))
        if declared:
            try:
                return data.decode(declared), declared
            except UnicodeDecodeError:
                pass
    detected = detect_encoding(data)
    if detected is not None:
        return detected[0], detected[1]
    return data.decode("utf-8", errors="replace"), "utf-8"


def _lxml_extract(markup: str) -> tuple[str, str, int]:
    """(text, title, how deep its elements nest, or PARSER_MAX_DEPTH + 1 past what is read) of an HTML page
    with lxml alone; navigation, headers, footers and scripts dropped.

    libxml2 stops reading a page at 256 nested elements, and everything after that point was lost with it:
    a page of unclosed <font> or <div> tags (editors and forums write them) came out with no text, or
    trafilatura's text stopped there. `huge_tree` lifts that depth to PARSER_MAX_DEPTH; the markup's size is
    already capped before parsing (HTML_MAX_MARKUP_CHARS), which is what huge_tree would otherwise leave
    unbounded.
    """
    import lxml.etree
    import lxml.html

    markup = _XML_DECL.sub("", markup, count=1)
    if not markup.strip():
        return "", "", 0
    parser = lxml.html.HTMLParser(huge_tree=True)
    try:
        root = lxml.html.document_fromstring(markup, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return "", "", 0
    too_deep = any("Excessive depth" in e.message for e in parser.error_log)
    title = " ".join((root.findtext(".//title") or "").split())
    if not title:
        h1 = root.find(".//h1")
        title = " ".join(h1.text_content().split()) if h1 is not None else ""
    lxml.etree.strip_tags(root, lxml.etree.Comment, lxml.etree.ProcessingInstruction)  # keeps their tails
    for element in root.xpath("|".join(f"//{tag}" for tag in _DROP_TAGS)):
        if element.getparent() is not None:
            element.drop_tree()
    parts: list[str] = []
    depth = deepest = 0
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else None
        depth += 1 if event == "start" else -1
        deepest = max(deepest, depth)
        if event == "start":
            if tag in _BLOCK_TAGS:
                parts.append("\n")
            if tag is not None and element.text:
                parts.append(element.text if tag == "pre" else _squash(element.text))
        else:
            if tag in _BLOCK_TAGS:
                parts.append("\n")
            if element.tail and element is not root:
                parts.append(_squash(element.tail))
    lines = (line.strip() for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line), title, PARSER_MAX_DEPTH + 1 if too_deep else deepest


def _squash(text: str) -> str:
    """Source line breaks and runs of spaces inside HTML text are one space when rendered."""
    return re.sub(r"\s+", " ", text)


def _headings_apart(text: str, doc: Any) -> str:
    """The page's headings as paragraphs of their own. trafilatura's text puts every block on one line
    under the next, so a heading read as the first words of the paragraph below it ("Red kites Red kites
    nest in...") in chunks, highlights and quoted answers; its body marks which lines are headings."""
    body = getattr(doc, "body", None)
    heads = {" ".join("".join(h.itertext()).split()) for h in body.iter("head")} if body is not None else set()
    if not heads:
        return text
    lines = text.split("\n")
    is_head = [" ".join(line.split()) in heads for line in lines]
    out = lines[:1]
    for n in range(1, len(lines)):
        apart = (is_head[n] or is_head[n - 1]) and lines[n].strip() and lines[n - 1].strip()
        out.append(("\n" if apart else "") + lines[n])
    return "\n".join(out)


def _extract_html(markup: str, url: str | None) -> LoadedDocument | None:
    """Main text via trafilatura, falling back to lxml; None when the page has no text at all."""
    doc = None
    tags = markup.count("<")
    try:
        if tags <= HTML_MAX_EXTRACTOR_TAGS:
            doc = trafilatura.bare_extraction(
                markup, url=url, with_metadata=True, include_comments=False, include_tables=True,
                favor_recall=True,
            )
    except Exception:
        doc = None
    text = clean(getattr(doc, "text", None) or "") if doc is not None else ""
    text = _headings_apart(text, doc)
    title = " ".join((getattr(doc, "title", None) or "").split()) if doc is not None else ""
    language = getattr(doc, "language", None) if doc is not None else None
    meta: dict[str, Any] = {}
    if doc is not None:
        for key in ("author", "date", "sitename", "description"):
            value = json_safe(getattr(doc, key, None))
            if value:
                meta[key] = value
    fallback_text, fallback_title, depth = _lxml_extract(markup)
    fallback = clean(fallback_text)
    if depth > PARSER_MAX_DEPTH and not text and not fallback:
        raise LoaderError(f"The HTML page nests its elements more than {PARSER_MAX_DEPTH:,} deep, past what the HTML "
                          "parser reads, so its text could not be reached. Save the page as text or PDF from a browser, "
                          "or close its unclosed tags.", details={"reason": "too_deep", **({"url": url} if url else {})})
    cut_short = depth > EXTRACTOR_MAX_DEPTH and len(fallback) > len(text)
    if not text or cut_short:
        text = fallback
        meta["extractor"] = "lxml"
        if tags > HTML_MAX_EXTRACTOR_TAGS:
            meta["extractor_reason"] = f"{tags} tags; main-text extraction runs up to {HTML_MAX_EXTRACTOR_TAGS}"
        elif cut_short:
            meta["extractor_reason"] = (f"elements nested {depth} deep; main-text extraction stops reading at "
                                        f"{EXTRACTOR_MAX_DEPTH}")
    elif not fallback_text and len(text) < 500:
        # Nothing outside nav/header/footer/scripts: trafilatura's recall fallback returned menu links.
        text = ""
    if not text or text.isspace():
        return None
    return LoadedDocument(text=text, title=title or fallback_title, file_type="html", metadata=meta,
                          language=language if isinstance(language, str) and language else None)


def load_html_bytes(data: bytes | str, url: str | None = None, stem: str = "") -> LoadedDocument:
    """Main text, title and language of an HTML page; navigation, headers, footers and scripts dropped.

    ``data`` is the page's bytes (decoded here) or its already decoded text; ``stem`` (a file name
    without suffix) is the title when the page has none.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        refuse_binary_format(bytes(data))
        markup, encoding = _decode_html(bytes(data))
    else:
        refuse_binary_format(data[:8192].encode("utf-8", errors="replace"))
        markup, encoding = data, None
    if len(markup) > HTML_MAX_MARKUP_CHARS:
        raise LoaderError(f"The HTML page is {len(markup):,} characters of markup; at most {HTML_MAX_MARKUP_CHARS:,} "
                          "are parsed (its tree would take gigabytes). Split the page, or save it as text.",
                          details={"chars": len(markup), "limit": HTML_MAX_MARKUP_CHARS})
    if implausibility(markup) > 0.1:
        raise LoaderError("Cannot decode text: the content is binary, not HTML (control characters and undecodable bytes); "
                          "give an HTML page, or the file its real suffix.",
                          details={"reason": "binary_format", "url": url} if url else {"reason": "binary_format"})
    doc = _extract_html(markup, url)
    if doc is None:
        raise LoaderError(f"HTML page {stem or url or ''!r} has no text (only markup, scripts or navigation); "
                          "it may need JavaScript to render. Give a page with readable content.",
                          details={"url": url} if url else None)
    if encoding:
        doc.metadata.setdefault("encoding", encoding)
    doc.title = doc.title or stem
    return doc
