"""wb.vector_store: LlamaIndex's VectorStoreIndex over the workbench's own tables."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.vector_stores.types import (
    MetadataFilter, MetadataFilters, VectorStoreQuery, VectorStoreQueryMode,
)

from rag_core.errors import InvalidQuery
from rag_core.llamaindex.vector_store import WorkbenchVectorStore


def _names(result) -> list[str]:
    return [Path(n.metadata["source"]).name for n in result.nodes]


def test_query_modes_and_filters_over_ingested_documents(wb, corpus) -> None:
    site, _ = corpus
    vs = WorkbenchVectorStore(wb.store, site_id=site)
    emb = wb.embedder.get_query_embedding("paid holiday per year")
    dense = vs.query(VectorStoreQuery(query_embedding=emb, similarity_top_k=2))
    assert len(dense.nodes) == 2 and dense.nodes[0].metadata["fulltext_rank"] is None
    assert len(dense.similarities) == len(dense.ids) == 2 and dense.ids[0] == dense.nodes[0].node_id
    text = vs.query(VectorStoreQuery(query_str="impeller", similarity_top_k=5, mode=VectorStoreQueryMode.TEXT_SEARCH))
    assert set(_names(text)) == {"pump_manual.md", "pump_log.txt"}
    sparse = vs.query(VectorStoreQuery(query_str="impeller", sparse_top_k=1, mode=VectorStoreQueryMode.SPARSE))
    assert len(sparse.nodes) == 1
    hybrid = vs.query(VectorStoreQuery(query_str="paid holiday", query_embedding=emb, similarity_top_k=3,
                                       mode=VectorStoreQueryMode.HYBRID))
    assert _names(hybrid)[0] == "holidays.md"
    assert hybrid.nodes[0].metadata["dense_rank"] and hybrid.nodes[0].metadata["fulltext_rank"]
    only_txt = vs.query(VectorStoreQuery(
        query_str="impeller", similarity_top_k=5, mode=VectorStoreQueryMode.HYBRID,
        filters=MetadataFilters(filters=[MetadataFilter(key="file_type", value="txt")])))
    assert _names(only_txt) == ["pump_log.txt"]
    # A query vector of another model (another dimension): the text is embedded with ours instead.
    foreign = vs.query(VectorStoreQuery(query_str="paid holiday", query_embedding=[0.1] * 7, similarity_top_k=1))
    assert _names(foreign) == ["holidays.md"]
    with pytest.raises(InvalidQuery, match="mmr"):
        vs.query(VectorStoreQuery(query_str="x", mode=VectorStoreQueryMode.MMR))


def test_index_insert_query_engine_search_and_delete(wb, site) -> None:
    from rag_core.llamaindex.engines import workbench_llm

    vs = WorkbenchVectorStore(wb.store, site_id=site)
    ref = f"doc-{uuid.uuid4().hex[:6]}"
    doc = Document(text="The lighthouse keeper logs the fog horn tests every Sunday morning.\n\n"
                        "Fog horn maintenance needs a licensed technician.",
                   id_=ref, metadata={"file_path": "/notes/lighthouse.md", "title": "Lighthouse notes", "shift": "b"})
    index = VectorStoreIndex.from_vector_store(vs, embed_model=wb.embedder)
    index.insert(doc)
    # Stored as a document with chunks of our own: `rag search` (Workbench.search) finds it.
    found = wb.search("fog horn", site_id=site)
    assert found["total_results"] == 1 and found["results"][0]["file_path"] == "/notes/lighthouse.md"
    assert found["results"][0]["file_type"] == "md"
    nodes = index.as_retriever(similarity_top_k=1).retrieve("who tests the fog horn?")
    assert nodes[0].node.ref_doc_id == ref and nodes[0].node.metadata["shift"] == "b"
    assert "fog horn" in nodes[0].node.get_content()
    response = index.as_query_engine(llm=workbench_llm(wb.llm)).query("When are the fog horn tests logged?")
    assert "Sunday" in str(response) and response.source_nodes
    index.delete_ref_doc(ref)
    assert wb.documents(site_id=site) == []


def test_from_vector_store_works_without_any_llamaindex_settings(wb, corpus) -> None:
    from llama_index.core import Settings

    site, _ = corpus
    saved = Settings._embed_model, Settings._llm
    Settings._embed_model = Settings._llm = None
    try:
        engine = VectorStoreIndex.from_vector_store(wb.vector_store).as_query_engine(
            filters=MetadataFilters(filters=[MetadataFilter(key="site", value=site)]))
        response = engine.query("How many days of paid holiday do employees get?")
        assert "25 days" in str(response)
        assert Path(response.source_nodes[0].node.metadata["source"]).name == "holidays.md"
        # A program's own choice stays.
        Settings.embed_model = own = wb.embedder.__class__.model_construct()
        wb.vector_store
        assert Settings._embed_model is own
    finally:
        Settings._embed_model, Settings._llm = saved
