"""The offline answerer's text work: sentences out of passages, each scored against the question.

Scores mix term overlap (words, and character bigrams for Japanese, weighted by how rare a term is
among the candidate sentences) with embedding similarity when an embedder is given.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

_CJK_CLASS = r"\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F"
_TERM = re.compile(rf"[{_CJK_CLASS}]+|[^\W\d_]+|\d+", re.UNICODE)
_CJK_RUN = re.compile(rf"[{_CJK_CLASS}]")
# Sentence ends: CJK full stops (no space follows them), or ., !, ? followed by space.
_SENTENCE_END = re.compile(r"(?<=[。！？!?])\s*|(?<=[.;])\s+(?=\S)")
_STOPWORDS = frozenset(
    "the a an of in on at to for and or is are was were be been by with from as that this these those it its "
    "what which who whom whose where when why how do does did can could would should will not no yes".split()
    + "и в во на не что это как где когда кто какой какая какие ли по из за для от до или а но же бы то "
      "его её их с со к у о об при".split()
)
# Sentences shorter than this carry too little to answer anything.
MIN_SENTENCE_CHARS = 6


@dataclass
class Sentence:
    passage: int          # the reference number [n]
    position: int         # order inside its passage
    text: str
    score: float = 0.0
    lexical: float = 0.0
    dense: float = 0.0


def split_sentences(text: str) -> list[str]:
    """Sentences and list items of a passage, trimmed; very short fragments are dropped."""
    out: list[str] = []
    for line in re.split(r"\n+", text):
        for part in _SENTENCE_END.split(line):
            part = part.strip(" \t-*•#>|")
            if len(part) >= MIN_SENTENCE_CHARS:
                out.append(part)
    return out


def terms(text: str) -> list[str]:
    """Lower-cased words (a 5-letter prefix stands in for a stem) and character bigrams of CJK runs."""
    out: list[str] = []
    for token in _TERM.findall(text.lower()):
        if _CJK_RUN.match(token):
            out.extend([token] if len(token) == 1 else [token[i:i + 2] for i in range(len(token) - 1)])
        elif token not in _STOPWORDS and (len(token) > 1 or token.isdigit()):
            out.append(token[:5] if len(token) > 5 else token)
    return out


def score_sentences(question: str, passages: Sequence[tuple[int, str]], *, context_query: str = "",
                    embed: Callable[[list[str]], np.ndarray] | None = None,
                    embed_query: Callable[[str], np.ndarray] | None = None) -> list[Sentence]:
    """Every sentence of the passages with its score against the question, best first.

    Args:
        passages: (reference number, text) pairs.
        context_query: the retrieval query when it differs from the question (a folded follow-up);
            its extra terms count for less than the question's own.
        embed, embed_query: unit vectors for sentences and for the question; without them the score
            is lexical only.
    """
    sentences: list[Sentence] = []
    seen: set[str] = set()
    for n, text in passages:
        for pos, sent in enumerate(split_sentences(text)):
            if sent not in seen:
                seen.add(sent)
                sentences.append(Sentence(n, pos, sent))
    if not sentences:
        return []
    sent_terms = [set(terms(s.text)) for s in sentences]
    df = Counter(t for ts in sent_terms for t in ts)
    total = len(sentences)

    def idf(term: str) -> float:
        return math.log(1.0 + (total + 1) / (df.get(term, 0) + 0.5))

    weights: dict[str, float] = {t: idf(t) for t in set(terms(question))}
    for t in set(terms(context_query)) - set(weights):
        weights[t] = 0.3 * idf(t)
    norm = sum(weights.values()) or 1.0
    for s, ts in zip(sentences, sent_terms):
        s.lexical = sum(w for t, w in weights.items() if t in ts) / norm
    if embed is not None and embed_query is not None:
        q = np.asarray(embed_query(question), dtype=np.float32)
        m = np.asarray(embed([s.text for s in sentences]), dtype=np.float32)
        q /= np.linalg.norm(q) or 1.0
        m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
        for s, d in zip(sentences, m @ q):
            s.dense = float(max(0.0, d))
    for s in sentences:
        # Earlier references ranked higher in retrieval: a small tie-breaker in their favour.
        s.score = s.lexical + 0.5 * s.dense + 0.02 / s.passage
    sentences.sort(key=lambda s: -s.score)
    return sentences


def pick_sentences(scored: Sequence[Sentence], *, max_sentences: int = 3, max_chars: int = 700,
                   relative: float = 0.8) -> list[Sentence]:
    """The best sentence and the next ones that score close to it, within a length budget."""
    if not scored:
        return []
    best = scored[0]
    chosen = [best]
    used = len(best.text)
    for s in scored[1:]:
        if len(chosen) >= max_sentences or s.score < relative * best.score:
            break
        if used + len(s.text) > max_chars:
            continue
        chosen.append(s)
        used += len(s.text)
    return chosen


def answers_question(best: Sentence, *, min_lexical: float = 0.2, min_dense: float = 0.45) -> bool:
    """Whether the best sentence plausibly answers: enough shared terms or a close embedding."""
    return best.lexical >= min_lexical or best.dense >= min_dense
