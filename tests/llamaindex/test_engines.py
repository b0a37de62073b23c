"""as_query_engine / as_chat_engine: LlamaIndex engines with the workbench's answerers, citations and history."""

from __future__ import annotations

import uuid
from pathlib import Path

from llama_index.core.llms import ChatMessage
from llama_index.core.postprocessor import SimilarityPostprocessor

from rag_core.llamaindex.chat_store import WorkbenchChatStore


def test_query_engine_answers_with_numbered_citations_and_sources(wb, corpus) -> None:
    site, _ = corpus
    engine = wb.as_query_engine(site_id=site, k=3, node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.0)])
    response = engine.query("How many days of paid holiday do employees get?")
    assert "25 days" in str(response) and "[1]" in str(response)
    sources = response.metadata["sources"]
    assert Path(sources[0]["source"]).name == "holidays.md" and sources[0]["n"] == 1
    rendered = response.metadata["rendered"]
    assert rendered.startswith("## Sources\n1. [") and "holidays.md" in rendered and "## Answer" in rendered
    assert response.metadata["citations"][0]["documentPath"] == sources[0]["source"]


def test_chat_engine_history_lives_in_the_workbench_session(wb, corpus) -> None:
    site, _ = corpus
    session = f"li-{uuid.uuid4().hex[:8]}"
    engine = wb.as_chat_engine(session, site_id=site, k=3)
    first = engine.chat("What must be done before the centrifugal pump starts?")
    assert "primed" in first.response
    second = engine.chat("and how often is its impeller checked?")
    assert "500 hours" in second.response
    # The conversation is the app's and the CLI's session: both turns, answers with citations.
    history = wb.chat_history(session)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["sources"] and Path(history[1]["sources"][0]["documentPath"]).name == "pump_manual.md"
    assert wb.get_session(session)["site_id"] == site
    assert any(s["id"] == session for s in wb.list_sessions(site_id=site))
    # A new engine on the same session continues it.
    again = wb.as_chat_engine(session, site_id=site).chat_history
    assert [m.content for m in again][0] == "What must be done before the centrifugal pump starts?"
    wb.chat_reset(session)


def test_chat_store_round_trip(wb, site) -> None:
    store = WorkbenchChatStore(wb.store, site_id=site)
    key = f"li-{uuid.uuid4().hex[:8]}"
    store.set_messages(key, [ChatMessage(role="user", content="hi"),
                             ChatMessage(role="assistant", content="hello", additional_kwargs={"sources": [{"n": 1}]})])
    store.add_message(key, ChatMessage(role="user", content="bye"))
    assert [m.content for m in store.get_messages(key)] == ["hi", "hello", "bye"]
    assert store.get_sources(key) == [[], [{"n": 1}], []]
    assert store.delete_last_message(key).content == "bye"
    assert store.delete_message(key, 0).content == "hi"
    assert key in store.get_keys()
    assert [m.content for m in store.delete_messages(key)] == ["hello"] and store.get_messages(key) == []
    wb.chat_reset(key)


class Shortest:
    """A reranker of the registry's protocol that prefers short passages (no model to download)."""

    name = "shortest"

    def score(self, query: str, passages) -> list[float]:
        return [-float(len(p)) for p in passages]


def test_the_configured_reranker_runs_as_a_node_postprocessor(wb, corpus, monkeypatch) -> None:
    from rag_core.providers import rerankers

    site, _ = corpus
    monkeypatch.setitem(rerankers.RERANKERS, "shortest", lambda settings, model: Shortest())
    engine = wb.variant(reranker="shortest").as_query_engine(site_id=site, k=4, mode="semantic")
    response = engine.query("pump impeller")
    lengths = [len(n.node.text) for n in response.source_nodes]
    assert lengths == sorted(lengths) and len(lengths) == 4
    assert response.source_nodes[0].node.metadata["rerank_score"] == -lengths[0]
    assert Path(response.metadata["sources"][0]["source"]).name == "budget.csv"


def _openai_server_class():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "chat" / "openai_server.py"
    spec = importlib.util.spec_from_file_location("li_openai_server", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OpenAIServer


def test_engines_with_a_generative_answerer_send_numbered_references(wb, corpus) -> None:
    site, _ = corpus
    session = f"li-{uuid.uuid4().hex[:8]}"
    with _openai_server_class()() as server:
        server.reply = lambda body: ("holiday allowance per year" if "Standalone question:" in body["messages"][-1]["content"]
                                     else "Employees get 25 days [1].")
        generative = wb.variant(llm="openai", llm_base_url=server.base_url, llm_model="test-model")
        response = generative.as_query_engine(site_id=site, k=2).query("How much paid holiday is there?")
        assert str(response) == "Employees get 25 days [1]."
        prompt = "\n".join(m["content"] for m in server.requests[-1]["messages"])
        assert "--- Reference 1 ---\nSource: " in prompt and "square brackets" in prompt
        assert Path(response.metadata["sources"][0]["source"]).name == "holidays.md"
        engine = generative.as_chat_engine(session, site_id=site, k=2)
        engine.chat("How much paid holiday is there?")
        engine.chat("and per month?")
        # The follow-up was condensed by the model with LlamaIndex's prompt, then answered with the history.
        assert any("Follow Up Input: and per month?" in r["messages"][-1]["content"] for r in server.requests)
        roles = [m["role"] for m in server.requests[-1]["messages"]]
        assert roles[0] == "system" and roles.count("user") == 2 and "assistant" in roles
    assert len(wb.chat_history(session)) == 4
    wb.chat_reset(session)


def test_query_engine_sources_come_best_first_with_the_scores_search_reports(wb, corpus) -> None:
    site, _ = corpus
    # A relevance floor that only chunks sharing a word with the query pass: search drops the others,
    # and so must the engines, which rank with search's fusion and floor.
    strict = wb.variant(search_cosine_floor=0.99)
    question = "pump impeller"
    results = strict.search(question, site_id=site, limit=10)["results"]
    expected = [(r["file_path"], r["score"]) for r in results]
    assert {Path(p).name for p, _ in expected} == {"pump_manual.md", "pump_log.txt"}

    response = strict.as_query_engine(site_id=site, k=10).query(question)
    nodes = [(n.node.metadata["source"], round(n.score, 6)) for n in response.source_nodes]
    assert nodes == expected
    assert [s["source"] for s in response.metadata["sources"]] == [p for p, _ in expected]
    retrieved = strict.as_retriever(site_id=site, k=10).retrieve(question)
    assert [(n.node.metadata["source"], round(n.score, 6)) for n in retrieved] == expected


def test_chat_engine_searches_a_follow_up_folded_with_the_previous_question(wb, corpus) -> None:
    site, _ = corpus
    session = f"li-{uuid.uuid4().hex[:8]}"
    engine = wb.as_chat_engine(session, site_id=site, k=3)
    try:
        engine.chat("What must be done before the centrifugal pump starts?")
        second = engine.chat("and how often is its impeller checked?")
        searched = second.sources[0].raw_input["message"]
        assert "centrifugal pump" in searched and "impeller" in searched
        assert Path(second.source_nodes[0].node.metadata["source"]).name == "pump_manual.md"
    finally:
        wb.chat_reset(session)


def test_engines_cite_a_passage_held_by_two_sites_once(wb) -> None:
    sites = [f"t-li-shared-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    doc = {"source": "shared/marrowleaf.md", "title": "Marrowleaf",
           "text": "Marrowleaf tea is steeped for seven minutes in water just below boiling."}
    for site_id in sites:
        wb.ingest_texts([doc], site_id=site_id)
    try:
        response = wb.as_query_engine(k=6).query("How long is marrowleaf tea steeped?")
        passages = [(n.node.metadata["source"], n.node.get_content()) for n in response.source_nodes]
        assert len(passages) == len(set(passages)) and passages[0][0] == "shared/marrowleaf.md"
        assert sorted(response.source_nodes[0].node.metadata["sites"]) == sorted(sites)
        assert [n.node.metadata["ref"] for n in response.source_nodes] == list(range(1, len(passages) + 1))
        assert f"shared/marrowleaf.md (sites: {', '.join(response.metadata['sources'][0]['sites'])})" in \
            response.metadata["rendered"]
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = ANY(%s)", (sites,))
