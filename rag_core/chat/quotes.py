"""Which sentences of an answer quote which passage: the highlight under each numbered source.

The extractive answerer quotes passages verbatim (hard-wrapped lines joined, lists and code blocks
whole); a generative model paraphrases, and then nothing is marked rather than something wrong.
"""

from __future__ import annotations

import re
from typing import Sequence

_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"   # private-use sentinels: survive markdown rendering untouched
MARK_STYLE = "background:#ffe58f;padding:0 2px;border-radius:2px"
_LINE_MARKUP = re.compile(r"\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+|\d{1,3}[.)]\s+|\|\s*)*")


def _find_words(text: str, passage: str) -> tuple[int, int] | None:
    """The span of `text`'s words in the passage, in order, with any whitespace or list markup between."""
    words = text.split()
    if not words:
        return None
    found = re.search(r"(?:\s|[-*+•>|])*".join(re.escape(w) for w in words), passage)
    return found.span() if found else None


def cited_spans(answer: str, n: int, passage: str) -> list[tuple[int, int]]:
    """Where the answer's units marked [n] stand in passage n, matched across line breaks and markup.

    The extractive answerer quotes whole sentences, list items and code blocks (hard-wrapped lines
    joined) with the number after each sentence, or after the lead-in line of a block or list.
    """
    spans: list[tuple[int, int]] = []
    prev = 0
    for m in re.finditer(r"\[(\d+)\]", answer or ""):
        body = answer[prev:m.start()].rsplit("\n", 1)[-1]
        prev = m.end()
        if int(m.group(1)) != n:
            continue
        # A label such as "The closest passage:" may precede the quote: try it from each word on.
        words = body.split()
        for skip in range(min(len(words), 9)):
            if sum(len(w) for w in words[skip:]) < 6:
                break
            span = _find_words(" ".join(words[skip:]), passage)
            if span:
                spans.append(span)
                break
        if answer[m.end():m.end() + 1] == "\n":  # the block or list a cited lead-in introduces
            block = answer[m.end() + 1:].split("\n\n", 1)[0]
            span = _find_words(block, passage)
            if span:
                spans.append(span)
    return sorted(set(spans))


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
