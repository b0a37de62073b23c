"""Suggestions from real data only: earlier queries of the same site that share a term with this
one (query_log), then informative words that recur across the top hits. Nothing is invented."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Callable, Sequence

from rag_core.textproc import FTS_CONFIG

MAX_SUGGESTIONS = 3
LOG_WINDOW = 1000  # recent searches of a site that suggestions are drawn from
_WORD = re.compile(r"[^\W\d_][\w'-]{2,}", re.UNICODE)
_CJK_TERM = re.compile(r"[\u30A0-\u30FF\u30FC]{3,}|[\u3400-\u4DBF\u4E00-\u9FFF]{2,}")


def _site_clause(site_id: str | None) -> str:
    return "site_id = %(site)s" if site_id is not None else "site_id IS NULL"


def _nothing() -> list[str]:
    return []


def from_query_log(conn: Any, query: str, site_id: str | None, terms: Sequence[str],
                   limit: int) -> Callable[[], list[str]]:
    """Earlier successful queries of the same site sharing at least one of this query's rare terms.

    Sends the statement now; the returned function collects the queries (several statements
    started in `conn.pipeline()` share one round trip).
    """
    if not terms or limit <= 0:
        return _nothing
    # The site's recent successful searches only: bounded work however long the log grows.
    cursor = conn.execute(
        f"""
        WITH recent AS (
            SELECT query, params, created_at FROM query_log
            WHERE {_site_clause(site_id)} AND error_code IS NULL AND result_count > 0
            ORDER BY created_at DESC LIMIT %(window)s
        )
        SELECT min(query) AS q, count(*) AS n, max(created_at) AS last
        FROM recent
        WHERE params -> 'terms' ?| %(terms)s AND lower(query) <> lower(%(query)s)
        GROUP BY lower(query)
        ORDER BY n DESC, last DESC
        LIMIT %(limit)s
        """,
        {"site": site_id, "terms": list(terms), "query": query, "limit": limit, "window": LOG_WINDOW},
    )
    return lambda: [r[0] for r in cursor.fetchall()]


def from_top_hits(conn: Any, query: str, hits: Sequence[tuple[str | None, str]], site_id: str | None,
                  limit: int) -> Callable[[], list[str]]:
    """Words that recur in at least two of the top hits, are not in the query and are informative.

    hits: (language, text) of each top document's best chunk. Sends the statement now, like
    from_query_log; the returned function collects the suggestions.
    """
    if limit <= 0 or len(hits) < 2:
        return _nothing
    per_word_docs: dict[tuple[str, str], set[int]] = defaultdict(set)
    counts: Counter = Counter()
    surface: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for i, (lang, text) in enumerate(hits):
        cfg = FTS_CONFIG.get(lang or "other", "simple")
        found = _CJK_TERM.findall(text) if lang == "ja" else _WORD.findall(text)
        for word in found:
            key = (cfg, word.lower())
            per_word_docs[key].add(i)
            counts[key] += 1
            surface[key][word] += 1
    candidates = [k for k, docs in per_word_docs.items() if len(docs) >= 2]
    if not candidates:
        return _nothing
    candidates = sorted(candidates, key=lambda k: (-len(per_word_docs[k]), -counts[k], k))[:200]
    cursor = conn.execute(
        f"""
        WITH w AS (
            SELECT x.ord, x.cfg, x.word, (tsvector_to_array(to_tsvector(x.cfg::regconfig, x.word)))[1] AS lex
            FROM unnest(%(cfgs)s::text[], %(words)s::text[]) WITH ORDINALITY AS x(cfg, word, ord)
        ),
        q AS (
            SELECT DISTINCT l.lex FROM unnest(%(qcfgs)s::text[]) AS c(cfg)
            CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(c.cfg::regconfig, %(query)s))) AS l(lex)
        ),
        n AS (SELECT greatest(coalesce(sum(n_chunks), 0), 1)::float8 AS n FROM corpus_stats WHERE {_site_clause_stats(site_id)})
        SELECT w.ord, w.lex, coalesce((SELECT sum(df) FROM term_stats t WHERE t.lexeme = w.lex AND
                                        {_site_clause_stats(site_id, 't')}), 0)::float8 / n.n AS share
        FROM w CROSS JOIN n
        WHERE w.lex IS NOT NULL AND w.lex NOT IN (SELECT lex FROM q)
        """,
        {"cfgs": [k[0] for k in candidates], "words": [k[1] for k in candidates],
         "qcfgs": sorted({k[0] for k in candidates}), "query": query, "site": site_id},
    )
    return lambda: _informative(cursor.fetchall(), candidates, per_word_docs, counts, surface, query, limit)


def _informative(rows: list[tuple], candidates: list[tuple[str, str]], per_word_docs: dict, counts: Counter,
                 surface: dict, query: str, limit: int) -> list[str]:
    chosen: list[str] = []
    seen_lex: set[str] = set()
    # Informative: present in the top hits yet not in most of the site (share of chunks below half).
    scored = []
    for ordinal, lex, share in rows:
        key = candidates[ordinal - 1]
        if lex in seen_lex or share >= 0.5 or key[1] in query.lower():
            continue
        seen_lex.add(lex)
        scored.append((-len(per_word_docs[key]), share, -counts[key], surface[key].most_common(1)[0][0]))
    base = query if len(query) <= 60 else ""
    for _, _, _, word in sorted(scored)[:limit]:
        chosen.append(f"{base} {word}".strip())
    return chosen


def _site_clause_stats(site_id: str | None, alias: str = "") -> str:
    col = f"{alias}.site_id" if alias else "site_id"
    return f"{col} = %(site)s" if site_id is not None else f"{col} NOT LIKE 'eval:%%'"


def start_suggestions(conn: Any, query: str, site_id: str | None, terms: Sequence[str],
                      hits: Sequence[tuple[str | None, str]]) -> Callable[[], list[str]]:
    """Send the query-log statement now (it shares a pipeline's round trip); the returned function gives up
    to three suggestions: the query log first, then, only when it has fewer, recurring words of the top hits."""
    logged = from_query_log(conn, query, site_id, terms, MAX_SUGGESTIONS)

    def finish() -> list[str]:
        found = logged()
        if len(found) < MAX_SUGGESTIONS:
            for s in from_top_hits(conn, query, hits, site_id, MAX_SUGGESTIONS)():
                if len(found) >= MAX_SUGGESTIONS:
                    break
                if s.lower() not in {f.lower() for f in found} and s.lower() != query.lower():
                    found.append(s)
        return found[:MAX_SUGGESTIONS]

    return finish


def suggest(conn: Any, query: str, site_id: str | None, terms: Sequence[str],
            hits: Sequence[tuple[str | None, str]]) -> list[str]:
    """Up to three suggestions: the query log first, then recurring words of the top hits."""
    return start_suggestions(conn, query, site_id, terms, hits)()
