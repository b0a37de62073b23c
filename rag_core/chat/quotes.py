"""Which sentences of an answer quote which passage: the spans a front-end marks under each numbered source.

The extractive answerer quotes passages verbatim (hard-wrapped lines joined, lists and code blocks
whole); a generative model paraphrases, and then nothing is marked rather than something wrong.
"""

from __future__ import annotations

import re


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
