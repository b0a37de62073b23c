"""Pure functions of the chat: budgets, titles, sentence scoring, durations, the LLM registry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rag_core.chat.context import format_references, relevant_hits, within_budget
from rag_core.chat.extractive import pick_sentences, score_sentences, terms
from rag_core.chat.segments import split_sentences
from rag_core.chat.prompts import AnswerRequest, Passage, labels, session_title
from rag_core.units import parse_duration
from rag_core.errors import ConfigError, InvalidInput
from rag_core.chat.llms import ExtractiveLLM, build_llm
from rag_core.search.types import ChunkHit


def _hit(n: int, text: str) -> ChunkHit:
    return ChunkHit(chunk_id=n, document_id=n, site_id="s", source=f"doc{n}.md", title="", file_type="md",
                    chunk_index=0, text=text, start_char=0, end_char=len(text), page_number=None,
                    similarity=0.9 - n / 100, score=0.9)


def test_budget_keeps_whole_chunks_best_first_and_skips_what_does_not_fit() -> None:
    hits = [_hit(1, "a" * 100), _hit(2, "я" * 300), _hit(3, "c" * 50)]  # 'я' is two bytes in UTF-8
    chosen = within_budget(hits, 300)
    assert [h.chunk_id for h in chosen] == [1, 3]
    assert len(format_references(chosen).encode("utf-8")) <= 300
    assert within_budget(hits, 10) == []
    assert format_references([]) == ""


def test_a_hit_enters_by_similarity_or_by_covering_the_question() -> None:
    hits = [_hit(1, "a"), _hit(50, "b"), _hit(70, "c")]  # similarities 0.89, 0.40, 0.20
    assert [h.chunk_id for h in relevant_hits(hits, 0.3)] == [1, 50]
    coverage = {70: 0.5, 50: 0.1}
    assert [h.chunk_id for h in relevant_hits(hits, 0.3, coverage, 0.5)] == [1, 50, 70]  # rank order kept
    assert [h.chunk_id for h in relevant_hits(hits, 0.3, {70: 0.49}, 0.5)] == [1, 50]
    assert [h.chunk_id for h in relevant_hits(hits, 0.3, {70: 1.0}, 0.0)] == [1, 50]  # 0 turns coverage off


def test_session_titles_are_cut_sensibly() -> None:
    assert session_title("  What is   hybrid search? ") == "What is hybrid search?"
    long = "Where exactly in the repository is the hybrid search implemented and how is it tested today"
    title = session_title(long)
    assert title.endswith("…") and len(title) <= 61 and long.startswith(title[:-1])
    assert " " not in title[-2:]
    assert session_title("梅" * 100) == "梅" * 60 + "…"


def test_sentences_and_terms() -> None:
    assert split_sentences("First one here. Second one here!\n- item three is long") == [
        "First one here.", "Second one here!", "item three is long"]
    assert split_sentences("梅雨は雨季です。小笠原諸島にはない。") == ["梅雨は雨季です。", "小笠原諸島にはない。"]
    assert "小笠" in terms("小笠原諸島") and "imple" in terms("implemented")
    assert "the" not in terms("the search")


def test_scoring_prefers_the_sentence_that_shares_the_question_terms() -> None:
    passages = [(1, "Retention deletes old messages. Hybrid search lives in rag_core/search/hybrid.py."),
                (2, "梅雨は東アジアの雨季です。梅雨がない地域は小笠原諸島です。")]
    best = score_sentences("Where does hybrid search live?", passages)[0]
    assert best.passage == 1 and "hybrid.py" in best.text
    best_ja = score_sentences("梅雨がない地域はどこ？", passages)[0]
    assert best_ja.passage == 2 and "小笠原諸島" in best_ja.text
    assert len(pick_sentences(score_sentences("hybrid search", passages), max_sentences=1)) == 1


def test_extractive_answer_cites_and_says_when_it_cannot_answer() -> None:
    llm = ExtractiveLLM()
    req = AnswerRequest(question="Where does hybrid search live?", retrieval_query="Where does hybrid search live?",
                        passages=[Passage(1, "a.md", "", "Hybrid search lives in hybrid.py. Other text here.", 0.8)],
                        history=[])
    assert llm.answer(req).startswith("Hybrid search lives in hybrid.py. [1]")
    unrelated = AnswerRequest(question="Who painted the Mona Lisa?", retrieval_query="Who painted the Mona Lisa?",
                              passages=[Passage(1, "a.md", "", "Retention deletes old chat messages.", 0.3)],
                              history=[])
    # Not answered: the same statement as when nothing was found, with no closest passage cited.
    assert llm.answer(unrelated) == labels("en")["no_context"]
    none = AnswerRequest(question="q", retrieval_query="q", passages=[], history=[], language="ja")
    assert llm.answer(none) == "この質問に関連する文書が見つからなかったため、文書に基づいて回答できません。"
    assert llm.condense([{"role": "user", "content": "What is X?"}, {"role": "assistant", "content": "X is"}],
                        "Where?") == "What is X? Where?"


def test_durations() -> None:
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("7") == timedelta(days=7)
    for bad in ("30x", "", "-1d", "0d"):
        with pytest.raises(InvalidInput):
            parse_duration(bad)


def test_llm_registry(make_settings, monkeypatch) -> None:
    assert build_llm(make_settings()).name == "extractive"
    with pytest.raises(ConfigError, match="Unknown LLM 'nope'; choose one of: extractive, openai, llamacpp, local"):
        build_llm(make_settings(llm="nope"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="RAG_LLM_BASE_URL"):
        build_llm(make_settings(llm="openai", llm_base_url="", llm_api_key="", openai_base_url="", openai_api_key=""))
    with pytest.raises(ConfigError, match="RAG_LLM_MODEL"):
        build_llm(make_settings(llm="openai", llm_base_url="http://localhost:1234/v1", llm_model=""))
    llm = build_llm(make_settings(llm="openai", llm_base_url="http://localhost:1234/v1", llm_model="qwen"))
    assert llm.describe() == "model 'qwen' at http://localhost:1234/v1"
    with pytest.raises(ConfigError, match="path of a local .gguf model file"):
        build_llm(make_settings(llm="llamacpp", llm_model="qwen"))


MARKDOWN = """## Deleting documents

On the Documents page, tick a document and press Delete. From the command line:

```
.venv/bin/rag delete docs/old.md
```

| setting | default | meaning |
|---|---|---|
| `RAG_MAX_FILE_MB` | 50 | largest file accepted |

The REST call is `DELETE /documents?source=docs/old.md&site=x` and it answers 204. In the
project folder, run `make install` first, e.g. before the first ingest.
Options:
- `--site NAME` limits it to a site
- `--dry-run` prints what would go
Ends with a lead-in:"""


def test_answer_units_are_whole_sentences_items_and_blocks() -> None:
    units = split_sentences(MARKDOWN)
    assert units == [  # the heading is the context of what follows it, never a unit to quote
        "On the Documents page, tick a document and press Delete.",
        "From the command line:\n```\n.venv/bin/rag delete docs/old.md\n```",
        "The REST call is `DELETE /documents?source=docs/old.md&site=x` and it answers 204.",
        "In the project folder, run `make install` first, e.g. before the first ingest.",
        "Options:\n- `--site NAME` limits it to a site\n- `--dry-run` prints what would go",
    ]
    assert split_sentences("Run `make. Then` now here. Next one here.") == [
        "Run `make. Then` now here.", "Next one here."]
    assert split_sentences("日本の首都は\n東京です。次の文はこれです。") == ["日本の首都は東京です。", "次の文はこれです。"]


def test_cited_blocks_keep_their_lines() -> None:
    from rag_core.chat.extractive import Sentence, cite, join_quotes

    block = cite(Sentence(2, 0, "From the command line:\n```\nrag delete x\n```"))
    assert block == "From the command line: [2]\n```\nrag delete x\n```"
    assert join_quotes(["One. [1]", "Two. [2]", block, "Three. [1]"]) == (
        f"One. [1] Two. [2]\n\n{block}\n\nThree. [1]")


def test_sources_read_most_similar_first_without_the_far_weaker_ones() -> None:
    from rag_core.chat.context import trusted_order

    hits = [_hit(1, "a"), _hit(2, "b"), _hit(3, "c")]
    hits[0].similarity, hits[1].similarity, hits[2].similarity = 0.226, 0.293, 0.1
    assert [h.chunk_id for h in trusted_order(hits)] == [2, 1]
    assert trusted_order([]) == []


def test_a_quote_stands_without_its_documents_title() -> None:
    """The title belongs to the Sources: an answer that starts with it reads as a heading quoted."""
    from rag_core.chat.extractive import Sentence, compose

    picked = [Sentence(1, 0, "国内の都市間鉄道網は欧州でも随一である。"), Sentence(1, 1, "首都はアムステルダム。"),
              Sentence(2, 0, "Hybrid search fuses two rankings.")]
    assert compose(picked) == (
        "国内の都市間鉄道網は欧州でも随一である。 [1] 首都はアムステルダム。 [1] Hybrid search fuses two rankings. [2]")


def test_source_panels_render_markdown_with_the_quotes_marked() -> None:
    from rag_core.chat.quotes import cited_spans
    from rag_core.render.quotes import passage_html

    passage = ("# Deleting\n\nTo delete a document, open the\nDocuments page. From the command line:\n\n"
               "```\nrag delete x\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- item one here\n- item two <b>x</b>")
    answer = ("Deleting — To delete a document, open the Documents page. [1] From the command line: [1]\n"
              "```\nrag delete x\n```\n\nitem two <b>x</b> [1] Elsewhere said. [2]")
    spans = cited_spans(answer, 1, passage)
    assert [passage[a:b] for a, b in spans] == [
        "To delete a document, open the\nDocuments page.", "From the command line:", "```\nrag delete x\n```",
        "item two <b>x</b>"]
    assert cited_spans(answer, 2, passage) == []
    html = passage_html(passage, spans)
    assert "<h1>Deleting</h1>" in html and "<table>" in html and "<td>1</td>" in html and "# Deleting" not in html
    assert "<pre><code><mark" in html and "rag delete x</mark>" in html
    assert "<li><mark" in html and "&lt;b&gt;x&lt;/b&gt;</mark></li>" in html and "<b>" not in html
    assert html.count("<mark") == html.count("</mark>") == 5


def test_history_and_context_is_the_text_a_client_answers_from() -> None:
    request = AnswerRequest(question="And the width?", retrieval_query="evacuation route width", passages=[],
                            history=[{"role": "user", "content": "Which alarm?"},
                                     {"role": "assistant", "content": "An automatic one [1]."}],
                            context_text="--- Reference 1 ---\nSource: a.md\nRoutes are 1.2 m wide.")
    assert request.history_and_context() == (
        "HISTORY:\nuser: Which alarm?\nassistant: An automatic one [1].\n\n"
        "CONTEXT:\n--- Reference 1 ---\nSource: a.md\nRoutes are 1.2 m wide.\n")
    empty = AnswerRequest(question="Hi", retrieval_query="Hi", passages=[], history=[])
    assert empty.history_and_context() == "HISTORY:\n(no earlier messages)\n\nCONTEXT:\n(no relevant passages)\n"


def test_headings_titles_and_question_lines_are_context_never_quotes() -> None:
    """What a document names (titles, headings, labels, an FAQ's questions) is matched as the context of the
    sentences under it, and only those sentences are quoted; a spreadsheet row is a unit of its own."""
    from rag_core.chat.segments import answer_units

    text = ("Acme — Leave Policy\n===================\n\n## Contractors\n\nContractors are not entitled to paid "
            "leave.\n\nIT setup. Your laptop is handed over on day one.\n\nQ: How often is the firmware updated?\n"
            "A: Every six weeks\n\nIs it waterproof?\nYes, it is rated IP68.\n\n## Sheet: Offices\n"
            "Office: Osaka; Phone: 06-6345-7781\nOffice: Tokyo; Phone: 03-5211-4400\n")
    units = [(u.kind, u.text, u.context) for u in answer_units(text)]
    quotable = [(text, context) for kind, text, context in units if kind not in ("heading", "question")]
    assert quotable == [
        ("Contractors are not entitled to paid leave.", "Contractors"),
        ("Your laptop is handed over on day one.", "IT setup."),
        ("Every six weeks", "How often is the firmware updated?"),  # the answer label is dropped, never a heading
        ("Yes, it is rated IP68.", "Is it waterproof?"),
        ("Office: Osaka; Phone: 06-6345-7781", "Sheet: Offices"),
        ("Office: Tokyo; Phone: 03-5211-4400", "Sheet: Offices"),
    ]
    assert ("heading", "Acme — Leave Policy", "") in units and not any("===" in t for _, t, _ in units)
