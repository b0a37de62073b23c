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

from rag_core.chat.segments import CJK_RUN, SHEET_ROW, TERM, answer_units, sections
from rag_core.providers.calibration import IDENTITY

_HIRAGANA_ONLY = re.compile(r"[\u3040-\u309F]+")
_STOPWORDS = frozenset(
    "the a an of in on at to for and or is are was were be been by with from as that this these those it its "
    "what which who whom whose where when why how do does did can could would should will not no yes "
    "i me my we us our you your he him his she her they them their there".split()
    + "и в во на не что это как где когда кто какой какая какие ли по из за для от до или а но же бы то "
      "его её их с со к у о об при я мне меня мой моя мои мы нам нас наш вы вам вас ваш можно нужно".split()
)
# Sentences shorter than this carry too little to answer anything.
# In a follow-up, the earlier topic's words together weigh at most this share of the message's own
# words, each at most this share of its own weight: the new message's words decide what it asks.
TOPIC_SHARE = 0.3
# In a follow-up, a sentence whose section (its heading and what follows it) names none of the earlier
# topic's words scores this share: "From the command line: rag ingest" is off topic after "How do I
# delete a document?", whatever words it shares with "And how do I do that from the command line?".
OFF_TOPIC = 0.3
# A unit under no heading goes on from the sentence before it ("Bring your passport." after "On your first day,
# ..."): the question's words found only there count at this share of their weight; the sentence before is not
# embedded with it, which blurred its own meaning (eval/bench_multiturn.py, eval/bench_answers.py).
WINDOW_SHARE = 0.5
# A question that asks how many, how much or how long is answered by a unit that states a number: one that
# states none (a pointer to other rules) scores this share (eval/bench_multiturn.py, eval/bench_answers.py).
NO_QUANTITY = 0.7
# The words that ask for a quantity ("how many", "сколько", the 何 of "何日"): they say what kind of answer is
# wanted, not what it is about, so they are no terms to match ("Long-term follow-up" does not answer "how long").
_COUNTERS = ("日年月時分秒回人歳個本枚台冊件階度倍割円週代番位号周条巻話期種部点票頭匹羽隻機社校曲軒")
_ASKS_QUANTITY = re.compile(
    r"\bhow\s+(?:many|much|long|far|old)\b|(?<!\w)(?:сколько|скольких|насколько)(?!\w)|いくつ|いくら|どのくらい|"
    rf"どれくらい|どれだけ|何(?=[{_COUNTERS}]|パーセント|メートル|キロ|センチ|グラム|トン|文字|[カヶか]月|世紀)",
    re.IGNORECASE)
# A number as digits or as a word ("25", "ten days", "трёх дней", "五日", "三つ").
_NUMBER = re.compile(
    r"\d|(?<!\w)(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|thirty|forty|"
    r"fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen|half|twice|"
    r"од(?:ин|на|но|ного|ной|ну|ному)|дв(?:а|е|ух|ум|умя)|тр(?:и|ёх|ех|ём|ем|емя|ёмя)|четыр\w*|пят[ьиюе]\w*|"
    r"шест[ьиюе]\w*|сем(?:ь|и|ью)|восьм\w*|восем\w*|девят\w*|десят\w*|\w+надцат\w*|двадцат\w*|тридцат\w*|сорок\w*|"
    r"сто|сот\w*|тысяч\w*|миллион\w*|полтор\w*|половин\w*)(?!\w)|"
    rf"[〇一二三四五六七八九十百千万億]+(?:[{_COUNTERS}つ]|か月)", re.IGNORECASE)
# ...and so does one whose similarity to the folded question is below this share of the closest one's.
STANDALONE_RATIO = 0.6
# A sentence this close in meaning to the question (cosine, read on the embedder's calibrated scale) answers it
# without sharing its words; `answers_question` takes the embedder's own (CosineScale.answers_dense).
ANSWERS_DENSE = IDENTITY.answers_dense  # 0.45, where a cosine is read as it is


@dataclass
class Sentence:
    passage: int          # the reference number [n]
    position: int         # order inside its passage
    text: str             # what is quoted, exactly as the passage has it
    score: float = 0.0
    lexical: float = 0.0  # share of the question's term weight found in the unit and its context
    dense: float = 0.0    # closeness in meaning to the question (read on the embedder's scale)
    context: str = ""     # the heading and FAQ question the unit stands under
    own_lexical: float = 0.0  # the same share, of the message's own terms alone (a follow-up's are folded in)
    cosine: float = 0.0   # the raw cosine behind `dense`
    own_cosine: float = 0.0  # the raw cosine to the message alone
    answers: bool | None = None  # whether it answers the message (rag_core.chat.grounding); None: not judged
    topic_factor: float = 1.0  # OFF_TOPIC when it leaves a follow-up's topic (`_off_topic`)
    window: str = ""      # the sentence before a unit that stands under no heading: what it goes on from
    type_factor: float = 1.0  # NO_QUANTITY when the question asks how many and the unit states no number

    def rescore(self) -> None:
        """The score from the parts: shared terms, closeness in meaning, and a tie-breaker for earlier passages."""
        self.score = (self.lexical + 0.5 * self.dense + 0.02 / self.passage) * self.topic_factor * self.type_factor

    @property
    def scored_text(self) -> str:
        """The unit as it is matched: under its heading and question, which say what it is about."""
        return f"{self.context}\n{self.text}" if self.context else self.text


def terms(text: str) -> list[str]:
    """Lower-cased words (a 5-letter prefix stands in for a stem) and character bigrams of CJK runs."""
    out: list[str] = []
    for token in TERM.findall(text.lower()):
        if CJK_RUN.match(token):
            # Bigrams of hiragana alone are particles and endings ("のは", "ですか"): no content of their own.
            grams = [token] if len(token) == 1 else [token[i:i + 2] for i in range(len(token) - 1)]
            out.extend(g for g in grams if not _HIRAGANA_ONLY.fullmatch(g))
        elif token not in _STOPWORDS and (len(token) > 1 or token.isdigit()):
            if len(token) > 3 and token.endswith("s") and not token.endswith("ss") and token.isascii():
                token = token[:-1]  # an English plural: "files" matches "file"
            out.append(token[:5] if len(token) > 5 else token)
    return out


def _off_topic(sentences: Sequence[Sentence], section_terms: Sequence[set[str]], topic: set[str],
               own_dense: Sequence[float], standalone: Sequence[float]) -> list[bool]:
    """Which sentences of a follow-up's passages leave the conversation's topic.

    Off topic: its section names none of the earlier topic's words while another section does, or
    its meaning is far from the standalone question (below `STANDALONE_RATIO` of the closest
    sentence's similarity to it: a section can name "documents" in passing); and it is not close in
    meaning (`ANSWERS_DENSE`) to the message by itself, and its passage is not the one retrieval put
    first (a new topic taken for a follow-up still has its passage there).
    """
    on_topic = [bool(words & topic) for words in section_terms]
    if not any(on_topic):
        return [False] * len(sentences)
    best = max(standalone, default=0.0)
    far = [d < STANDALONE_RATIO * best for d in standalone] if best > 0 else [False] * len(sentences)
    first = sentences[0].passage
    return [(not kept or away) and own < ANSWERS_DENSE and s.passage != first
            for s, kept, away, own in zip(sentences, on_topic, far, own_dense)]


def asks_quantity(question: str) -> bool:
    """Whether a question asks how many, how much or how long ("How many days...", "Сколько...", "何日...")."""
    return bool(_ASKS_QUANTITY.search(question))


def states_number(text: str) -> bool:
    """Whether a unit states a number, in digits or in words."""
    return bool(_NUMBER.search(text))


def _share(weights: dict[str, float], own: set[str], around: set[str]) -> float:
    """The question's term weight a unit holds: its own terms fully, those only its window holds at `WINDOW_SHARE`."""
    return sum(w if t in own else WINDOW_SHARE * w if t in around else 0.0 for t, w in weights.items())


def score_sentences(question: str, passages: Sequence[tuple[int, str]], *, context_query: str = "",
                    embed: Callable[[list[str]], np.ndarray] | None = None,
                    embed_query: Callable[[str], np.ndarray] | None = None,
                    relevance: Callable[[float], float] | None = None) -> list[Sentence]:
    """Every sentence of the passages with its score against the question, best first.

    Args:
        passages: (reference number, text) pairs.
        context_query: the retrieval query when it differs from the question (a folded follow-up).
            Its extra words (the earlier topic) count for less than the question's own, and a
            sentence whose section names none of them scores `OFF_TOPIC` of its score (`_off_topic`).
            A sentence's meaning counts by its closeness to the question or to this standalone
            query, whichever is higher.
        embed, embed_query: unit vectors for sentences and for the question; without them the score
            is lexical only.
        relevance: reads a cosine on the embedder's calibrated scale (rag_core/providers/calibration.py),
            so the thresholds here, measured where a cosine spreads over 0..1, hold for an embedder whose
            cosines sit in a narrow high band; without it a cosine counts as it is.
    """
    sentences: list[Sentence] = []
    section_terms: list[set[str]] = []
    seen: set[str] = set()
    for n, text in passages:
        position = 0
        for section in sections(text):
            words = set(terms(section))
            previous = ""
            for unit in answer_units(section):
                if unit.quotable and unit.text not in seen:
                    seen.add(unit.text)
                    sentences.append(Sentence(n, position, unit.text, context=unit.context,
                                              window="" if unit.context else previous))
                    section_terms.append(words)
                previous = unit.text if unit.quotable else ""
                position += 1
    if not sentences:
        return []
    sent_terms = [set(terms(s.scored_text)) for s in sentences]
    df = Counter(t for ts in sent_terms for t in ts)
    total = len(sentences)

    def idf(term: str) -> float:
        return math.log(1.0 + (total + 1) / (df.get(term, 0) + 0.5))

    own_weights: dict[str, float] = {t: idf(t) for t in set(terms(_ASKS_QUANTITY.sub(" ", question)))}
    weights = dict(own_weights)
    topic = {t: idf(t) for t in set(terms(context_query)) - set(weights)}
    if topic:
        share = TOPIC_SHARE * sum(weights.values()) / sum(topic.values()) if weights else TOPIC_SHARE
        weights.update({t: w * min(TOPIC_SHARE, share) for t, w in topic.items()})
    norm = sum(weights.values()) or 1.0
    own_norm = sum(own_weights.values()) or 1.0
    for s, ts in zip(sentences, sent_terms):
        around = set(terms(s.window)) - ts if s.window else set()
        s.lexical = _share(weights, ts, around) / norm
        s.own_lexical = _share(own_weights, ts, around) / own_norm
    own_dense = [0.0] * len(sentences)  # similarity to the message alone
    standalone: list[float] = []        # similarity to the folded query, when there is one
    if embed is not None and embed_query is not None:
        m = np.asarray(embed([s.scored_text for s in sentences]), dtype=np.float32)
        m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
        for i, query in enumerate((question, context_query)):
            if not query:
                continue
            q = np.asarray(embed_query(query), dtype=np.float32)
            q = q / (np.linalg.norm(q) or 1.0)
            raw = [float(d) for d in m @ q]
            sims = [float(relevance(d)) if relevance else max(0.0, d) for d in raw]
            if i == 0:
                own_dense = sims
            else:
                standalone = sims
            for s, d, c in zip(sentences, sims, raw):
                s.dense = max(s.dense, d)
                s.cosine = max(s.cosine, c)
                if i == 0:
                    s.own_cosine = c
    off_topic = _off_topic(sentences, section_terms, set(topic), own_dense, standalone)
    quantity = asks_quantity(question)
    for s, off in zip(sentences, off_topic):
        s.topic_factor = OFF_TOPIC if off else 1.0
        s.type_factor = NO_QUANTITY if quantity and not states_number(s.text) else 1.0
        s.rescore()
    sentences.sort(key=lambda s: -s.score)
    return sentences


def pick_sentences(scored: Sequence[Sentence], *, max_sentences: int = 3, max_chars: int = 700,
                   relative: float = 0.8, elsewhere: float = 0.9) -> list[Sentence]:
    """The best sentence and the next ones that score close to it, within a length budget.

    A sentence of another passage than the best one's must score closer (`elsewhere`): what sits beside the
    answer usually completes it, while a sentence from elsewhere that only nearly matches drifts off the question.
    """
    if not scored:
        return []
    best = scored[0]
    chosen = [best]
    used = len(best.text)
    for s in scored[1:]:
        if len(chosen) >= max_sentences or s.score < relative * best.score:
            break
        if used + len(s.text) > max_chars or (s.passage != best.passage and s.score < elsewhere * best.score):
            continue
        chosen.append(s)
        used += len(s.text)
    return chosen


def answers_question(best: Sentence, *, min_lexical: float = 0.2, min_dense: float = ANSWERS_DENSE) -> bool:
    """Whether the best sentence plausibly answers: enough shared terms or a close embedding."""
    return best.lexical >= min_lexical or best.dense >= min_dense


def cite(sentence: Sentence) -> str:
    """A quoted unit with its reference number: after a sentence, or after the lead-in of a block or list."""
    if "\n" not in sentence.text:
        return f"{sentence.text} [{sentence.passage}]"
    first, rest = sentence.text.split("\n", 1)
    return f"{first} [{sentence.passage}]\n{rest}"


def join_quotes(parts: Sequence[str]) -> str:
    """Quoted units in one answer: sentences run on, a block or list stands in its own paragraph."""
    text = ""
    for part in parts:
        if text:
            text += "\n\n" if "\n" in part or "\n" in text.rsplit("\n\n", 1)[-1] else " "
        text += part
    return text


# A Japanese question that asks which thing or who ("…はどこの国の企業か？", "…を作った会社は？", "誰"), not how
# many or when: its answer is often the subject that a Wikipedia-style sentence leaves out because its article's
# title names it ("しかし18世紀には…3国に分裂。" in the article "ラオス").
_ASKS_FOR_SUBJECT_JA = re.compile(
    r"(誰|どこ|どの|どれ|何という|何と呼|なんという|何か|なに|何を|何が|何で|何の|何[党語教派族]|何[？?]$|といえば|"
    r"[のと]は[？?。]?$|もの(は|を)[？?。]?$|"
    r"(国|国家|首都|州都|会社|企業|人物|人|職業|発明者|都市|市|町|村|県|州|島|川|山|湖|駅|局|党|党名|社|組織|団体|"
    r"大学|チーム|選手|作品|言語|単語|宗教|建物|寺|城|言葉|名前|名称|用語|総称|季節|時代|物質|化合物|生物|動物|植物|"
    r"魚|鳥|病気|技術|方法|制度|法律|戦争)(は|か|を|ですか)[？?。]?$)")
# Longer titles are document names ("日本オフィス休暇規程"), not the name of a subject.
MAX_SUBJECT_TITLE_CHARS = 30


def asks_for_subject(question: str) -> bool:
    """Whether a question asks for the thing a passage is about, in a language whose sentences leave it out."""
    return bool(CJK_RUN.search(question)) and bool(_ASKS_FOR_SUBJECT_JA.search(question.strip()))


def compose(picked: Sequence[Sentence], subjects: dict[int, str] | None = None) -> str:
    """The answer: the picked units with their numbers.

    A document's title is not repeated in the answer (it stands beside the number in the Sources), except
    as the subject of a sentence that leaves it out when the question asks for that subject (`subjects`,
    by passage: given only then), and only for a sentence, not a table row, that does not name it already.
    """
    subjects = subjects or {}
    parts: list[str] = []
    for s in picked:
        subject = " ".join((subjects.get(s.passage) or "").split())
        named = subject and len(subject) <= MAX_SUBJECT_TITLE_CHARS and subject not in s.text and \
            not SHEET_ROW.match(s.text)
        parts.append(f"{subject} — {cite(s)}" if named else cite(s))
    return join_quotes(parts)
