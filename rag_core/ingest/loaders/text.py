"""Markdown and plain text files; a Markdown title comes from front matter or the first heading."""

from __future__ import annotations

import re

from rag_core.ingest.loaders.document import LoadedDocument, clean
from rag_core.ingest.loaders.encoding import decode_text

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FRONT_TITLE = re.compile(r"^title\s*:\s*(.+?)\s*$", re.IGNORECASE)


def _markdown_title(text: str) -> str:
    """Front-matter `title:`, else the first heading outside code fences (ATX `# x` or setext)."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        for i in range(1, min(len(lines), 200)):
            if lines[i].strip() in ("---", "..."):
                for line in lines[1:i]:
                    m = _FRONT_TITLE.match(line)
                    if m:
                        title = m.group(1).strip().strip("\"'").strip()
                        if title:
                            return title
                start = i + 1
                break
    in_fence = False
    previous = ""
    for line in lines[start:]:
        if _FENCE.match(line):
            in_fence = not in_fence
            previous = ""
            continue
        if in_fence:
            continue
        m = _ATX.match(line)
        if m:
            return m.group(2).strip()
        if previous.strip() and _SETEXT.match(line):
            return previous.strip()
        previous = line
    return ""


def load_text(data: bytes, stem: str, url: str | None, file_type: str) -> LoadedDocument:
    text, meta = decode_text(data)
    text = clean(text)
    title = _markdown_title(text) if file_type == "md" else ""
    if not title and not stem:
        first = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
        title = first if len(first) < 120 else ""
    return LoadedDocument(text=text, title=title or stem, file_type=file_type, metadata=meta)
