"""Which sentences of an answer quote which passage: the highlight under each numbered source."""

from __future__ import annotations

import re

# A sentence of the answer and the source number that closes it: "… text [2]".
_CITED = re.compile(r"([^\[\]\n]+?)\s*\[(\d+)\]")
_MIN_QUOTE_CHARS = 6
_LABEL_WORDS = 8


def cited_spans(answer: str, n: int, passage: str) -> list[tuple[int, int]]:
    """Where the answer's sentences marked [n] occur verbatim in passage n, as [start, end) offsets.

    The extractive answerer quotes passages verbatim; a generative model paraphrases, and then
    nothing is marked rather than something wrong. A label such as "Closest match:" may precede the
    quote, so each sentence is also tried from each of its first words on.
    """
    spans = []
    for sentence, ref in _CITED.findall(answer or ""):
        if int(ref) != n:
            continue
        sentence = sentence.strip()
        starts = [0] + [m.end() for m in re.finditer(r"\s+", sentence)][:_LABEL_WORDS]
        for start in starts:
            piece = sentence[start:].strip()
            pos = passage.find(piece) if len(piece) >= _MIN_QUOTE_CHARS else -1
            if pos >= 0:
                spans.append((pos, pos + len(piece)))
                break
    return spans
