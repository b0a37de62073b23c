"""Highlights: fragments of a hit's chunks with the query's matched terms as character spans.

Russian and English (and any text under 'simple') go through ts_headline with the chunk's own
text-search config, so word forms match through stemming. Japanese chunks are indexed as character
bigrams, which ts_headline cannot see, so they are highlighted here: every query bigram found in
the text is marked and neighbouring marks merge into one span.

A fragment is plain text plus spans; `Highlight.marked()` renders `**term**` for text and markdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rag_core.textproc import FTS_CONFIG, cjk_bigrams

# Private-use characters mark matches inside ts_headline output; they never occur in stored text
# that matters, and are stripped from the chunk before it is highlighted.
_START, _STOP, _SEP = "\ue000", "\ue001", "\ue002"
# PostgreSQL's parser reads `<message>` as an XML tag and ts_headline drops it from the fragment:
# angle brackets travel as private-use stand-ins and come back in the output.
_LT, _GT = "\ue003", "\ue004"
_RESTORE = str.maketrans({_LT: "<", _GT: ">"})
_OPTIONS = (f'StartSel="{_START}", StopSel="{_STOP}", FragmentDelimiter="{_SEP}", '
            "MaxWords=28, MinWords=10, ShortWord=2, MaxFragments=2")
_MARKERS = re.compile(f"[{_START}{_STOP}{_SEP}{_LT}{_GT}]")
_MARK_SPLIT = re.compile(f"([{_START}{_STOP}])")
_CJK = "\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_HIRAGANA_ONLY = re.compile(r"^[\u3040-\u309F]+$")
FRAGMENT_CHARS = 120


@dataclass
class Highlight:
    """A fragment of text and the [start, end) spans of matched terms in it."""

    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)

    def marked(self, before: str = "**", after: str = "**") -> str:
        """The fragment with each span wrapped, e.g. `**term**`."""
        out, pos = [], 0
        for start, end in self.spans:
            out.extend([self.text[pos:start], before, self.text[start:end], after])
            pos = end
        out.append(self.text[pos:])
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "spans": [list(s) for s in self.spans]}


def _parse_headline(marked: str) -> list[Highlight]:
    """ts_headline output (markers, fragment separators) -> fragments with spans."""
    result = []
    for piece in marked.split(_SEP):
        # Whole runs between markers, not characters: this ran once per character of every fragment.
        text, spans, start, length = [], [], None, 0
        for part in _MARK_SPLIT.split(" ".join(piece.split())):
            if part == _START:
                start = length
            elif part == _STOP:
                if start is not None and length > start:
                    spans.append((start, length))
                start = None
            elif part:
                text.append(part)
                length += len(part)
        joined = "".join(text).translate(_RESTORE)
        plain = joined.strip()
        shift = len(joined) - len(joined.lstrip())
        spans = [(s - shift, e - shift) for s, e in spans if e - shift <= len(plain) and s - shift >= 0]
        if plain:
            result.append(Highlight(plain, spans))
    return result


def _query_bigrams(query: str) -> set[str]:
    grams = set()
    for token in cjk_bigrams(query).split():
        if _CJK_RUN.fullmatch(token) and (len(token) == 2 or not _HIRAGANA_ONLY.match(token)):
            grams.add(token)
    return grams


def cjk_highlights(text: str, query: str, max_fragments: int = 2) -> list[Highlight]:
    """Highlight a Japanese text: spans where query bigrams occur (particle-only spans are dropped)."""
    text = " ".join(_MARKERS.sub(" ", text).split())
    grams = _query_bigrams(query)
    covered = [False] * len(text)
    if grams:
        for i in range(len(text) - 1):
            if text[i:i + 2] in grams:
                covered[i] = covered[i + 1] = True
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        if covered[i]:
            j = i
            while j < len(text) and covered[j]:
                j += 1
            if not _HIRAGANA_ONLY.match(text[i:j]):
                spans.append((i, j))
            i = j
        else:
            i += 1
    if not spans:
        return [Highlight(text[:FRAGMENT_CHARS].strip())] if text.strip() else []
    fragments: list[Highlight] = []
    pos = 0
    for span in spans:
        if len(fragments) >= max_fragments:
            break
        if span[0] < pos:
            continue
        start = max(pos, span[0] - FRAGMENT_CHARS // 4)
        end = min(len(text), start + FRAGMENT_CHARS)
        inside = [(max(s, start) - start, min(e, end) - start) for s, e in spans if s < end and e > start]
        fragments.append(Highlight(text[start:end], [s for s in inside if s[1] > s[0]]))
        pos = end
    return fragments


def _fallback(text: str) -> list[Highlight]:
    text = " ".join(_MARKERS.sub(" ", text).split())
    if len(text) <= FRAGMENT_CHARS:
        return [Highlight(text)] if text else []
    cut = text.rfind(" ", 0, FRAGMENT_CHARS)
    return [Highlight(text[: cut if cut > 40 else FRAGMENT_CHARS])]


def start_highlights(conn: Any, query: str, configs: Sequence[str], query_texts: Sequence[str],
                     items: Sequence[tuple[str | None, str]]) -> Callable[[], list[list[Highlight]]]:
    """Send the highlight statement now; the returned function collects the fragments of each item, in order.

    Inside `conn.pipeline()` statements started this way travel together: one round trip for all.
    """
    sql_rows = [(i, FTS_CONFIG.get(lang or "other", "simple"),
                 _MARKERS.sub(" ", text).replace("<", _LT).replace(">", _GT))
                for i, (lang, text) in enumerate(items) if lang != "ja"]
    cursor = None
    if sql_rows:
        cursor = conn.execute(
            r"""
            WITH ql AS (
                SELECT DISTINCT l.lex
                FROM unnest(%(cfgs)s::text[], %(qtexts)s::text[]) AS q(cfg, txt)
                CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(q.cfg::regconfig, q.txt))) AS l(lex)
            ),
            qa AS (SELECT (SELECT string_agg('''' || replace(replace(lex, '\', '\\'), '''', '''''') || '''', ' | ')
                           FROM ql)::tsquery AS tsq)
            SELECT x.ord, CASE WHEN qa.tsq IS NULL THEN NULL
                               ELSE ts_headline(x.cfg::regconfig, x.txt, qa.tsq, %(opts)s) END
            FROM unnest(%(ids)s::int[], %(item_cfgs)s::text[], %(texts)s::text[]) AS x(ord, cfg, txt), qa
            """,
            {"cfgs": list(configs), "qtexts": list(query_texts), "opts": _OPTIONS,
             "ids": [r[0] for r in sql_rows], "item_cfgs": [r[1] for r in sql_rows], "texts": [r[2] for r in sql_rows]},
        )

    def finish() -> list[list[Highlight]]:
        results: list[list[Highlight]] = [[] for _ in items]
        for i, (lang, text) in enumerate(items):
            if lang == "ja":
                results[i] = cjk_highlights(text, query)
        for ordinal, marked in (cursor.fetchall() if cursor is not None else []):
            results[ordinal] = _parse_headline(marked) if marked else []
        for i, (lang, text) in enumerate(items):
            if not results[i]:
                results[i] = _fallback(text)
        return results

    return finish


def highlight_texts(conn: Any, query: str, configs: Sequence[str], query_texts: Sequence[str],
                    items: Sequence[tuple[str | None, str]]) -> list[list[Highlight]]:
    """Fragments for each (language, text) item, in order, for the query's lexemes under `configs`."""
    return start_highlights(conn, query, configs, query_texts, items)()
