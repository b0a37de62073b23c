"""Notebook 04 / bench_peers: every system gets the same chunks and vectors."""

from __future__ import annotations

import pandas as pd

from rag_core.bench.peers import bm25_tokens, compare_peers, fold_to_documents, with_ratios


def test_chunks_fold_into_documents_in_order_without_repeats():
    assert fold_to_documents(["a", "b", "a", "c", "b", "d"], depth=3) == ["a", "b", "c"]


def test_ratios_are_relative_to_our_hybrid_search():
    table = pd.DataFrame([
        {"system": "ours (hybrid)", "hit@5": 0.8, "ndcg@10": 0.5, "p50 ms": 10.0, "p95 ms": 20.0, "ingest s": 2.0, "disk MB": 4.0},
        {"system": "peer", "hit@5": 0.4, "ndcg@10": 0.5, "p50 ms": 5.0, "p95 ms": 40.0, "ingest s": 1.0, "disk MB": 8.0},
    ])
    peer = with_ratios(table).set_index("system").loc["peer"]
    assert peer["hit@5 / ours"] == 0.5 and peer["p95 ms / ours"] == 2.0 and peer["disk MB / ours"] == 2.0


def test_japanese_is_tokenized_into_bigrams_that_match_a_query():
    tokens = bm25_tokens(["梅雨は雨季の一種"], "ja")
    assert "梅雨" in tokens.vocab and "雨季" in tokens.vocab


def test_same_vectors_give_the_same_semantic_ranking_in_every_vector_store(wb, tiny_scifact):
    with wb.db.connection() as conn:
        dbs_before = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
    table = compare_peers(wb, tiny_scifact, log=None).set_index("system")
    assert set(table.index) == {"ours (hybrid)", "ours (fulltext)", "ours (semantic)",
                                "LlamaIndex VectorStoreIndex (in memory)", "ChromaDB (persistent)", "bm25s"}
    assert (table["queries"] == 3).all()
    # our pgvector store, LlamaIndex and Chroma rank the same vectors: the same documents come back
    for peer in ("LlamaIndex VectorStoreIndex (in memory)", "ChromaDB (persistent)"):
        assert table.loc[peer, "ndcg@10"] == table.loc["ours (semantic)", "ndcg@10"]
    assert table.loc["ours (hybrid)", "hit@5 / ours"] == 1.0
    assert (table["disk MB"] > 0).all() and (table["ingest s"] > 0).all()
    with wb.db.connection() as conn:   # our side's own database is dropped afterwards
        assert {r[0] for r in conn.execute("SELECT datname FROM pg_database")} == dbs_before
