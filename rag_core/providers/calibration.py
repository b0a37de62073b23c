"""How to read one embedder's cosine: the chat floor and the relevance percentage shown to users.

Embedders spread their cosines differently. use-multilingual gives an unrelated passage about 0.1
and a relevant one 0.3-0.7; e5-small squeezes everything into a narrow high band (unrelated text
still scores about 0.79). A raw cosine shown as a percentage therefore means nothing across
embedders, and one chat floor cannot fit both. Each embedder's scale lives here, measured on the
shared evaluation sets (docs/configuration.md, docs/benchmarks.md); an embedder without one reads cosines as they are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CosineScale:
    """Cosines that read as 0 %, 50 % and 100 % relevance, and the chat floor.

    `half` is the cosine that best separates relevant from non-relevant passages on the shared
    sets; `zero` is what the best passage of an unrelated collection scores; `full` is a typical
    cosine of a clearly relevant passage. Between them the reading is linear, and clipped to 0..1.
    """

    zero: float = 0.0
    half: float = 0.5
    full: float = 1.0
    chat_floor: float = 0.3
    # chat: how much closer, read on this scale, a message's own best passage must be to it than the search
    # folded with the conversation finds, for the message to be taken as a new topic (rag_core.chat.turn)
    follow_up_margin: float = 0.1
    # chat: the offline answerer's best sentence this close to the question, read on this scale, answers it
    # without sharing its words (rag_core.chat.extractive.answers_question; else it says the documents do
    # not seem to answer)
    answers_dense: float = 0.45
    # chat: how much lower this embedder reads a passage in another language than the question, for the same
    # closeness (rag_core.chat.grounding: a unit across languages is read with its cosine raised by this much)
    cross_language_shift: float = 0.0

    @property
    def is_identity(self) -> bool:
        """True when the reading is the cosine itself."""
        return (self.zero, self.half, self.full) == (0.0, 0.5, 1.0)

    def relevance(self, cosine: float) -> float:
        """The displayed relevance (0..1) of a cosine."""
        if cosine <= self.half:
            value = 0.5 * (cosine - self.zero) / max(self.half - self.zero, 1e-9)
        else:
            value = 0.5 + 0.5 * (cosine - self.half) / max(self.full - self.half, 1e-9)
        return round(min(1.0, max(0.0, value)), 4)


# use-multilingual keeps the identity reading its users know; its chat floor 0.3 was measured on
# the help questions (rag_core.chat.context.relevant_hits).
SCALES: dict[str, CosineScale] = {
    # Its cosines are aligned across languages ("Как удалить документ?" and "How do I delete a document?" read
    # 0.41 and 0.42 against the sentence that answers both); an unrelated question reads 0.0-0.05 against it.
    "use-multilingual": CosineScale(answers_dense=0.3),
    # Semantic top-20 of 100 queries each on scifact and jsquad (eval samples, docs/benchmarks.md):
    # the best passage of an unrelated collection scores 0.79 (median; 95th percentile 0.80-0.81),
    # relevant passages 0.88-0.91 (median; 5th percentile 0.84-0.86), and 0.87-0.89 best separates
    # relevant passages from the non-relevant ones retrieved beside them. The chat floor 0.82 keeps
    # 95% or more of the relevant passages and no best passage of an unrelated collection.
    # Its follow-up margin, swept with eval/bench_multiturn.py --margins (109 turns): 0.2-0.4 put the right
    # source first on every turn (0.1: 99.1%, 0.5: 99.1%); use-multilingual's best is 0.1 (0.2: 96.3% first).
    # Its answering closeness: the best sentence of a standalone question of that set in its own document
    # reads 0.81 (median; 0.44 at the 5th percentile), in the sample corpus, which answers none of them,
    # 0 (0.26 at the 95th percentile). 0.25 keeps 98.6% of the answers and lets 5.6% of the others through
    # (0.45: 94.4% and none); a question in Russian over English documents reads lower (0.30 for "how do I
    # delete a document" against its sentence), and it must still be answered.
    # Read per unit (a sentence under its heading) on the company conversation set (tests/chat/company_set.py,
    # eval/bench_multiturn.py): the best unit of an unanswerable question reads up to 0.826 in its own language
    # and 0.800 across languages; answering units 0.84-0.93 in their own language and 0.78-0.86 across them.
    "e5-small": CosineScale(zero=0.79, half=0.87, full=0.93, chat_floor=0.82, follow_up_margin=0.3,
                            answers_dense=0.28, cross_language_shift=0.03),
}

IDENTITY = CosineScale()


def cosine_scale(embedder: str) -> CosineScale:
    """The scale of an embedder by its registry name or recorded identity ('openai:model' reads as is)."""
    return SCALES.get(embedder, IDENTITY)


def chat_floor(settings: object) -> float:
    """RAG_CHAT_SIMILARITY_FLOOR when set, else the configured embedder's calibrated floor."""
    configured = getattr(settings, "chat_similarity_floor", None)
    if configured is not None:
        return float(configured)
    return cosine_scale(getattr(settings, "embedder", "")).chat_floor
