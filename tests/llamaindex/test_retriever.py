"""Workbench.as_retriever: LlamaIndex nodes with offsets, SOURCE relationships, metadata and filters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from llama_index.core.schema import NodeRelationship, TextNode
from llama_index.core.vector_stores.types import FilterCondition, MetadataFilter, MetadataFilters

from rag_core.errors import InvalidQuery


def test_nodes_carry_offsets_source_and_metadata(wb, corpus) -> None:
    site, root = corpus
    results = wb.as_retriever(k=3, site_id=site).retrieve("when was the pump impeller replaced?")
    assert 1 <= len(results) <= 3
    top = results[0]
    assert isinstance(top.node, TextNode)
    assert Path(top.node.metadata["source"]).name == "pump_log.txt"
    assert top.score == pytest.approx(top.node.metadata["score"]) and top.score > 0
    meta = top.node.metadata
    assert meta["site"] == site and meta["title"] and meta["language"] == "en" and meta["file_type"] == "txt"
    assert 0.0 <= meta["similarity"] <= 1.0
    assert meta["dense_rank"] is not None or meta["fulltext_rank"] is not None
    # The offsets point at the chunk inside the stored document.
    with wb.db.connection() as conn:
        content = conn.execute("SELECT content FROM documents WHERE id = %s", (meta["document_id"],)).fetchone()[0]
    assert content[top.node.start_char_idx:top.node.end_char_idx] == top.node.text
    source = top.node.relationships[NodeRelationship.SOURCE]
    assert source.node_id == meta["source"] and top.node.ref_doc_id == meta["source"]
    # What a language model sees: the text with source and title, not the scores.
    llm_view = top.node.get_content(metadata_mode="llm")
    assert "pump_log.txt" in llm_view and "fulltext_rank" not in llm_view


def test_modes_rank_differently_and_reject_unknown(wb, corpus) -> None:
    site, _ = corpus
    fulltext = wb.as_retriever(mode="fulltext", k=4, site_id=site).retrieve("paid holiday")
    assert Path(fulltext[0].node.metadata["source"]).name == "holidays.md"
    assert fulltext[0].node.metadata["dense_rank"] is None
    semantic = wb.as_retriever(mode="semantic", k=4, site_id=site).retrieve("paid holiday")
    assert semantic[0].node.metadata["fulltext_rank"] is None and len(semantic) == 4
    with pytest.raises(InvalidQuery, match="hybrid, semantic, fulltext"):
        wb.as_retriever(mode="bm25")


def test_metadata_filters_map_onto_types_dates_source_and_site(wb, corpus) -> None:
    site, root = corpus

    def names(filters: MetadataFilters, **kw) -> set[str]:
        nodes = wb.as_retriever(k=10, filters=filters, **kw).retrieve("pump holiday budget")
        return {Path(n.node.metadata["source"]).name for n in nodes}

    md = MetadataFilters(filters=[MetadataFilter(key="file_type", value="md")])
    assert names(md, site_id=site) == {"pump_manual.md", "holidays.md"}
    dated = MetadataFilters(filters=[MetadataFilter(key="doc_date", value="2024-01-01", operator=">="),
                                     MetadataFilter(key="doc_date", value="2024-02-10", operator="<=")])
    assert names(dated, site_id=site) == {"pump_manual.md", "pump_log.txt"}
    by_source = MetadataFilters(filters=[MetadataFilter(key="source", value=str(root / "hr")),
                                         MetadataFilter(key="site", value=site)])
    assert names(by_source) == {"holidays.md", "budget.csv"}
    several = MetadataFilters(filters=[MetadataFilter(key="file_type", value=["csv", "txt"], operator="in")])
    assert names(several, site_id=site) == {"pump_log.txt", "budget.csv"}


@pytest.mark.parametrize("filters, message", [
    (MetadataFilters(filters=[MetadataFilter(key="author", value="x")]), "filter on 'author'"),
    (MetadataFilters(filters=[MetadataFilter(key="file_type", value="md")], condition=FilterCondition.OR),
     "condition 'or'"),
    (MetadataFilters(filters=[MetadataFilter(key="file_type", value="md", operator="!=")]), "operator '!='"),
    (MetadataFilters(filters=[MetadataFilter(key="file_type", value="exe")]), "Unknown document type 'exe'"),
    (MetadataFilters(filters=[MetadataFilter(key="doc_date", value="yesterday", operator=">=")]), "YYYY-MM-DD"),
])
def test_an_unsupported_filter_is_a_clear_error(wb, filters, message) -> None:
    with pytest.raises(InvalidQuery, match=message) as err:
        wb.as_retriever(filters=filters)
    assert err.value.code == "INVALID_QUERY"


def test_aretrieve_works_inside_a_running_event_loop(wb, corpus) -> None:
    site, _ = corpus
    retriever = wb.as_retriever(k=2, site_id=site)

    async def both() -> list:
        return await asyncio.gather(retriever.aretrieve("pump impeller"), retriever.aretrieve("paid holiday"))

    pumps, holidays = asyncio.run(both())
    assert Path(pumps[0].node.metadata["source"]).name.startswith("pump")
    assert Path(holidays[0].node.metadata["source"]).name == "holidays.md"
