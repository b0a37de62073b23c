"""Which retrieved passages answer a chat message, judged sentence by sentence, and whether a message needs
the conversation to be understood.

A passage is a source of an answer only when one of its quotable units (a sentence, list item, table row or
FAQ answer, read under its heading and question) is close to the message: in meaning on the embedder's
calibrated scale, or in meaning and in words together. A unit in another language than the message cannot
share its words, and multilingual encoders read such pairs lower, so its cosine is read with the scale's
cross-language shift instead of being vetoed by the missing words. Measured on the company conversation set
(tests/chat/company_set.py, eval/bench_multiturn.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from rag_core.chat.context import SOURCE_RATIO
from rag_core.chat.extractive import Sentence, score_sentences, terms
from rag_core.providers.calibration import CosineScale
from rag_core.search.types import ChunkHit
from rag_core.textproc import detect_language

# A unit that shares at least this share of the message's own term weight needs less closeness in meaning.
WORDS_SHARE = 0.5
# ...namely this much on the calibrated scale (where `CosineScale.answers_dense` alone answers).
WORDS_DENSE = 0.1

# Words that point back into the conversation: a message holding one cannot be understood alone.
_POINTERS = {
    "en": set("it its they them their theirs this that these those he she him her his hers there then one ones "
              "same such "
              "other else".split()),
    "ru": set("он она оно они его её ее их ему ей им ним ней него неё нее нём нем них этот эта это эти этого этой "
              "этих этом этим тот та то те того той тех там туда оттуда тогда такой такая такое такие так же "
              "тоже другие другой другая другое остальные".split()),
}
_LEADS = {
    "en": ("and ", "but ", "also ", "what about", "how about", "so ", "or ", "then "),
    "ru": ("а ", "и ", "но ", "а если", "а как", "тогда ", "ещё ", "еще ", "также "),
    "ja": ("じゃあ", "では", "それで", "それから", "また", "あと", "ちなみに", "で、"),
}
_JA_POINTERS = ("それ", "その", "そこ", "これ", "この", "ここ", "あれ", "あの", "そちら", "こちら", "彼", "同じ",
                "他の", "ほかの", "別の")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_HIRAGANA = re.compile(r"[\u3040-\u309F]")
_EXISTENTIAL = re.compile(r"\b(is|are|was|were|be)\s+there\b|\bthere\s+(is|are|was|were)\b", re.IGNORECASE)
# Content this short cannot name a topic of its own ("How deep?", "А высота?", "大阪は？").
MAX_ELLIPTIC_TERMS = 2
MAX_ELLIPTIC_JA_CHARS = 4


def message_language(text: str, fallback: str = "en") -> str:
    """The language of a message among en, ru and ja (the fallback for anything else)."""
    language = detect_language(text)
    return language if language in ("en", "ru", "ja") else fallback


def points_back(message: str) -> bool:
    """Whether a message refers to the conversation: a pointer (it, там, それ, other) or a lead-on ("And ...?",
    "А ...?", "では")."""
    text = " ".join(message.lower().split())
    language = message_language(message)
    if text.startswith(_LEADS.get(language, ())):
        return True
    if language == "ja":
        return any(p in text for p in _JA_POINTERS)
    words = _WORD.findall(_EXISTENTIAL.sub(" ", text))
    return any(w in _POINTERS.get(language, ()) for w in words)


def is_elliptic(message: str) -> bool:
    """Whether a message is too short to name a topic of its own ("How deep?", "А высота?", "大阪は？")."""
    if message_language(message) == "ja":
        content = [ch for ch in message if ch.isalnum() and not _HIRAGANA.match(ch)]
        return len(content) <= MAX_ELLIPTIC_JA_CHARS
    return len(set(terms(message))) <= MAX_ELLIPTIC_TERMS


def needs_conversation(message: str) -> bool:
    """Whether a message cannot be understood alone: it points back or is too short to name its topic."""
    return points_back(message) or is_elliptic(message)


@dataclass
class Support:
    """A retrieved passage and how well its best unit answers the message."""

    hit: ChunkHit
    relevance: float            # the best unit's closeness, read on the embedder's scale (0..1)
    units: list[Sentence]       # its scored units, best first


def read_cosine(cosine: float, scale: CosineScale, across: bool) -> float:
    """A unit's cosine on the calibrated scale; across languages it is read shifted."""
    return scale.relevance(min(1.0, cosine + (scale.cross_language_shift if across else 0.0)))


def answers(sentence: Sentence, relevance: float, own_relevance: float, scale: CosineScale,
            own_floor: float | None = None) -> bool:
    """Whether a unit answers the message: close in meaning, or sharing its words and fairly close.

    `relevance` is read against the message or, for a follow-up, its folded form, whichever is closer;
    `own_relevance` against the message alone. With `own_floor` (a follow-up whose own words name something)
    the unit must still be that near the message alone or share a word with it: the previous topic's passages
    do not answer a new question on the strength of the old one.
    """
    close = relevance >= scale.answers_dense or (sentence.own_lexical >= WORDS_SHARE and relevance >= WORDS_DENSE)
    return close and (own_floor is None or own_relevance > own_floor or sentence.own_lexical > 0)


def supporting_passages(message: str, hits: Sequence[ChunkHit], *, folded: str = "",
                        embed: Callable[[list[str]], np.ndarray], embed_query: Callable[[str], np.ndarray],
                        scale: CosineScale, ratio: float = SOURCE_RATIO) -> list[Support]:
    """The hits with a unit that answers the message, best supported first, without the far weaker ones.

    Args:
        folded: the message folded with the conversation, for a message that needs it; its units are then
            judged against whichever of the two they are closer to.
    """
    if not hits:
        return []
    language = message_language(message)
    # A follow-up's units are also read against the message alone, unless it names nothing of its own ("どこ
    # にありますか？"); one that points back ("What still works against them?") only needs to be nearer than
    # unrelated text, one that is merely short ("What is the capital of Australia?") as near as a word match.
    own_floor = None
    if folded and terms(message):
        own_floor = 0.0 if points_back(message) else WORDS_DENSE - 1e-9
    scored = score_sentences(message, [(i, h.text) for i, h in enumerate(hits, 1)], context_query=folded,
                             embed=embed, embed_query=embed_query,
                             relevance=None if scale.is_identity else scale.relevance)
    by_passage: dict[int, list[Sentence]] = {}
    for s in scored:
        across = detect_language(s.text) not in (language, "other")
        read, own = read_cosine(s.cosine, scale, across), read_cosine(s.own_cosine, scale, across)
        if across:
            # Across languages no word can be shared: its closeness in meaning stands in for the shared words
            # (to the folded follow-up for the ranking, to the message alone for the veto).
            s.lexical, s.own_lexical = read, own
        s.dense, s.answers = read, answers(s, read, own, scale, own_floor)
        s.rescore()
        by_passage.setdefault(s.passage, []).append(s)
    supports: list[Support] = []
    for i, units in by_passage.items():
        good = [s.dense for s in units if s.answers]
        if good:
            supports.append(Support(hits[i - 1], max(good), sorted(units, key=lambda s: -s.score)))
    supports.sort(key=lambda sp: (-sp.relevance, -sp.hit.similarity))
    if not supports:
        return []
    best = supports[0].relevance
    return [sp for sp in supports if sp.relevance >= ratio * best]
