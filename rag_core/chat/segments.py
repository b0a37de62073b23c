"""A passage's text as answer units: sentences, list items, code blocks and table rows, each with the
heading, question line or lead-in it sits under as context (never quotable itself)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CJK_CLASS = r"\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F"
TERM = re.compile(rf"[{_CJK_CLASS}]+|[^\W\d_]+|\d+", re.UNICODE)
CJK_RUN = re.compile(rf"[{_CJK_CLASS}]")

MIN_SENTENCE_CHARS = 6
# A lead-in ("From the command line:") is quoted only together with what it introduces.
_LEAD_IN_END = (":", "：")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?=\S)")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
# A line of =, -, _ or * only: a setext underline or a rule.
_UNDERLINE = re.compile(r"^\s*([=\-_*~])\1{2,}\s*$")
# The labels of an FAQ's pairs: the question line is context, the answer line is quoted without its label.
_QUESTION_LABEL = re.compile(r"^\s*(?:Q\d*\s*[.:：)]|(?:Question|Вопрос|В|問|質問)\s*[:：])\s*(?=\S)", re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"^\s*(?:A\d*\s*[.:：)]|(?:Answer|Ответ|О|答|回答)\s*[:：])\s*(?=\S)", re.IGNORECASE)
# A spreadsheet row as the loaders write it: "Column: value; Column: value" (two pairs at least).
SHEET_ROW = re.compile(r"^[^:;\n]{1,80}:\s[^;\n]*(?:;\s[^:;\n]{1,80}:\s[^;\n]*)+$")
_KEY_VALUE = re.compile(r"\S[:：]\s*\S")
_SENTENCE_END = (".", "!", "?", "。", "！", "？", "…", ":", "：", ";", ")", "»", "”", "」")
# Markdown at the edges of a unit that is no part of what it says.
_EDGE_DEBRIS = " \t>|"


def _is_table_row(line: str) -> bool:
    stripped = line.strip()
    if _TABLE_RULE.match(stripped) and "|" in stripped:
        return True
    return stripped.count("|") >= 2 and (stripped.startswith("|") or stripped.endswith("|"))


def _join_lines(lines: list[str]) -> str:
    """Hard-wrapped lines back into one paragraph: a space between words, none between CJK characters."""
    out = ""
    for line in (ln.strip() for ln in lines):
        if not line:
            continue
        if out and not (CJK_RUN.match(out[-1]) and CJK_RUN.match(line[0])):
            out += " "
        out += line
    return out


def _blocks(text: str) -> list[tuple[str, str]]:
    """(kind, text) blocks of a passage: paragraph, item (a list item), code (a fenced block), heading,
    question (the question line of a Q/A pair) or row (a spreadsheet row, "Column: value; Column: value").

    Markdown table rows and rules, images and underlines (`=====`) are left out. A heading (`#`, a setext title,
    a short line standing alone without a sentence's end) is kept as the context of what follows it.
    """
    blocks: list[tuple[str, str]] = []
    paragraph: list[str] = []
    item: list[str] = []

    answer = False  # the paragraph is an FAQ's labelled answer: never a heading, however short

    def flush() -> None:
        nonlocal answer
        if paragraph:
            joined = _join_lines(paragraph)
            heading = len(paragraph) == 1 and not answer and is_heading_line(joined)
            blocks.append(("heading" if heading else "paragraph", joined))
            paragraph.clear()
        answer = False
        if item:
            blocks.append(("item", _join_lines(item)))
            item.clear()

    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = _IMAGE.sub("", lines[i])
        i += 1
        fence = _FENCE.match(line)
        if fence:
            flush()
            body = [line.strip()]
            while i < len(lines) and not lines[i].strip().startswith(fence.group(1)):
                body.append(lines[i].rstrip())
                i += 1
            i += 1
            if len(body) > 1:  # a fence cut off by the chunk's end is closed here
                blocks.append(("code", "\n".join([*body, fence.group(1)])))
            continue
        if _UNDERLINE.match(line):
            # A setext underline makes the line above it a heading; a lone rule is decoration.
            if len(paragraph) == 1:
                blocks.append(("heading", paragraph.pop().strip()))
            flush()
        elif not line.strip() or _is_table_row(line):
            flush()
        elif _HEADING.match(line):
            flush()
            blocks.append(("heading", line.strip().lstrip("#").strip()))
        elif _QUESTION_LABEL.match(line):
            flush()
            blocks.append(("question", _QUESTION_LABEL.sub("", line, count=1).strip()))
        elif _ANSWER_LABEL.match(line):
            flush()
            paragraph.append(_ANSWER_LABEL.sub("", line, count=1))
            answer = True
        elif SHEET_ROW.match(line.strip()):
            flush()
            blocks.append(("row", line.strip()))
        elif _LIST_ITEM.match(line):
            flush()
            item.append(_LIST_ITEM.sub("", line, count=1))
        elif item and line[:1].isspace():
            item.append(line)
        else:
            if item:
                flush()
            paragraph.append(line)
    flush()
    return blocks


def is_heading_line(text: str) -> bool:
    """A line that names a topic rather than saying something: short, no sentence end, no "key: value"."""
    text = text.strip()
    if not text or text.endswith(_SENTENCE_END) or _KEY_VALUE.search(text):
        return False
    if CJK_RUN.search(text):
        return len(text) <= 40
    return len(text.split()) <= 12 and len(text) <= 100


def is_question(text: str) -> bool:
    """A unit that asks rather than answers: it ends with a question mark."""
    return text.rstrip(" \t\"'»”)」").endswith(("?", "？"))


def _is_label(text: str) -> bool:
    """A unit too short to say anything ("IT setup.", "Сроки."): a label of what follows, not an answer."""
    if CJK_RUN.search(text) or any(ch.isdigit() for ch in text) or text.endswith(_LEAD_IN_END):
        return False  # a lead-in ("Options:") is quoted with what it introduces
    return len(TERM.findall(text)) <= 2


def _outside_code(parts: list[str]) -> list[str]:
    """Sentences joined again where a cut fell inside an inline `code span` (odd backticks before it)."""
    out: list[str] = []
    for part in parts:
        if out and out[-1].count("`") % 2 == 1:
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


@dataclass
class Unit:
    """A piece of a passage: quotable (a sentence, list item, code block or table row) or context only
    (a heading or title, a question line); `context` is the heading and question it stands under."""

    text: str
    kind: str
    context: str = ""

    @property
    def quotable(self) -> bool:
        return self.kind not in ("heading", "question")


def answer_units(text: str) -> list[Unit]:
    """Every unit of a passage in order, each with the heading (and the FAQ question) it answers under.

    Sentences are cut by the chunker's rules (never inside "3.14", "e.g.", a URL's "?" or an inline
    code span); a unit ending in ":" is joined to what it introduces, or left out when nothing
    follows it in the passage. Headings, titles, labels and question lines are never quoted: they are
    the context of the units below them. Very short fragments are dropped.
    """
    from rag_core.ingest.chunking import split_sentences as paragraph_sentences

    units: list[Unit] = []
    heading = question = ""
    listing = False  # the last unit is a lead-in with its list: further items belong to it

    def context() -> str:
        return question or heading  # an FAQ's question says what its answer is about better than the page title

    for kind, body in _blocks(text):
        if kind in ("heading", "question"):
            if kind == "heading":
                heading, question = body, ""
            else:
                question = body
            units.append(Unit(body, kind, heading if kind == "question" else ""))
            listing = False
            continue
        parts = _outside_code(paragraph_sentences(body)) if kind == "paragraph" else [body]
        for part in parts:
            part = part if kind == "code" else part.strip(_EDGE_DEBRIS)
            last = units[-1] if units else None
            if last and last.quotable and (last.text.endswith(_LEAD_IN_END) or (listing and kind == "item")):
                joint = " " if kind == "paragraph" else "\n- " if kind == "item" else "\n"
                last.text = f"{last.text}{joint}{part}"
                listing = kind == "item"
                continue
            listing = False
            if kind == "paragraph" and is_question(part):
                units.append(Unit(part, "question", heading))
                question = part
            elif kind == "paragraph" and _is_label(part):
                units.append(Unit(part, "heading"))
                heading, question = part, ""
            else:
                units.append(Unit(part, kind, context()))
    if units and units[-1].quotable and units[-1].text.endswith(_LEAD_IN_END):
        units.pop()
    return [u for u in units if not u.quotable
            or (len(u.text) >= MIN_SENTENCE_CHARS and not u.text.startswith(("```", "~~~")))]


def split_sentences(text: str) -> list[str]:
    """The quotable units of a passage: whole sentences, list items, code blocks and table rows (`answer_units`)."""
    return [u.text for u in answer_units(text) if u.quotable]


def sections(text: str) -> list[str]:
    """A passage cut before each markdown heading: every section starts with the heading it sits under."""
    lines = text.splitlines(keepends=True)
    cuts = [i for i, line in enumerate(lines) if i and _HEADING.match(line)]
    return ["".join(lines[a:b]) for a, b in zip([0, *cuts], [*cuts, len(lines)])]
