"""Every way into the store meets the rules `rag ingest` and REST apply: `rag import llamaindex` (the real CLI),
LlamaIndex's vector store and `ingest_texts`; and a bad `--url` or DATABASE_URL is one line without its password."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from typer.testing import CliRunner

from rag_core.cli import app
from rag_core.errors import InvalidInput
from rag_core.limits import MAX_DOCUMENT_CHARS
from rag_core.llamaindex.interop import pg_vector_store

runner = CliRunner()
BAD_SITES = [" site_b", "", "*", "a b", "site\x1b[31m", "s\u202eb", "x" * 201, "../etc"]


def _node(ref: str, text: str, i: int, **metadata: str) -> TextNode:
    return TextNode(text=text, id_=f"{ref}-{i}", embedding=np.random.default_rng(i).normal(size=8).tolist(),
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=ref)}, metadata=metadata)


def test_import_refuses_bad_sites_and_stores_only_documents_the_rules_allow(wb, site, pg_url, table_name,
                                                                              cli_env) -> None:
    pg = pg_vector_store(pg_url, table_name, 8, setup=True)
    pg.add([_node("good", "The pump is serviced every spring.", 0, file_path="/kb/pump.txt",
                  title="Pump\u202e gpj.exe \x1b[2J\x1b[31mservice"),
            _node("spoof", "Invoices are paid in thirty days.", 1, file_path="/kb/invoice\u202efdp.exe"),
            _node("huge", "word " * (MAX_DOCUMENT_CHARS // 5 + 200_000), 2, file_path="/kb/huge.txt")])
    for bad in BAD_SITES:
        result = runner.invoke(app, ["import", "llamaindex", "--table", table_name, "--site", bad])
        assert result.exit_code == 1, (bad, result.output)
        assert "site_id" in result.output and "is not a valid id" in result.output, result.output
    result = runner.invoke(app, ["import", "llamaindex", "--table", table_name, "--site", "eval:x"])
    assert result.exit_code == 1 and "reserved for the evaluation sets" in " ".join(result.output.split())
    assert not any(s in wb.status()["by_site"] for s in [*BAD_SITES, "eval:x"])

    result = runner.invoke(app, ["import", "llamaindex", "--table", table_name, "--site", site, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    refused = " ".join(summary["refused"])
    assert len(summary["refused"]) == 2, summary["refused"]
    assert "U+202E" in refused and f"the limit is {MAX_DOCUMENT_CHARS}" in refused
    docs = {d["source"]: d for d in wb.documents(site_id=site)}
    assert list(docs) == ["/kb/pump.txt"]
    title = docs["/kb/pump.txt"]["title"]
    assert "\u202e" not in title and "\x1b" not in title and title.startswith("Pump")


def test_the_vector_store_and_ingest_texts_apply_the_same_rules(wb, site) -> None:
    from rag_core.llamaindex.vector_store import WorkbenchVectorStore

    with pytest.raises(InvalidInput, match="site_id ' site_b' is not a valid id"):
        WorkbenchVectorStore(wb.store, site_id=" site_b")
    store = WorkbenchVectorStore(wb.store, site_id=site)
    with pytest.raises(InvalidInput, match="could not be stored") as refused:
        store.add([TextNode(text="x" * (MAX_DOCUMENT_CHARS + 1), id_="big", metadata={"file_path": "/big.txt"}),
                   TextNode(text="The ferry leaves at noon.", id_="ferry",
                            metadata={"file_path": "/ferry.txt", "title": "Ferry\x1b]8;;http://evil\x07"})])
    assert "the limit is 5000000" in str(refused.value)
    docs = wb.documents(site_id=site)
    assert [d["source"] for d in docs] == ["/ferry.txt"] and "\x1b" not in docs[0]["title"]

    with pytest.raises(InvalidInput, match="site_id"):
        wb.ingest_texts([{"source": "a.txt", "text": "fine"}], site_id="*")
    report = wb.ingest_texts([{"source": "b\u202etxt.exe", "text": "spoofed name"},
                              {"source": "big.txt", "text": "y " * (MAX_DOCUMENT_CHARS // 2 + 10)},
                              {"source": "ok.txt", "text": "A fine text.", "title": "Fine\u202e title"}], site_id=site)
    by_source = {o.source: o for o in report.outcomes}
    assert by_source["b\u202etxt.exe"].status == "failed" and "U+202E" in by_source["b\u202etxt.exe"].reason
    assert by_source["big.txt"].status == "failed" and "the limit is 5000000" in by_source["big.txt"].reason
    assert by_source["ok.txt"].status == "indexed"
    stored = {d["source"]: d["title"] for d in wb.documents(site_id=site)}
    assert set(stored) == {"/ferry.txt", "ok.txt"} and "\u202e" not in stored["ok.txt"]


# --------------------------------------------------------------------------- URLs


def _rag(args: list[str], env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rag_core.cli", *args], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


def _silent_server() -> socket.socket:
    """A TCP listener that accepts and never answers (an HTTP server waiting for a request it cannot parse)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(server.accept()[0]) for _ in range(8)], daemon=True).start()
    return server


def test_a_bad_url_is_one_line_without_the_password_and_a_silent_server_times_out(pg_url, tmp_path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAG_")},
           "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data"), "RAG_MODELS_DIR": os.environ["RAG_MODELS_DIR"],
           "PYTHONPATH": os.pathsep.join(sys.path)}
    silent = _silent_server()
    urls = {
        "postgresql://u:PASSWORD@[::1/db": "host is malformed",
        "postgresql+psycopg://u:PASSWORD@127.0.0.1:1/db": "Cannot connect to PostgreSQL at 127.0.0.1:1/db",
        "postgresql://u:PASS%zzWORD@localhost/db": "a % not followed by two hex digits",
        "postgresql://u:PASSWORD@localhost:abc/db": "port is not a number",
        f"postgresql://u:PASSWORD@127.0.0.1:{silent.getsockname()[1]}/db": "timeout",
    }
    try:
        for url, expected in urls.items():
            result = _rag(["import", "llamaindex", "--table", "t", "--url", url], env, tmp_path)
            output = result.stdout + result.stderr
            assert result.returncode == 1, (url, output)
            assert "Traceback" not in output and "PASSWORD" not in output and "PASS%zz" not in output, output
            assert expected in " ".join(output.split()), (url, output)
    finally:
        silent.close()
    result = _rag(["status"], {**env, "DATABASE_URL": "postgresql://u:PASSWORD@localhost:abc/db"}, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output and "PASSWORD" not in output, output
    assert "DATABASE_URL" in output and "port is not a number" in output


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("bad", ["pump\x00", "pump\ud800"])
def test_a_nul_or_lone_surrogate_in_a_filter_or_query_is_invalid_input(wb, corpus, bad) -> None:
    from llama_index.core.vector_stores.types import (
        MetadataFilter, MetadataFilters, VectorStoreQuery, VectorStoreQueryMode,
    )

    from rag_core.llamaindex.vector_store import WorkbenchVectorStore

    site, _ = corpus
    store = WorkbenchVectorStore(wb.store, site_id=site)
    for key in ("source", "file_type", "site_id"):
        query = VectorStoreQuery(query_str="pump impeller", similarity_top_k=3, mode=VectorStoreQueryMode.HYBRID,
                                 filters=MetadataFilters(filters=[MetadataFilter(key=key, value=bad)]))
        with pytest.raises(InvalidInput) as raised:
            WorkbenchVectorStore(wb.store).query(query)
        assert raised.value.code == "INVALID_INPUT" and key in raised.value.message
    for mode in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.HYBRID):
        with pytest.raises(InvalidInput) as raised:
            store.query(VectorStoreQuery(query_str=f"impeller {bad}", similarity_top_k=3, mode=mode))
        assert raised.value.code == "INVALID_INPUT" and "query" in raised.value.message
