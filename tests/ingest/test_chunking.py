"""Unit tests of the character-based chunker: offsets, sizes, overlap, boundaries and pages."""

from __future__ import annotations

import random

import pytest

from rag_core.ingest.chunking import Chunk, chunk_text, count_tokens

EN = (
    "Retrieval-augmented generation combines search with a language model. "
    "The retriever finds passages, e.g. paragraphs of a manual, and the model reads them. "
    "Dr. Smith measured a recall of 3.14 times the baseline! Was that expected? "
    "Nobody knew… The results were published in 2023. Further work followed.\n\n"
    "A second paragraph explains the index. It stores vectors and full-text data.\n"
    "Lines inside a paragraph can also separate pieces of text."
)
RU = (
    "Он сказал: «Да». Т.е. всё уже было решено, т.е. спорить не о чем. "
    "В 1999 г. Москва быстро росла. А. С. Пушкин — великий поэт! "
    "«Привет!» — сказал он. Разве это не ясно? Число пи равно 3,14 и т.д. и т.п. "
    "Ответ был получен через неделю.\n\n"
    "Второй абзац начинается здесь. Он тоже состоит из предложений."
)
JA = (
    "今日は天気がいいです。明日は雨でしょう！本当ですか？はい、そうです．"
    "検索拡張生成は検索と言語モデルを組み合わせます。文書を小さな断片に分けて索引を作ります。"
    "「これは引用です。」と彼は言った。\n\n"
    "第二段落です。ここにも文があります！"
)
MIXED = EN + "\n\n" + RU + "\n" + JA + " Mixed 日本語 and русский text. End."
CRLF = EN.replace("\n", "\r\n") + "\r\n\r\n" + RU.replace("\n", "\r\n")
TABS = "\tIndented\tcolumns\tof data.\n\tNext\trow here. " * 20
BLANKS = "\n\n\n   \n" + "Para one.\n\n\n\n\n\nPara two.\n \n \t\n" * 30 + "\n\n\n"

TEXTS = {"en": EN, "ru": RU, "ja": JA, "mixed": MIXED, "crlf": CRLF, "tabs": TABS, "blanks": BLANKS}


def assert_valid(text: str, chunks: list[Chunk], chunk_size: int) -> None:
    """The invariants every caller relies on."""
    assert [c.index for c in chunks] == list(range(len(chunks)))
    covered = bytearray(len(text))
    for c in chunks:
        assert text[c.start_char:c.end_char] == c.text
        assert 0 < len(c.text) <= chunk_size
        assert c.text == c.text.strip()
        assert c.token_count == count_tokens(c.text)
        covered[c.start_char:c.end_char] = b"\x01" * len(c.text)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start_char > a.start_char and b.end_char > a.end_char
    missed = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missed, f"non-whitespace characters outside every chunk at {missed[:10]}"


@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("size,overlap", [(1000, 150), (120, 30), (60, 0), (50, 40), (20, 5)])
def test_invariants_on_varied_texts(name: str, size: int, overlap: int) -> None:
    text = TEXTS[name]
    assert_valid(text, chunk_text(text, size, overlap), size)


def test_overlap_present_between_neighbours() -> None:
    text = (EN + " ") * 6
    chunks = chunk_text(text, 200, 60)
    assert len(chunks) > 3
    for a, b in zip(chunks, chunks[1:]):
        assert b.start_char < a.end_char
        assert a.end_char - b.start_char <= 60
        # Snapped to a word start, not mid-word.
        assert text[b.start_char - 1].isspace()


def test_no_overlap_when_zero() -> None:
    text = (EN + " ") * 6
    chunks = chunk_text(text, 200, 0)
    assert len(chunks) > 3
    for a, b in zip(chunks, chunks[1:]):
        assert b.start_char >= a.end_char


def test_paragraph_break_preferred_over_sentences() -> None:
    p1 = "First paragraph here. It has two sentences."
    p2 = "Second paragraph follows. It also has two."
    text = p1 + "\n\n" + p2
    assert len(p1) <= 60 and len(p2) <= 60 and len(text) > 60
    chunks = chunk_text(text, 60, 0)
    assert [c.text for c in chunks] == [p1, p2]
    # With overlap the first chunk still ends exactly at the paragraph break.
    assert chunk_text(text, 60, 20)[0].text == p1


def test_crlf_blank_line_is_a_paragraph_break() -> None:
    text = "Alpha paragraph, first.\r\n\r\nBeta paragraph, second.\r\n"
    chunks = chunk_text(text, 30, 0)
    assert [c.text for c in chunks] == ["Alpha paragraph, first.", "Beta paragraph, second."]


def _sentence_bounds(sentences: list[str], sep: str) -> tuple[str, set[int], set[int]]:
    text = sep.join(sentences)
    starts, ends, pos = set(), set(), 0
    for s in sentences:
        starts.add(pos)
        ends.add(pos + len(s))
        pos += len(s) + len(sep)
    return text, starts, ends


def test_russian_sentence_boundaries_and_abbreviations() -> None:
    sentences = [
        "Он сказал: «Да».",
        "Т.е. всё уже было решено, т.е. спорить не о чем.",
        "В 1999 г. Москва быстро росла.",
        "А. С. Пушкин — великий поэт!",
        "«Привет!» — сказал он.",
        "Разве это не ясно?",
        "Ответ был получен через неделю…",
        "Потом всё закончилось.",
    ]
    text, starts, ends = _sentence_bounds(sentences, " ")
    chunks = chunk_text(text, 60, 0)
    assert len(chunks) > 3
    for c in chunks:
        assert c.start_char in starts and c.end_char in ends, c.text


def test_japanese_sentence_boundaries_without_spaces() -> None:
    sentences = [
        "今日は天気がいいです。", "明日は雨でしょう！", "本当ですか？", "はい、そうです．",
        "検索拡張生成は検索と言語モデルを組み合わせます。", "文書を断片に分けます。",
    ]
    text, starts, ends = _sentence_bounds(sentences, "")
    chunks = chunk_text(text, 30, 0)
    assert len(chunks) > 2
    for c in chunks:
        assert c.start_char in starts and c.end_char in ends, c.text


def test_english_decimals_and_abbreviations_do_not_split() -> None:
    sentences = [
        "Pi is about 3.14 in most textbooks.",
        "Dr. Smith used tools, e.g. a hammer, to fix it.",
        "It worked!",
        "Did it?",
    ]
    text, starts, ends = _sentence_bounds(sentences, " ")
    chunks = chunk_text(text, 50, 0)
    for c in chunks:
        assert c.start_char in starts and c.end_char in ends, c.text


def test_long_unbroken_string_is_cut_by_characters() -> None:
    text = "x" * 2500
    chunks = chunk_text(text, 1000, 0)
    assert [len(c.text) for c in chunks] == [1000, 1000, 500]
    assert "".join(c.text for c in chunks) == text
    overlapped = chunk_text(text, 1000, 100)
    assert_valid(text, overlapped, 1000)
    for a, b in zip(overlapped, overlapped[1:]):
        assert b.start_char < a.end_char


def test_long_sentence_is_cut_at_whitespace() -> None:
    text = " ".join(f"word{i}" for i in range(600))  # one sentence, far over the size
    chunks = chunk_text(text, 200, 0)
    assert_valid(text, chunks, 200)
    for c in chunks[:-1]:
        assert text[c.end_char].isspace()
        assert len(c.text) >= 160


def test_long_japanese_sentence_is_cut_by_characters() -> None:
    text = "あ" * 500 + "。"
    chunks = chunk_text(text, 100, 10)
    assert_valid(text, chunks, 100)
    assert len(chunks) >= 5


@pytest.mark.parametrize("text", ["", " ", "\n\n\t \r\n", "\u3000 \u00a0"])
def test_empty_and_whitespace_only(text: str) -> None:
    assert chunk_text(text) == []


def test_tiny_text_is_one_stripped_chunk() -> None:
    text = "\n  Hello, world!  \n\n"
    [chunk] = chunk_text(text)
    assert (chunk.index, chunk.text, chunk.start_char, chunk.end_char) == (0, "Hello, world!", 3, 16)
    assert chunk.page_number is None
    [one] = chunk_text("x")
    assert (one.text, one.start_char, one.end_char) == ("x", 0, 1)


def test_text_shorter_than_size_is_one_chunk() -> None:
    [chunk] = chunk_text("  " + EN + "  ", chunk_size=len(EN))
    assert chunk.text == EN and chunk.start_char == 2


def test_page_numbers_from_spans() -> None:
    page_texts = [("Page %d says something. " % n) * 12 for n in (1, 2, 3)]
    text, pages, pos = "", [], 0
    for n, body in enumerate(page_texts, start=1):
        if text:
            text += "\n\n"
            pos += 2
        text += body
        pages.append((n, pos, pos + len(body)))
        pos += len(body)
    chunks = chunk_text(text, 100, 20, pages=pages)
    assert_valid(text, chunks, 100)
    for c in chunks:
        expected = next(n for n, s, e in pages if s <= c.start_char < e)
        assert c.page_number == expected
    assert {c.page_number for c in chunks} == {1, 2, 3}
    assert all(c.page_number is None for c in chunk_text(text, 100, 20))


def test_deterministic() -> None:
    assert chunk_text(MIXED, 90, 30) == chunk_text(MIXED, 90, 30)


def test_large_overlap_still_progresses() -> None:
    text = "Ab. " * 300 + "x" * 700 + " tail."
    for overlap in (0, 50, 98, 99):
        assert_valid(text, chunk_text(text, 100, overlap), 100)


def test_overlap_after_long_whitespace_gap() -> None:
    text = "alpha beta gamma. " * 5 + " " * 500 + "delta epsilon zeta. " * 5
    assert_valid(text, chunk_text(text, 60, 40), 60)


@pytest.mark.parametrize("size,overlap", [(0, 0), (10, 10), (10, -1), (10, 20)])
def test_invalid_arguments(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("some text", size, overlap)


def test_count_tokens_estimate() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("Привет, мир") == 3
    assert count_tokens("今日は晴れ。") == 6
    assert count_tokens("pi = 3.14") == 5
    assert count_tokens("Mixed 日本 text") == 4


def test_one_megabyte_text_runs() -> None:
    text = ((EN + "\n\n" + RU + "\n\n" + JA + "\n\n") * 800)[:1_000_000]
    chunks = chunk_text(text, 1000, 150)
    assert chunks[-1].end_char == len(text.rstrip())
    for c in chunks[::97]:
        assert text[c.start_char:c.end_char] == c.text and len(c.text) <= 1000


# hypothesis is not installed in the venv, so a seeded random loop stands in for it.
_WORDS = [
    "alpha", "Beta", "3.14", "e.g.", "Dr.", "т.е.", "г.", "Москва", "«цитата»", "слово",
    "日本語", "東京", "です。", "か？", "！", "．", "…", "!", "?", ".", ",", "—",
    "x" * 70, "ж" * 45, "あ" * 90,
]
_SEPS = [" ", " ", " ", "", "\n", "\r\n", "\n\n", "\r\n\r\n", "\t", "  ", "\n \n\n", "\u3000", "\f"]


def _random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 120)):
        parts.append(rng.choice(_WORDS))
        parts.append(rng.choice(_SEPS))
    if rng.random() < 0.2:
        parts.append("".join(rng.choice("ab .!?。\n\t") for _ in range(rng.randint(0, 80))))
    return "".join(parts)


def test_random_texts_keep_invariants() -> None:
    rng = random.Random(20240601)
    for _ in range(400):
        text = _random_text(rng)
        size = rng.choice([1, 2, 5, 17, 40, 64, 100, 333])
        overlap = rng.randint(0, size - 1) if rng.random() < 0.8 else 0
        chunks = chunk_text(text, size, overlap)
        assert_valid(text, chunks, size)
        if not text.strip():
            assert chunks == []


def test_no_chunk_crosses_a_page_boundary() -> None:
    page_texts = ["Short first page.", "A second page that is short too.", ("Third page line. " * 20).strip()]
    text = "\n\n".join(page_texts)
    pages, pos = [], 0
    for n, body in enumerate(page_texts, start=1):
        pages.append((n, pos, pos + len(body)))
        pos += len(body) + 2
    chunks = chunk_text(text, 200, 30, pages=pages)
    assert_valid(text, chunks, 200)
    assert [c.text for c in chunks[:2]] == page_texts[:2]  # the short pages are not packed together
    for c in chunks:
        n, start, end = pages[c.page_number - 1]
        assert start <= c.start_char and c.end_char <= end
    assert [c.index for c in chunks] == list(range(len(chunks)))
