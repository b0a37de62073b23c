"""A hybrid search in two statements: the full text ranked while the query is embedded, then the dense
ranking and the fusion with the full-text candidates passed in. Same results as the one statement that did
both, and an unfiltered search planned once per connection."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

import psycopg
import pytest
from pgvector.psycopg import register_vector

from rag_core.search import hybrid
from rag_core.search.fusion import fusion_for
from rag_core.search.planner import plan_search
from rag_core.search.query import PreparedQuery
from rag_core.search.retrieval import prepare_query
from rag_core.search.sql import Scope, build_statement, number_array, statement_params
from rag_core.search.validation import validate_search

QUERIES = ["fire alarm systems", "automatic doors evacuation", "пожарной сигнализации", "富士山の標高",
           "budget for the school", "梅雨の時期"]


class OneConnection:
    """The reads of a search on one connection the test holds (to look at what was prepared on it)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @contextmanager
    def connection(self) -> Iterator[Any]:
        yield self.conn


def _single_statement(wb, text: str, site: str, output: str, filters: dict[str, Any]) -> list[tuple]:
    """Rows of the one statement that ranked the full text, the vectors and their fusion together."""
    q = prepare_query(wb.embedder, text)
    scope = Scope(site, tuple(filters.get("types", ())), source=filters.get("source"))
    fusion = fusion_for(wb.store.embedder_name)
    fusion = replace(fusion, candidates=max(fusion.candidates, 30 if output == "documents" else 20))
    with wb.reads.connection() as conn:
        _, languages, _, order, *_ = plan_search(conn, scope, "hybrid", fusion)
        configs, texts = q.configs(languages)
        params = statement_params(scope, fusion, configs, texts, q.vector)
        if output == "documents":
            params.update({"offset": 0, "limit": 10, "max_chunks": 3, "prove": min(fusion.candidates, 10)})
        else:
            params.update({"k": 10, "prove": 10})
        return hybrid._run_ranked(conn, build_statement("hybrid", fusion, scope, order, output), params, fusion, "hybrid")


@pytest.mark.parametrize("filters", [{}, {"source": "en/"}, {"types": ["txt"]}])
def test_the_split_hybrid_search_ranks_like_the_single_statement(wb, corpus_site: str, filters: dict) -> None:
    fusion = fusion_for(wb.store.embedder_name)
    for text in QUERIES:
        req = validate_search(text, site_id=corpus_site, **filters)
        split = hybrid.rank_documents(wb.reads, prepare_query(wb.embedder, text), None, req, fusion)
        single = hybrid._documents_from_rows(_single_statement(wb, text, corpus_site, "documents", filters), [], "")
        # Scores equal to the last bit: the candidates' BM25 scores reach the second statement exactly.
        view = [(d.document_id, d.score, [(c.chunk_id, c.score, c.similarity) for c in d.chunks])
                for d in split.documents]
        assert view == [(d.document_id, d.score, [(c.chunk_id, c.score, c.similarity) for c in d.chunks])
                        for d in single.documents], text
        assert (split.total, split.terms, split.lexemes, split.document_types) == \
            (single.total, single.terms, single.lexemes, single.document_types), text
        hits = hybrid.rank_chunks(wb.reads, prepare_query(wb.embedder, text), None, k=10, site_id=corpus_site, fusion=fusion,
                                    types=filters.get("types", ()), source=filters.get("source"))
        rows = _single_statement(wb, text, corpus_site, "chunks", filters)
        assert [(h.chunk_id, h.score) for h in hits] == [(r[0], float(r[12])) for r in rows], text


def test_a_number_array_reads_back_as_the_same_numbers(wb) -> None:
    floats = [0.1, 1 / 3, 2.5e-300, 5e-324, 1.7976931348623157e308, -0.0, 12.345678901234567, 3.0]
    ints = [0, 1, -7, 2**63 - 1, -(2**63)]
    with wb.db.connection() as conn:
        got_floats, got_ints = conn.execute("SELECT %s::float8[], %s::bigint[]",
                                            (number_array(floats), number_array(ints))).fetchone()
    assert [x.hex() for x in got_floats] == [x.hex() for x in floats]
    assert got_ints == ints
    assert number_array([]) == "{}"


def test_a_hybrid_search_ranks_its_full_text_while_the_query_is_embedded(wb, corpus_site: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedding waits for the full-text statement to have run: a search that embedded first would
    leave it waiting until its timeout. The search's own thread embeds (the vector is what the rest waits for);
    a helper runs the statements that need no vector."""
    ranked = threading.Event()
    statement_threads: list[str] = []
    real_execute = hybrid._execute

    def execute(conn: Any, sql: str, params: dict[str, Any], generic: bool, **kw: Any) -> list[tuple]:
        rows = real_execute(conn, sql, params, generic, **kw)
        statement_threads.append(threading.current_thread().name)
        if "ft_scores" not in sql:  # the full-text statement (the second one takes its candidates)
            ranked.set()
        return rows

    monkeypatch.setattr(hybrid, "_execute", execute)
    seen: list[tuple[bool, str]] = []

    def embed(text: str):
        seen.append((ranked.wait(timeout=10), threading.current_thread().name))
        return wb.embedder.get_query_embedding(text)

    response = wb.search_engine.search(PreparedQuery("fire alarm systems", embed), site_id=corpus_site,
                                       use_cache=False)
    assert response["results"][0]["file_path"] == "en/fire.md"
    assert len(seen) == 1 and seen[0][0], "the query was embedded before its full text was ranked"
    assert seen[0][1] == threading.current_thread().name
    assert len(statement_threads) == 2 and statement_threads[0].startswith("rag-search-front")
    assert statement_threads[1] == threading.current_thread().name


def test_a_search_whose_helpers_are_all_busy_runs_its_statements_itself(wb, corpus_site: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A search never waits for another search's helper: with every helper taken, it embeds, then ranks on its own
    thread, and finds what it would have found."""
    release = threading.Event()
    busy = [hybrid._FRONTS.submit(release.wait, 10) for _ in range(hybrid._FRONTS._max_workers)]
    try:
        threads: list[str] = []
        real_execute = hybrid._execute

        def execute(conn: Any, sql: str, params: dict[str, Any], generic: bool, **kw: Any) -> list[tuple]:
            threads.append(threading.current_thread().name)
            return real_execute(conn, sql, params, generic, **kw)

        monkeypatch.setattr(hybrid, "_execute", execute)
        response = wb.search_engine.search(PreparedQuery("fire alarm systems", wb.embedder.get_query_embedding),
                                           site_id=corpus_site, use_cache=False)
        assert response["results"][0]["file_path"] == "en/fire.md"
        assert threads == [threading.current_thread().name] * 2
    finally:
        release.set()
        for f in busy:
            f.result()


def test_a_failed_embedding_waits_for_the_helper_before_the_connection_goes_back(wb, corpus_site: str) -> None:
    """The helper still holds the search's connection when the embedding fails: the error reaches the caller only
    once the helper is done, so the pool never lends a connection that is in use."""
    started = threading.Event()
    real = hybrid._plan_and_rank_text
    done: list[bool] = []

    def slow_front(*args: Any) -> Any:
        started.set()
        out = real(*args)
        done.append(True)
        return out

    def failing_embed(text: str):
        started.wait(timeout=10)
        raise RuntimeError("embedder down")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hybrid, "_plan_and_rank_text", slow_front)
        with pytest.raises(RuntimeError, match="embedder down"):
            wb.search_engine.search(PreparedQuery("fire alarm systems", failing_embed), site_id=corpus_site,
                                    use_cache=False)
    assert done == [True]
    assert wb.search_engine.search("fire alarm systems", site_id=corpus_site, use_cache=False)["results"]


def test_an_unfiltered_search_is_planned_once_per_connection_a_filtered_one_each_time(wb, corpus_site: str) -> None:
    fusion = fusion_for(wb.store.embedder_name)
    # A connection of its own: psycopg notices only the first DEALLOCATE ALL a connection runs, so a pooled one
    # would go back believing in statements the server dropped.
    with psycopg.connect(wb.db.url) as conn:
        register_vector(conn)
        conn.execute("DEALLOCATE ALL")
        one = OneConnection(conn)
        for text in QUERIES[:4]:
            hybrid.rank_documents(one, prepare_query(wb.embedder, text), None,
                                    validate_search(text, site_id=corpus_site), fusion)
        plans = conn.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements").fetchall()
        ranking = [(g, c) for s, g, c in plans if "postings" in s or "ftr AS" in s]
        assert len(ranking) == 2 and all(g == 4 and c == 0 for g, c in ranking), [(s[:80], g, c) for s, g, c in plans]
        conn.execute("DEALLOCATE ALL")
        for text in QUERIES * 2:  # past psycopg's threshold for preparing a statement by itself
            hybrid.rank_documents(one, prepare_query(wb.embedder, text), None,
                                    validate_search(text, site_id=corpus_site, source="en/"), fusion)
        plans = conn.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements").fetchall()
        assert all(g == 0 for s, g, _ in plans if "postings" in s or "ftr AS" in s), plans


def test_the_last_statement_tells_its_meanwhile_when_its_rows_arrive(wb, corpus_site: str) -> None:
    """Work done while the ranking statement runs stops when its rows arrive: the server is asked to send them
    at once (without that flush request it holds them until the COMMIT, and `answered` never turns true)."""
    seen: dict[str, Any] = {}

    def meanwhile(answered) -> None:
        started = time.monotonic()
        while not answered() and time.monotonic() - started < 10:
            time.sleep(0.001)
        seen["answered"], seen["waited"] = answered(), time.monotonic() - started

    with wb.reads.connection() as conn:
        rows = hybrid._execute(conn, "SELECT pg_sleep(0.05), 7", {}, generic=False, last=True, meanwhile=meanwhile)
        assert conn.info.transaction_status.name == "IDLE"   # committed with the statement
    assert rows[0][1] == 7
    assert seen["answered"] and 0.04 <= seen["waited"] < 5


def test_highlights_marked_while_the_statement_runs_are_the_ones_marked_after_it(
        wb, corpus_site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's chunks marked while the ranking statement ran carry exactly the fragments they would get after it,
    and the suggestions matched meanwhile are the ones matched after it."""
    from rag_core.search import service

    queries = ["fire alarm systems", "пожарной сигнализации", "富士山の標高", "automatic doors evacuation"]
    early_marked: list[int] = []
    real_call = service._EarlyWork.__call__

    def call(self, terms, lexemes, texts, answered):
        real_call(self, terms, lexemes, texts, lambda: False)   # mark them all, whatever the timing
        early_marked.append(len(self.marks))

    monkeypatch.setattr(service._EarlyWork, "__call__", call)
    with_early = [wb.search_engine.search(q, site_id=corpus_site, use_cache=False) for q in queries]
    assert all(n > 0 for n in early_marked) and len(early_marked) == len(queries)

    monkeypatch.setattr(service._EarlyWork, "__call__", lambda self, *a: None)
    without = [wb.search_engine.search(q, site_id=corpus_site, use_cache=False) for q in queries]
    for a, b in zip(with_early, without):
        assert [r["document_id"] for r in a["results"]] == [r["document_id"] for r in b["results"]]
        assert [(r["highlights"], r["highlight_spans"]) for r in a["results"]] == \
            [(r["highlights"], r["highlight_spans"]) for r in b["results"]]
        assert a["suggestions"] == b["suggestions"]
    assert any(r["highlight_spans"] and r["highlight_spans"][0] for resp in with_early for r in resp["results"])


def test_a_process_running_more_searches_than_cores_does_no_work_ahead(wb, corpus_site: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Past one running search per core a search overlaps nothing and marks nothing ahead (that work would only take
    CPU from the other searches): its statements run on its own thread, and it finds the same page."""
    from rag_core.search import service

    text = "fire alarm systems"
    expected = wb.search_engine.search(text, site_id=corpus_site, use_cache=False)
    threads: list[str] = []
    real_execute = hybrid._execute

    def execute(conn: Any, sql: str, params: dict[str, Any], generic: bool, **kw: Any) -> list[tuple]:
        threads.append(threading.current_thread().name)
        assert kw.get("meanwhile") is None
        return real_execute(conn, sql, params, generic, **kw)

    monkeypatch.setattr(hybrid, "_execute", execute)
    monkeypatch.setattr(hybrid, "_CORES", 0)   # this search alone is more than the cores
    monkeypatch.setattr(service._EarlyWork, "__call__", lambda *a: pytest.fail("work ahead while crowded"))
    got = wb.search_engine.search(text, site_id=corpus_site, use_cache=False)
    assert threads == [threading.current_thread().name] * 2
    assert [(r["document_id"], r["highlights"]) for r in got["results"]] == \
        [(r["document_id"], r["highlights"]) for r in expected["results"]]
    assert hybrid._running == 0
