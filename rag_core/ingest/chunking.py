"""Split a document's text into overlapping chunks with exact character offsets.

Sizes are measured in characters, not tokens: the corpus mixes English, Russian and
Japanese, and a tokenizer's token count per character differs several-fold between
them (Cyrillic and kana/kanji fall apart into many BPE pieces), so a token budget
would give very uneven chunks. Characters are predictable in every script and need
no tokenizer download. `count_tokens` only gives an estimate for display and budgets.

Pieces are cut from the text at paragraphs (blank lines) first, then sentences, then
lines, and packed greedily; a piece longer than a chunk is cut by characters while
packing. Every chunk satisfies `text[chunk.start_char:chunk.end_char] == chunk.text`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Ideographs and kana: written without spaces, so each character is its own unit.
_CJK_CHARS = (
    "\u3040-\u30FF\u31F0-\u31FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F"
    "\U00020000-\U0002FA1F"
)
_WORD_RUN = re.compile(rf"[^\W_{_CJK_CHARS}]+")

# A blank line (CRLF included: \r is whitespace) or a form feed, pdftotext's page break.
# Starting with a literal newline keeps the scan fast and linear on long space runs.
_PARA_BREAK = re.compile(r"\n[^\S\n]*\n\s*|\f")
_LINE = re.compile(r"[^\r\n]+")

_CLOSERS = "\"'»”’)\\]」』）】〉》"
# Western ends need whitespace after them ("3.14" and "e.g.x" never split); CJK ends
# split even when the next sentence follows without a space. The lookbehinds make a
# long run of dots be tried once, not once per dot.
_SENT_END = re.compile(
    rf"(?<![.!?…])[.!?…]+[{_CLOSERS}]*(?=\s)"
    rf"|(?<![。！？．｡])[。！？．｡]+[{_CLOSERS}]*"
)
_CJK_END = frozenset("。！？．｡")
_WS = re.compile(r"\s*")
# Where an overlap may begin: a word after whitespace, or any ideograph/kana.
_WORD_START = re.compile(rf"(?<!\S)\S|[{_CJK_CHARS}]")
_SOFT_CUT = frozenset(",;:、，；：")
_QUOTES_OPEN = "\"'«“„([‹"
# Followed by a capital they still rarely end a sentence; lower-case continuations
# are handled generally, so only these need listing.
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "cf", "fig", "no", "vol",
    "pp", "approx", "inc", "ltd", "co", "jan", "feb", "aug", "sept", "oct", "nov", "dec",
    "г", "гг", "в", "вв", "см", "ср", "напр", "стр", "рис", "табл", "ул", "д", "им",
    "проф", "акад", "тыс", "млн", "млрд", "руб", "коп", "др", "пр", "англ", "лат", "т",
})
_DOTTED_ABBREV = re.compile(r"(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}")
_NOT_AFTER_END = frozenset(",;:—–")


@dataclass(frozen=True)
class Chunk:
    """A slice of a document: `text == document_text[start_char:end_char]`."""

    index: int
    text: str
    start_char: int
    end_char: int
    token_count: int
    page_number: int | None = None


def count_tokens(text: str) -> int:
    """Estimate tokens: word runs, single CJK characters and punctuation marks count one each."""
    # Word runs are counted by the regex; every other non-space character left (ideograph,
    # kana, punctuation) is one token. Several times faster than one match per CJK character.
    rest, words = _WORD_RUN.subn(" ", text)
    return words + len("".join(rest.split()))


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _split_at(text: str, start: int, end: int, cuts: list[int]) -> list[tuple[int, int]]:
    spans = []
    prev = start
    for cut in [*cuts, end]:
        s, e = _strip(text, prev, cut)
        if s < e:
            spans.append((s, e))
        prev = cut
    return spans


def _paragraphs(text: str) -> list[tuple[int, int]]:
    cuts = [m.end() for m in _PARA_BREAK.finditer(text)]
    return _split_at(text, 0, len(text), cuts)


def _is_sentence_end(text: str, m: re.Match[str]) -> bool:
    s, e = m.span()
    if text[s] in _CJK_END:
        return True
    j = _WS.match(text, e).end()
    if j >= len(text):
        return True
    nxt = text[j]
    punct = m.group().rstrip(_CLOSERS)
    # A lower-case or dash continuation means "e.g. this", "т.е. это", «Да!» — сказал он.
    if nxt in _NOT_AFTER_END or (nxt.islower() and "!" not in punct and "?" not in punct):
        return False
    if punct != ".":
        return True
    k = s
    while k > 0 and s - k < 24 and not text[k - 1].isspace():
        k -= 1
    word = text[k:s].lstrip(_QUOTES_OPEN)
    if word.lower() in _ABBREVIATIONS or _DOTTED_ABBREV.fullmatch(word):
        return False
    # Initials: "A. Pushkin", "А. С. Пушкин".
    return not (len(word) == 1 and word.isupper())


def _sentence_starts(text: str, start: int, end: int) -> list[int]:
    """Positions inside (start, end) where a new sentence begins."""
    out = []
    for m in _SENT_END.finditer(text, start, end):
        if _is_sentence_end(text, m):
            pos = _WS.match(text, m.end(), end).end()
            if start < pos < end:
                out.append(pos)
    return out


def split_sentences(text: str) -> list[str]:
    """The sentences of one paragraph, by the same rules the chunker cuts at, each stripped."""
    return [text[a:b] for a, b in _split_at(text, 0, len(text), _sentence_starts(text, 0, len(text)))]


def _pieces(text: str, chunk_size: int) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    for a, b in _paragraphs(text):
        if b - a <= chunk_size:
            pieces.append((a, b))
            continue
        for sa, sb in _split_at(text, a, b, _sentence_starts(text, a, b)):
            if sb - sa <= chunk_size:
                pieces.append((sa, sb))
                continue
            for m in _LINE.finditer(text, sa, sb):
                la, lb = _strip(text, m.start(), m.end())
                if la < lb:
                    pieces.append((la, lb))  # may still be too long; cut while packing
    return pieces


def _overlap_start(
    text: str, prev_start: int, prev_end: int, new_start: int, overlap: int, chunk_size: int
) -> int:
    """Where a chunk begins so that it repeats up to `overlap` characters before `new_start`."""
    # Never reach back to the previous chunk's start, or a chunk could swallow its neighbour;
    # the `new_start` bound keeps room for new text after a long whitespace gap.
    lo = max(prev_end - overlap, prev_start + 1, new_start - (chunk_size + overlap) // 2)
    if lo >= new_start:
        return new_start
    # A sentence or line start in the first half of the window keeps most of the overlap.
    half = lo + (new_start - lo) // 2 + 1
    best = None
    for pos in _sentence_starts(text, max(prev_start, lo - 16), half):
        if pos >= lo:
            best = pos
            break
    nl = text.find("\n", lo - 1, half)
    if nl != -1:
        pos = _WS.match(text, nl + 1).end()
        if lo <= pos < new_start and (best is None or pos < best):
            best = pos
    if best is not None and best < new_start:
        return best
    m = _WORD_START.search(text, lo, new_start)
    if m:
        return m.start()
    # No boundary in the window: start mid-word rather than drop the overlap,
    # unless the window is whitespace only.
    return lo if not text[lo].isspace() else new_start


def _cut(text: str, start: int, limit: int, min_end: int, chunk_size: int) -> int:
    """End of a chunk that must stop inside an over-long piece, at whitespace if near."""
    lower = max(min_end, limit - max(1, chunk_size // 5))
    for c in range(limit, lower - 1, -1):
        if text[c].isspace() or text[c - 1] in _SOFT_CUT:
            return c
    return limit


def chunk_text(
    text: str,
    chunk_size: int = 1000,
    chunk_overlap: int = 150,
    pages: list[tuple[int, int, int]] | None = None,
) -> list[Chunk]:
    """Split `text` into chunks of at most `chunk_size` characters overlapping by up to `chunk_overlap`."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(f"chunk_overlap must be in [0, chunk_size), got {chunk_overlap}")
    if not text or text.isspace():
        return []
    if pages:
        return _chunk_pages(text, chunk_size, chunk_overlap, pages)

    pieces = _pieces(text, chunk_size)
    spans: list[tuple[int, int]] = []
    i = 0
    piece_start = pieces[0][0]  # start of the not yet chunked rest of pieces[i]
    while i < len(pieces):
        if spans and chunk_overlap:
            start = _overlap_start(text, *spans[-1], piece_start, chunk_overlap, chunk_size)
        else:
            start = piece_start
        piece_end = pieces[i][1]
        if piece_end - start > chunk_size and piece_end - piece_start <= chunk_size:
            # Shrink the overlap so the whole next piece fits rather than cutting it.
            floor = piece_end - chunk_size
            m = _WORD_START.search(text, floor, piece_start)
            start = m.start() if m else floor
        limit = start + chunk_size
        if piece_end > limit:
            # Over-long piece: take what fits; always past piece_start, so progress is made.
            end = _cut(text, start, limit, piece_start + 1, chunk_size)
            piece_start = _WS.match(text, end).end()
            if piece_start >= piece_end:
                i += 1
                if i < len(pieces):
                    piece_start = pieces[i][0]
        else:
            end = piece_end
            i += 1
            while i < len(pieces) and pieces[i][1] <= limit:
                end = pieces[i][1]
                i += 1
            if i < len(pieces):
                piece_start = pieces[i][0]
        start, end = _strip(text, start, end)
        if start < end:
            spans.append((start, end))

    return [Chunk(index, text[a:b], a, b, count_tokens(text[a:b])) for index, (a, b) in enumerate(spans)]


def _chunk_pages(text: str, chunk_size: int, chunk_overlap: int,
                 pages: list[tuple[int, int, int]]) -> list[Chunk]:
    """Chunks that never cross a page boundary, each with its page's number.

    A chunk spanning two pages would cite a sentence of the second page with the first page's
    number; cutting at the boundary makes every chunk's page the page of each of its sentences.
    Text before the first page or between pages (the loader's separators) belongs to no chunk.
    """
    chunks: list[Chunk] = []
    for number, p_start, p_end in sorted(pages, key=lambda p: p[1]):
        for piece in chunk_text(text[p_start:p_end], chunk_size, chunk_overlap):
            a, b = p_start + piece.start_char, p_start + piece.end_char
            chunks.append(Chunk(len(chunks), piece.text, a, b, piece.token_count, number))
    return chunks
