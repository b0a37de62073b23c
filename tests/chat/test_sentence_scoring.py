"""How the offline answerer ranks a passage's sentences: what a sentence goes on from, and the kind of answer a
question asks for (pure functions, no database)."""

from __future__ import annotations

import numpy as np

from rag_core.chat.extractive import asks_quantity, score_sentences, states_number


def _top(question: str, text: str, **kwargs) -> str:
    return score_sentences(question, [(1, text)], **kwargs)[0].text


def test_a_sentence_under_no_heading_is_read_with_the_sentence_it_goes_on_from() -> None:
    # "Bring ..." says what to bring to the exam only through the sentence before it.
    text = "The exam starts in room 4 at 8:30. Bring a pencil and your student card."
    assert _top("What should I bring to the exam?", text) == "Bring a pencil and your student card."
    # Words only the sentence before holds count for less than a sentence's own...
    scored = score_sentences("What should I bring to the exam?", [(1, f"{text} Bring your exam ticket.")])
    assert scored[0].text == "Bring your exam ticket."
    window = next(s for s in scored if s.text.startswith("Bring a pencil"))
    assert window.window and 0 < window.lexical < scored[0].lexical
    # ...and are not embedded with it: its meaning stays its own ("The protection waned ..." read with the long
    # sentence before it no longer answered "How long does the protection last?", eval/bench_multiturn.py).
    embedded: list[str] = []

    def embed(texts: list[str]) -> np.ndarray:
        embedded.extend(texts)
        return np.ones((len(texts), 4), dtype=np.float32)

    score_sentences("What should I bring?", [(1, text)], embed=embed, embed_query=lambda q: np.ones(4, np.float32))
    assert embedded == ["The exam starts in room 4 at 8:30.", "Bring a pencil and your student card."]


def test_a_question_that_asks_how_many_is_answered_by_a_sentence_with_a_number() -> None:
    # Both share the same words; only one of them says how many.
    text = "New staff follow the leave rules of their own office. New employees receive 20 days of leave."
    assert _top("How many days of leave do new staff get?", text) == "New employees receive 20 days of leave."
    ru = "Новые сотрудники следуют правилам своего офиса об отпуске. Новые сотрудники получают двадцать дней отпуска."
    assert _top("Сколько дней отпуска получают новые сотрудники?", ru).endswith("двадцать дней отпуска.")


def test_the_words_that_ask_how_long_are_no_terms_to_match() -> None:
    text = "Long-term use of the drug protected the patients. The protection faded after ten years."
    assert _top("How long does the protection last?", text) == "The protection faded after ten years."


def test_quantity_questions_and_numbers_in_three_languages() -> None:
    assert all(asks_quantity(q) for q in ("How many days?", "How much does it cost?", "How long is it valid?",
                                          "Сколько дней?", "何日休めますか？", "パスワードは何文字以上ですか？"))
    assert not any(asks_quantity(q) for q in ("What is the summer leave?", "Who manages it?", "何という名前？",
                                              "Где офис?"))
    assert all(states_number(t) for t in ("25 days", "ten days", "sixteen weeks", "до трёх дней", "семь дней",
                                          "５日間", "三日間"))
    assert not any(states_number(t) for t in ("the Japanese leave rules", "семья", "правила офиса"))
