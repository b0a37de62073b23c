"""Highlights: fragments of a hit's chunks with the query's matched terms as character spans.

Marked here, in Python, from the query's lexemes that the retrieval statement returns: no second
statement, no ts_headline (which parsed and stemmed every word of every chunk again in PostgreSQL).
A word matches when its Snowball stem under the chunk's
text-search config is one of the query's lexemes: the english and russian configs stem with the
same Snowball algorithms as PostgreSQL's english_stem / russian_stem (PyStemmer; ASCII words in a
Russian chunk with the English one, as the russian config does), 'simple' compares lower-cased
words. Only words that start like a lexeme are stemmed (str.find per lexeme prefix). Japanese chunks
are indexed as character bigrams: every bigram of the prepared query (query.py) found in the text is
marked and neighbouring marks merge into one span.

A fragment is plain text (whitespace collapsed) plus spans; `Highlight.marked()` renders `**term**`
for text and markdown.
"""

from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Collection, Sequence

import Stemmer

from rag_core.search.query import HIRAGANA_ONLY, PreparedQuery, prepared
from rag_core.textproc import FTS_CONFIG

_WORD = re.compile(r"[^\W_]+")
FRAGMENT_CHARS = 120
# A fragment: about 28 words (ts_headline's MaxWords before), starting a few words before its first match.
FRAGMENT_WINDOW = 200
FRAGMENT_LEAD = 40
MAX_FRAGMENTS = 2
_STEMMED = {"english": "english", "russian": "russian"}  # text-search config -> Snowball algorithm
_local = threading.local()


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


def _stemmer(algorithm: str) -> Any:
    """This thread's stemmer (PyStemmer's objects are not thread-safe; each keeps a cache of its words)."""
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    stemmer = stemmers.get(algorithm)
    if stemmer is None:
        stemmer = stemmers[algorithm] = Stemmer.Stemmer(algorithm)
    return stemmer


def _prefixes(lexemes: Collection[str]) -> set[str]:
    """What a word matching one of the lexemes starts with: four characters of the stem, less the final
    'i' Snowball writes for 'y' ('studi' from 'study')."""
    out = set()
    for lex in lexemes:
        base = lex[:-1] if len(lex) > 1 and lex.endswith("i") else lex
        if base:
            out.add(base[:4])
    return out


def _lower(text: str) -> str:
    """text.lower() with the same length (a few characters lower-case to two)."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return low


def _stems(words: list[str], config: str) -> list[str]:
    algorithm = _STEMMED.get(config)
    if algorithm is None:
        return words
    if algorithm == "russian":  # the russian config stems ASCII words as English
        english, russian = _stemmer("english"), _stemmer("russian")
        return [english.stemWord(w) if w.isascii() else russian.stemWord(w) for w in words]
    return _stemmer(algorithm).stemWords(words)


def term_spans(text: str, config: str, lexemes: Collection[str],
               prefixes: Collection[str] | None = None) -> list[tuple[int, int, str]]:
    """(start, end, lexeme) of every word of `text` whose stem under `config` is one of `lexemes`, in order.

    prefixes: `_prefixes(lexemes)`, when the caller marks several texts for the same lexemes.
    """
    if not lexemes or not text:
        return []
    low = _lower(text)
    if config == "russian":  # Snowball's Russian stems spell ё as е
        low = low.replace("ё", "е")
    starts: set[int] = set()
    find, add = low.find, starts.add
    for prefix in _prefixes(lexemes) if prefixes is None else prefixes:
        pos = find(prefix)
        while pos != -1:
            if pos == 0 or not low[pos - 1].isalnum():
                add(pos)
            pos = find(prefix, pos + 1)
    found = []
    word = _WORD.match
    for pos in sorted(starts):
        match = word(low, pos)
        if match:
            found.append((pos, match.end()))
    stems = _stems([low[s:e] for s, e in found], config)
    return [(s, e, stem) for (s, e), stem in zip(found, stems) if stem in lexemes]


def _best_window(matches: list[tuple[int, int, str]], starts: list[int], low: int, high: int) -> tuple[int, int] | None:
    """The [left, right) of FRAGMENT_WINDOW characters inside [low, high), starting FRAGMENT_LEAD before a match,
    that holds the most distinct lexemes (then the most matches; the earliest on a tie).

    One pass: a window's edges only move right from one match to the next, so the matches starting inside
    it (`counted`) and those ending inside it (`inside`, whose lexemes are tallied) are kept as two moving
    ends instead of being gathered again for every match.
    """
    best, best_score = None, (0, 0)
    n = len(matches)
    first = bisect.bisect_left(starts, low)
    counted = inside = first
    tally: dict[str, int] = {}
    for i in range(first, n):
        s, e, lexeme = matches[i]
        if e > high:
            break
        left = s - FRAGMENT_LEAD if s - FRAGMENT_LEAD > low else low
        right = left + FRAGMENT_WINDOW if left + FRAGMENT_WINDOW < high else high
        if counted < i:
            counted = i
        while counted < n and starts[counted] < right:
            counted += 1
        if inside < i:
            inside = i
        while inside < n and matches[inside][1] <= right:
            word = matches[inside][2]
            tally[word] = tally.get(word, 0) + 1
            inside += 1
        score = (len(tally), counted - i)
        if score > best_score:
            best, best_score = (left, right), score
        if i < inside:  # the next window starts after this match
            if tally[lexeme] == 1:
                del tally[lexeme]
            else:
                tally[lexeme] -= 1
    return best


def _snap(text: str, left: int, right: int, high: int, first: tuple[int, int]) -> tuple[int, int]:
    """Move a window's edges inwards to word boundaries: its start to the next word's start, its end back to
    a space (never past its first match)."""
    if left > 0 and text[left - 1] != " ":
        left = text.find(" ", left, first[0]) + 1 or first[0]
    first_end = first[1]
    if right < high and text[right] != " ":
        cut = text.rfind(" ", first_end, right)
        right = cut if cut != -1 else right
    return left, right


def word_highlights(text: str, config: str, lexemes: Collection[str], max_fragments: int = MAX_FRAGMENTS,
                    prefixes: Collection[str] | None = None) -> list[Highlight]:
    """Up to `max_fragments` fragments of `text` that hold the most distinct query lexemes, in text order;
    [] when no word matches."""
    text = " ".join(text.split())
    matches = term_spans(text, config, lexemes, prefixes)
    if not matches:
        return []
    if len(text) <= FRAGMENT_WINDOW:
        return [Highlight(text, [(s, e) for s, e, _ in matches])]
    starts = [m[0] for m in matches]
    taken: list[tuple[int, int]] = []
    gaps = [(0, len(text))]  # the stretches of text outside the fragments taken so far
    for _ in range(max_fragments):
        found = [(w, gap) for gap in gaps if (w := _best_window(matches, starts, *gap)) is not None]
        if not found:
            break
        # The best window of all gaps: most distinct lexemes, then most matches, then the earliest.
        def score(item: tuple[tuple[int, int], tuple[int, int]]) -> tuple[int, int, int]:
            (left, right), _ = item
            inside = [m for m in matches if m[0] >= left and m[1] <= right]
            return (-len({m[2] for m in inside}), -len(inside), left)
        (left, right), (low, high) = min(found, key=score)
        left, right = _snap(text, left, right, high, next(m[:2] for m in matches if m[0] >= left))
        taken.append((left, right))
        gaps.remove((low, high))
        gaps += [g for g in ((low, left), (right, high)) if g[1] > g[0]]
    fragments = []
    for left, right in sorted(taken):
        piece = text[left:right]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        spans = [(s - left - lead, e - left - lead) for s, e, _ in matches if s >= left and e <= right]
        fragments.append(Highlight(piece, spans))
    return fragments


def cjk_highlights(text: str, query: str | PreparedQuery, max_fragments: int = 2) -> list[Highlight]:
    """Highlight a Japanese text: spans where query bigrams occur (particle-only spans are dropped)."""
    text = " ".join(text.split())
    grams = prepared(query).highlight_bigrams
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
            if not HIRAGANA_ONLY.match(text[i:j]):
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
    text = " ".join(text.split())
    if len(text) <= FRAGMENT_CHARS:
        return [Highlight(text)] if text else []
    cut = text.rfind(" ", 0, FRAGMENT_CHARS)
    return [Highlight(text[: cut if cut > 40 else FRAGMENT_CHARS])]


def highlight_texts(query: str | PreparedQuery, lexemes: Collection[str], items: Sequence[tuple[str | None, str]],
                    max_fragments: int = MAX_FRAGMENTS) -> list[list[Highlight]]:
    """Fragments for each (language, text) item, in order: the query's `lexemes` (as the retrieval statement
    found them in the store) marked in stemmed languages, query bigrams in Japanese; the start of the
    text when nothing matches."""
    wanted = frozenset(lexemes)
    prefixes = _prefixes(wanted)
    query = prepared(query)  # its bigrams made once for every Japanese text
    results = []
    for lang, text in items:
        if lang == "ja":
            frags = cjk_highlights(text, query, max_fragments)
        else:
            frags = word_highlights(text, FTS_CONFIG.get(lang or "other", "simple"), wanted, max_fragments, prefixes)
        results.append(frags or _fallback(text))
    return results
