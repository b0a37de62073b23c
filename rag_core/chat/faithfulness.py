"""The faithfulness check of generated answers: a sentence stays only when the passage it cites says it.

A generated sentence must carry the [n] of a passage it was given, and most of its content terms
(words, numbers, the character pairs of Japanese kanji and katakana) must occur in that passage;
every number it states must, and it may deny something only where the passage denies something.
A question is not an answer. Sentences that fail are dropped before the user reads them. The check
is lexical on purpose: a small model that paraphrases into another language or adds a figure of
its own fails it, which is the point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

# Share of a sentence's content terms that the passages it cites must hold (eval/bench_answers.py --llm local
# prints the faithfulness this gives).
MIN_SUPPORT = 0.6
# Ends a sentence: a full stop before a space, a mark or the end, the CJK terminators, a line break.
_TERMINATORS = "。！？!?"
# Citation marks and closing punctuation right after a sentence's end belong to it: "Fact. [2]", "事実[1]。".
_TRAILER = re.compile(r"(?:[ \t]*\[\d{1,3}\])+[。.!?！？]?")
_CITATION = re.compile(r"\[(\d{1,3})\]")
_ENDED_THEN_MARKED = re.compile(r"^(.*?[。.!?！？])\s*((?:\[\d{1,3}\])+)[。.!?！？]?$", re.DOTALL)
# A piece that may still grow into a citation mark of the sentence before it ("[", "[1", "[12]").
_PARTIAL_MARK = re.compile(r"^\[\d{0,3}\]?[。.!?！？]?$")
# Content-bearing CJK: kanji and katakana (hiragana is mostly grammar: particles and endings).
_CJK_CONTENT = r"\u30A0-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F"
_TOKEN = re.compile(rf"[{_CJK_CONTENT}]+|[^\W\d_]+|\d+", re.UNICODE)
_CJK = re.compile(rf"[{_CJK_CONTENT}]")
# A denial the passage does not make ("No, aspirin does not prevent cancer" over a passage that says it
# reduced cancer) keeps every content word of the passage: the words alone cannot catch it.
_NEGATION = re.compile(r"\b(?:not|no|never|none|cannot|neither|nor)\b|n't\b|\b(?:не|нет|ни|никогда|нельзя)\b"
                       r"|ない|ません|ぬ|ず[、。]", re.IGNORECASE)
_HIRAGANA = re.compile(r"^[\u3040-\u309F]+$")
_FUNCTION_WORDS = frozenset(
    "the a an of in on at to for and or is are was were be been being by with from as that this these those it "
    "its their they he she his her has have had do does did not no can could would should will may also than then "
    "there which who what when where how".split()
    + "и в во на не что это как где когда кто ли по из за для от до или а но же бы то его её их с со к у о об при "
      "был была были было является составляет".split()
)


@dataclass(frozen=True)
class CheckedSentence:
    """One sentence of a generated answer and the verdict of the grounding check."""

    text: str                 # as the model wrote it, citation marks included
    cited: tuple[int, ...]    # the [n] it carries, in order
    support: float            # share of its content terms found in the passages it cites
    supported: bool
    reason: str = ""          # why it was dropped: "no citation", "cites no given passage", "unsupported number 12"


def content_terms(text: str) -> set[str]:
    """Words (a five-letter prefix stands in for a stem), numbers, and character pairs of kanji and katakana runs."""
    out: set[str] = set()
    for token in _TOKEN.findall(text.lower()):
        if _CJK.match(token):
            out.update([token] if len(token) == 1 else {token[i:i + 2] for i in range(len(token) - 1)})
        elif token.isdigit():
            out.add(token.lstrip("0") or "0")
        elif len(token) > 1 and token not in _FUNCTION_WORDS and not _HIRAGANA.match(token):
            out.add(token[:5])
    return out


def _numbers(text: str) -> set[str]:
    return {n.lstrip("0") or "0" for n in re.findall(r"\d+", text)}


def split_answer(text: str) -> list[str]:
    """Sentences of a generated answer, each with the citation marks written right after it."""
    out: list[str] = []
    start = i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        ends = ch == "\n" or ch in _TERMINATORS or (
            ch == "." and (i + 1 == n or text[i + 1].isspace() or text[i + 1] == "["))
        if not ends:
            i += 1
            continue
        end = i + 1
        trailer = _TRAILER.match(text, end)
        if trailer:
            end = trailer.end()
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = i = end
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def check_sentence(sentence: str, passages: Mapping[int, str], *, min_support: float = MIN_SUPPORT) -> CheckedSentence:
    """Whether a sentence cites a given passage and says only what the passages it cites say.

    Args:
        passages: the passages the model was given, by their reference number [n].
    """
    cited = tuple(int(m) for m in _CITATION.findall(sentence))
    valid = [n for n in dict.fromkeys(cited) if n in passages]
    if not cited:
        return CheckedSentence(sentence, cited, 0.0, False, "no citation")
    if not valid:
        return CheckedSentence(sentence, cited, 0.0, False, "cites no given passage")
    claim = _CITATION.sub(" ", sentence)
    source = "\n".join(passages[n] for n in valid)
    terms = content_terms(claim)
    if not terms:
        return CheckedSentence(sentence, cited, 0.0, False, "says nothing of its own")
    if claim.rstrip(" 。.").endswith(("?", "？")):
        return CheckedSentence(sentence, cited, 0.0, False, "a question, not an answer")
    if _NEGATION.search(claim) and not _NEGATION.search(source):
        return CheckedSentence(sentence, cited, 0.0, False, "a denial its passage does not make")
    missing_numbers = sorted(_numbers(claim) - _numbers(source))
    support = len(terms & content_terms(source)) / len(terms)
    if missing_numbers:
        return CheckedSentence(sentence, cited, support, False, f"unsupported number {missing_numbers[0]}")
    if support < min_support:
        return CheckedSentence(sentence, cited, support, False, f"support {support:.2f} below {min_support:g}")
    return CheckedSentence(sentence, cited, support, True)


def ground_sentence(sentence: str, passages: Mapping[int, str], *,
                    min_support: float = MIN_SUPPORT) -> CheckedSentence:
    """`check_sentence`, and a sentence that another given passage supports is cited to that one instead.

    Small models copy a passage's sentence and then write the wrong number after it; the sentence
    is kept only with the [n] of the passage that says it, so what the reader checks is still true.
    A sentence with no mark at all is not given one: it is dropped.
    """
    checked = check_sentence(sentence, passages, min_support=min_support)
    if checked.supported or not checked.cited:
        return checked
    claim = _CITATION.sub("", sentence).rstrip()
    end = _ENDED_THEN_MARKED.match(sentence.strip())
    trailing = sentence.strip()[len(end.group(1)) + 1 + len(end.group(2)):] if end else ""
    best: CheckedSentence | None = None
    for n in passages:
        if n in checked.cited:
            continue
        other = check_sentence(f"{claim} [{n}]{trailing}", passages, min_support=min_support)
        if other.supported and (best is None or other.support > best.support):
            best = other
    if best is None:
        return checked
    return CheckedSentence(best.text, best.cited, best.support, True,
                           f"cited [{', '.join(map(str, checked.cited))}], said by [{best.cited[0]}]")


def check_answer(text: str, passages: Mapping[int, str], *, min_support: float = MIN_SUPPORT) -> list[CheckedSentence]:
    """The grounding verdict of every sentence of an answer."""
    return [check_sentence(s, passages, min_support=min_support) for s in split_answer(text)]


def tidy_sentence(sentence: str) -> str:
    """A generated sentence in the answer's form, `text [n]`: one terminator, before its marks ("X. [1]。" -> "X. [1]")."""
    m = _ENDED_THEN_MARKED.match(sentence.strip())
    return f"{m.group(1)} {m.group(2)}" if m else sentence.strip()


def join_sentences(sentences: Sequence[str]) -> str:
    """Kept sentences as one answer: CJK sentences run on, others are separated by a space."""
    text = ""
    for s in sentences:
        if text and not (text.endswith(tuple(_TERMINATORS + "。")) and _CJK.search(s[:1] or " ")):
            text += " "
        text += s
    return text


def citation_grammar(numbers: Sequence[int], max_sentences: int = 3) -> str:
    """A llama.cpp grammar (GBNF) for an answer of one to `max_sentences` lines, each one sentence ending in
    the [n] of one of `numbers`."""
    marks = " | ".join(f'"{n}"' for n in numbers)
    optional = " ".join(["line?"] * (max_sentences - 1))
    # a full stop inside a sentence only as a decimal point ("3.5"): a sentence's end is followed by its mark
    return (f'root ::= line {optional}\n'
            'line ::= text [。.!?！？]? " "? "[" mark "]" [。.!?！？]? "\\n"\n'
            'text ::= ([^\\[\\]\\n。！？!?.] | "." [0-9])+\n'
            f"mark ::= {marks}\n")


class SentenceStream:
    """Cuts streamed text into whole sentences: each one is handed out once the next has begun."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, piece: str) -> list[str]:
        """The sentences completed by this piece of text."""
        self._buffer += piece
        sentences = split_answer(self._buffer)
        if len(sentences) < 2 or _PARTIAL_MARK.match(sentences[-1]):
            return []
        done = sentences[:-1]
        self._buffer = self._buffer[self._buffer.rfind(sentences[-1]):]
        return done

    def finish(self) -> list[str]:
        """The sentences still held when the text ends."""
        sentences, self._buffer = split_answer(self._buffer), ""
        return sentences
