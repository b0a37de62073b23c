"""A cited passage as HTML: its markdown rendered safely, the sentences an answer quotes marked."""

from __future__ import annotations

import re
from typing import Sequence

from rag_core.render.html import MARK_STYLE

_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"   # private-use sentinels: survive markdown rendering untouched
_LINE_MARKUP = re.compile(r"\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+|\d{1,3}[.)]\s+|\|\s*)*")


def passage_html(passage: str, spans: Sequence[tuple[int, int]] = ()) -> str:
    """A passage rendered from markdown to HTML (raw HTML in it escaped, images as links), each span marked.

    Marks are set line by line after the line's markdown markers, so headings, lists, tables and
    code fences still render and no mark crosses a block.
    """
    from markdown_it import MarkdownIt

    marked = list(passage)
    for start, end in sorted(spans, reverse=True):
        pos = start
        while pos < end:
            line_end = passage.find("\n", pos, end)
            line_end = end if line_end == -1 else line_end
            line_start = passage.rfind("\n", 0, pos) + 1
            prefix = _LINE_MARKUP.match(passage, line_start).end()
            a = max(pos, prefix)
            segment = passage[a:line_end]
            if segment.strip() and not segment.lstrip().startswith(("```", "~~~")):
                b = a + len(segment.rstrip())
                marked[b - 1] += _MARK_CLOSE
                marked[a] = _MARK_OPEN + marked[a]
            pos = line_end + 1
    # No images: a passage's `![x](https://...)` would load a remote URL as soon as the sources show (a
    # tracking pixel planted in a crawled page); it renders as a link, which loads nothing until clicked.
    md = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
    rendered = md.render("".join(marked))
    return rendered.replace(_MARK_OPEN, f'<mark style="{MARK_STYLE}">').replace(_MARK_CLOSE, "</mark>")
