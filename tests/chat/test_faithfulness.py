"""The grounding check of generated answers (rag_core/chat/faithfulness.py): pure functions, no model."""

from __future__ import annotations

from rag_core.chat.faithfulness import (
    SentenceStream, check_answer, check_sentence, citation_grammar, ground_sentence, join_sentences, split_answer,
    tidy_sentence,
)

PASSAGES = {
    1: "Chat retention deletes messages older than thirty days. The purge runs every night at 03:00.",
    2: "富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。",
    3: "Ширина эвакуационного выхода должна быть не менее 1,2 метра.",
}


def test_a_sentence_that_cites_the_passage_saying_it_is_kept() -> None:
    for sentence in ("The purge runs every night at 03:00 [1].", "富士山の標高は3776メートルである。 [2]",
                     "Ширина эвакуационного выхода не менее 1,2 метра [3]."):
        checked = check_sentence(sentence, PASSAGES)
        assert checked.supported, checked


def test_a_sentence_without_a_valid_citation_is_dropped() -> None:
    assert check_sentence("The purge runs every night at 03:00.", PASSAGES).reason == "no citation"
    assert check_sentence("The purge runs every night at 03:00 [7].", PASSAGES).reason == "cites no given passage"


def test_a_sentence_the_cited_passage_does_not_say_is_dropped() -> None:
    assert not check_sentence("The capital of France is Paris [1].", PASSAGES).supported
    # the right words with a figure of the model's own
    checked = check_sentence("The purge runs every night at 04:00 [1].", PASSAGES)
    assert not checked.supported and checked.reason == "unsupported number 4"
    # true, but not what passage 1 says
    assert not check_sentence("富士山の標高は3776メートルである。 [1]", PASSAGES).supported
    # the passage's words turned into a denial, or into a question
    assert check_sentence("No, the purge does not run every night [1].", PASSAGES).reason == \
        "a denial its passage does not make"
    assert check_sentence("富士山は活火山ではない。 [2]", PASSAGES).reason == "a denial its passage does not make"
    assert check_sentence("When does the purge run every night? [1]", PASSAGES).reason == "a question, not an answer"


def test_a_sentence_cited_to_the_wrong_passage_is_cited_to_the_one_that_says_it() -> None:
    checked = ground_sentence("富士山の標高は3776メートルである。 [1]", PASSAGES)
    assert checked.supported and checked.cited == (2,) and checked.text == "富士山の標高は3776メートルである。 [2]"
    # a sentence no passage says stays dropped, and one with no mark is not given one
    assert not ground_sentence("The capital of France is Paris [2].", PASSAGES).supported
    assert not ground_sentence("The purge runs every night at 03:00.", PASSAGES).supported


def test_an_answer_is_cut_into_sentences_with_the_marks_written_after_them() -> None:
    text = "Retention deletes old messages. [1] The purge runs at 03:00 [1]. 富士山は活火山。[2]。最後[2]"
    assert split_answer(text) == ["Retention deletes old messages. [1]", "The purge runs at 03:00 [1].",
                                  "富士山は活火山。[2]。", "最後[2]"]
    assert split_answer("It is 1.2 m wide [3].\nNext line") == ["It is 1.2 m wide [3].", "Next line"]
    assert [c.supported for c in check_answer(text, PASSAGES)] == [True, True, True, False]


def test_streamed_text_gives_each_sentence_once_it_is_complete() -> None:
    stream = SentenceStream()
    out: list[str] = []
    for piece in ["The purge", " runs at 03:00.", " [", "1]", " Chat retention", " deletes [1]", "."]:
        out += stream.feed(piece)
        if piece == " [":
            assert out == []  # the mark that follows still belongs to the sentence
    out += stream.finish()
    assert out == ["The purge runs at 03:00. [1]", "Chat retention deletes [1]."]


def test_generated_sentences_read_as_one_answer() -> None:
    assert tidy_sentence("The purge runs at 03:00. [1]。") == "The purge runs at 03:00. [1]"
    assert tidy_sentence("標高は3776メートルである。[2]。") == "標高は3776メートルである。 [2]"
    assert join_sentences(["A [1].", "B [2]."]) == "A [1]. B [2]."


def test_the_grammar_allows_only_the_numbers_of_the_given_passages() -> None:
    grammar = citation_grammar([1, 3])
    assert 'mark ::= "1" | "3"' in grammar
    assert grammar.startswith("root ::= line line? line?")
