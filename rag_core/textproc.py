"""Language detection and full-text preparation shared by ingestion and search."""

from __future__ import annotations

import re

# Scripts that decide the language of a text: Cyrillic -> Russian, kana/kanji -> Japanese.
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_KANA = re.compile(r"[\u3040-\u30FF]")
_CJK_RANGES = "\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F"
_CJK = re.compile(f"[{_CJK_RANGES}]")
_LATIN = re.compile(r"[A-Za-z]")

# PostgreSQL text-search configuration per detected language. Japanese has none that splits
# words, so its text is turned into character bigrams and indexed with 'simple'.
FTS_CONFIG = {"ru": "russian", "en": "english", "ja": "simple", "other": "simple"}


def detect_language(text: str, sample: int = 4000) -> str:
    """Guess 'ru', 'ja', 'en' or 'other' from the scripts used in the first `sample` characters."""
    head = text[:sample]
    cyr = len(_CYRILLIC.findall(head))
    cjk = len(_CJK.findall(head))
    lat = len(_LATIN.findall(head))
    if cjk and (_KANA.search(head) or cjk >= lat) and cjk * 2 >= cyr:
        return "ja"
    if cyr and cyr >= lat * 0.5:
        return "ru"
    if lat:
        return "en"
    return "other"


def cjk_bigrams(text: str) -> str:
    """Rewrite runs of CJK characters as space-separated overlapping bigrams; keep other words."""
    out: list[str] = []
    # The second alternative excludes CJK too, so "5月から" splits into "5" and bigrams of "月から".
    for run in re.finditer(f"[{_CJK_RANGES}]+|[^\\s\u3000-\u303F\uFF00-\uFF0F{_CJK_RANGES}]+", text):
        token = run.group(0)
        if _CJK.match(token):
            if len(token) == 1:
                out.append(token)
            else:
                out.extend(token[i : i + 2] for i in range(len(token) - 1))
        else:
            out.append(token)
    return " ".join(out)


def fts_text(text: str, language: str) -> str:
    """The text handed to to_tsvector for a chunk or query of the given language."""
    return cjk_bigrams(text) if language == "ja" else text


def embedding_input(title: str, text: str) -> str:
    """The text embedded for a chunk: prefixed with its document's title.

    A chunk cut from the middle of a document rarely names its subject; the title does.
    """
    if title and not text.startswith(title):
        return f"{title}\n{text}"
    return text
