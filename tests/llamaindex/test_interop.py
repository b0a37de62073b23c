"""`rag import llamaindex` / `rag export llamaindex` against real PGVectorStore tables made by PGVectorStore."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from typer.testing import CliRunner

from rag_core.cli import app
from rag_core.llamaindex.interop import pg_vector_store
from rag_core.providers.embeddings import embedding_dimension

runner = CliRunner()


def _invoke(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_keeps_vectors_of_the_same_embedder(wb, site, pg_url, table_name, cli_env) -> None:
    dim = embedding_dimension(wb.embedder)
    pg = pg_vector_store(pg_url, table_name, dim, setup=True)
    docs = [Document(text="Glacier melt raises the river level every June.", id_="glacier",
                     metadata={"file_path": "/kb/glacier.txt"}),
            Document(text="The bakery opens at six and sells rye bread.", id_="bakery",
                     metadata={"file_path": "/kb/bakery.md"})]
    VectorStoreIndex.from_documents(docs, storage_context=StorageContext.from_defaults(vector_store=pg),
                                    embed_model=wb.embedder)
    summary = _invoke("import", "llamaindex", "--table", table_name, "--site", site, "--json")
    assert summary == {"table": table_name, "site_id": site, "nodes": 2, "documents": 2, "dimension": dim,
                       "re_embedded": False, "refused": []}
    found = wb.search("when does the river level rise", site_id=site)
    assert found["results"][0]["file_path"] == "/kb/glacier.txt"
    node = wb.as_retriever(site_id=site, k=1).retrieve("rye bread")[0].node
    assert node.ref_doc_id == "bakery" and Path(node.metadata["source"]).name == "bakery.md"
    # The same table again replaces, never doubles.
    _invoke("import", "llamaindex", "--table", table_name, "--site", site, "--json")
    assert wb.status(site_id=site)["documents"] == 2


def test_import_embeds_again_when_the_vectors_are_another_models(wb, site, pg_url, table_name, cli_env) -> None:
    pg = pg_vector_store(pg_url, table_name, 8, setup=True)
    rng = np.random.default_rng(0)
    nodes = [TextNode(text=text, id_=f"n{i}", embedding=rng.normal(size=8).tolist(),
                      relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="manual")},
                      metadata={"title": "Manual"})
             for i, text in enumerate(["Close the valve before cleaning the filter.",
                                       "The filter cartridge lasts three months."])]
    pg.add(nodes)
    summary = _invoke("import", "llamaindex", "--table", table_name, "--site", site, "--json")
    assert summary["re_embedded"] is True and summary["nodes"] == 2 and summary["documents"] == 1
    top = wb.as_retriever(mode="semantic", site_id=site, k=1).retrieve("how long does a filter cartridge last")
    assert "three months" in top[0].node.text and top[0].node.node_id == "n1"


def test_export_writes_a_table_pgvectorstore_reads(wb, corpus, pg_url, table_name, cli_env) -> None:
    site, _ = corpus
    summary = _invoke("export", "llamaindex", "--table", table_name, "--site", site, "--json")
    dim = embedding_dimension(wb.embedder)
    assert summary["nodes"] == 4 and summary["dimension"] == dim
    pg = pg_vector_store(pg_url, table_name, dim)
    result = pg.query(VectorStoreQuery(query_embedding=wb.embedder.get_query_embedding("paid holiday per year"),
                                       similarity_top_k=1))
    node = result.nodes[0]
    assert Path(node.metadata["source"]).name == "holidays.md" and "25 days" in node.get_content()
    assert node.ref_doc_id == node.metadata["source"]


def test_import_of_a_missing_table_says_what_to_check(cli_env) -> None:
    result = runner.invoke(app, ["import", "llamaindex", "--table", "no_such_table"])
    assert result.exit_code == 1 and "no PGVectorStore table 'no_such_table'" in result.output
