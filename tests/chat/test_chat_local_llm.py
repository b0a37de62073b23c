"""RAG_LLM=local end to end: the packaged Qwen2.5-Coder-0.5B answers through `wb.chat`, every sentence grounded.

The model's weights come from the `local-llm` extra (installed by `make test`); the first use assembles
them into the models folder, as a user's first chat does.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request

import pytest

from rag_core.chat.faithfulness import check_answer
from rag_core.chat.prompts import labels

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_wb(wb, tmp_path_factory):
    """The workbench answering with the packaged 0.5B model, assembled into a folder of this module's own."""
    models = tmp_path_factory.mktemp("local-models")
    yield wb.variant(llm="local", llm_model="qwen2.5-coder-0.5b", models_dir=models, llm_timeout_sec=600.0)
    shutil.rmtree(models, ignore_errors=True)  # 491 MB


def test_the_local_model_streams_an_answer_whose_every_sentence_cites_the_passage_that_says_it(
        local_wb, docs_site, session_id) -> None:
    streamed: list[str] = []
    turn = local_wb.chat("When does the chat retention purge run?", session_id=session_id, site_id=docs_site,
                         on_token=streamed.append)

    assert turn.llm.startswith("local qwen2.5-coder-0.5b")
    assert "03:00" in turn.answer
    assert "".join(streamed) == turn.answer
    passages = {s.n: s.text for s in turn.sources}
    checked = check_answer(turn.answer, passages)
    assert checked and all(c.supported for c in checked), checked
    cited = {s.source for s in turn.sources if any(s.n in c.cited for c in checked)}
    assert cited == {"docs/retention.md"}


def test_a_question_the_documents_do_not_answer_gets_the_plain_statement_without_a_citation(
        local_wb, docs_site, session_id) -> None:
    turn = local_wb.chat("What is the capital of France?", session_id=session_id, site_id=docs_site)

    words = labels("en")
    assert turn.answer == words["no_context"] and turn.sources == []
    assert "[" not in turn.answer


def test_the_loopback_listener_llama_cpp_opens_refuses_other_local_callers(local_wb, docs_site, session_id) -> None:
    """xllamacpp always listens on 127.0.0.1; the workbench calls the model in-process, so the listener
    must not hand the model (or llama.cpp's web UI) to any other process on the machine."""
    local_wb.chat("When does the chat retention purge run?", session_id=session_id, site_id=docs_site)
    address = local_wb.llm.listening_address
    assert address and address.startswith("http://127.0.0.1:")
    for path in ("/v1/models", "/v1/chat/completions"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(address.rstrip("/") + path, data=b"{}" if "chat" in path
                                                          else None), timeout=10)
        assert refused.value.code == 401


def test_llamacpp_streams_an_answer_from_a_gguf_file_in_process(local_wb, docs_site, session_id) -> None:
    """RAG_LLM=llamacpp (a GGUF file of the user's) runs on the same in-process server: here the file the
    local provider assembled."""
    from rag_core.providers.local_models import ensure_model_file, packaged_model

    path = ensure_model_file(packaged_model("qwen2.5-coder-0.5b"), local_wb.settings.model_cache_dir)
    llamacpp_wb = local_wb.variant(llm="llamacpp", llm_model=str(path))
    streamed: list[str] = []
    turn = llamacpp_wb.chat("When does the chat retention purge run?", session_id=session_id, site_id=docs_site,
                            on_token=streamed.append)

    assert turn.llm == f"llamacpp {path}"
    assert len(streamed) > 1 and "".join(streamed).strip() == turn.answer
    assert "03:00" in turn.answer
