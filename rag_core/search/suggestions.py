"""Suggestions from real data only: earlier queries of the same site that share a term with this
one (query_log), then informative words that recur across the top hits. Nothing is invented.

Neither costs a statement per search. The recent successful searches of a site are read from
query_log at most once per REFRESH_SEC and kept in memory with an index by term; this process's
own searches join them at once (`RecentQueries.note`), so another worker's searches show up within
REFRESH_SEC. The words of the top hits are stemmed and weighed (share of the site's chunks that
hold them) by PostgreSQL once per word: the answers are kept (`HitWords`), the shares until the
store changes or SHARE_TTL_SEC passes.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Collection, Sequence

from rag_core.security.ids import every_site_sql
from rag_core.textproc import FTS_CONFIG

MAX_SUGGESTIONS = 3
LOG_WINDOW = 1000  # recent searches of a site that suggestions are drawn from
REFRESH_SEC = 10.0  # how often a site's window is read again from query_log (other workers' searches)
SHARE_TTL_SEC = 60.0  # how long a word's share of the site's chunks is trusted (another process may ingest)
MAX_WORDS = 100_000  # words remembered with their lexeme and share
_WORD = re.compile(r"[^\W\d_][\w'-]{2,}", re.UNICODE)
_CJK_TERM = re.compile(r"[\u30A0-\u30FF\u30FC]{3,}|[\u3400-\u4DBF\u4E00-\u9FFF]{2,}")


def _site_clause(site_id: str | None) -> str:
    return "site_id = %(site)s" if site_id is not None else "site_id IS NULL"


def _site_clause_stats(site_id: str | None, alias: str = "") -> str:
    col = f"{alias}.site_id" if alias else "site_id"
    return f"{col} = %(site)s" if site_id is not None else every_site_sql(col)


@dataclass
class _Window:
    """One site's recent successful searches: (query, terms, when), newest first, and who has each term."""

    rows: list[tuple[str, frozenset[str], dt.datetime]] = field(default_factory=list)
    by_term: dict[str, list[int]] = field(default_factory=dict)
    loaded_at: float = float("-inf")
    local: list[tuple[str, frozenset[str], dt.datetime]] = field(default_factory=list)
    # This process's searches by term, as positions counted from the first ever noted (local[0] is
    # local_start): matching looks up its terms instead of testing every search of the window.
    local_start: int = 0
    local_by_term: dict[str, list[int]] = field(default_factory=dict)
    local_dropped: int = 0  # positions before local_start still listed in local_by_term
    lock: threading.Lock = field(default_factory=threading.Lock)
    refreshing: threading.Lock = field(default_factory=threading.Lock)


class RecentQueries:
    """The last LOG_WINDOW successful searches of each site, from query_log and from this process."""

    def __init__(self, db: Any, refresh_sec: float = REFRESH_SEC, window: int = LOG_WINDOW) -> None:
        self.db = db
        self.refresh_sec = refresh_sec
        self.window = window
        self._sites: dict[str | None, _Window] = {}
        self._lock = threading.Lock()

    def _site(self, site_id: str | None) -> _Window:
        with self._lock:
            found = self._sites.get(site_id)
            if found is None:
                found = self._sites[site_id] = _Window()
            return found

    def note(self, site_id: str | None, query: str, terms: Sequence[str], when: dt.datetime) -> None:
        """A successful search of this process (its query_log row is on its way)."""
        site = self._site(site_id)
        row = (query, frozenset(terms), when)
        with site.lock:
            position = site.local_start + len(site.local)
            site.local.append(row)
            for term in row[1]:
                site.local_by_term.setdefault(term, []).append(position)
            excess = len(site.local) - self.window
            if excess > 0:
                del site.local[:excess]
                site.local_start += excess
                site.local_dropped += excess
                if site.local_dropped > self.window:
                    _index_local(site)

    def _refresh(self, site_id: str | None, site: _Window) -> None:
        with self.db.connection() as conn:
            rows = conn.execute(
                f"""SELECT query, params -> 'terms', created_at FROM query_log
                    WHERE {_site_clause(site_id)} AND error_code IS NULL AND result_count > 0
                    ORDER BY created_at DESC LIMIT %(window)s""",
                {"site": site_id, "window": self.window},
            ).fetchall()
        loaded = [(q, frozenset(t for t in terms if isinstance(t, str)) if isinstance(terms, list) else frozenset(), when)
                  for q, terms, when in rows]
        by_term: dict[str, list[int]] = defaultdict(list)
        for i, (_, terms, _) in enumerate(loaded):
            for term in terms:
                by_term[term].append(i)
        newest = loaded[0][2] if loaded else None
        with site.lock:
            site.rows, site.by_term = loaded, dict(by_term)
            # Searches noted after the newest row read may still be on their way to the table.
            site.local = [r for r in site.local if newest is None or r[2] > newest]
            _index_local(site)

    def matching(self, site_id: str | None, query: str, terms: Collection[str], limit: int) -> list[str]:
        """Earlier queries of the site sharing at least one of `terms`, most frequent first, then most recent."""
        if not terms or limit <= 0:
            return []
        site = self._site(site_id)
        if time.monotonic() - site.loaded_at > self.refresh_sec:
            # One thread reads the table again; the others go on with what is there (they wait only for the first read).
            if site.refreshing.acquire(blocking=site.loaded_at == float("-inf")):
                try:
                    if time.monotonic() - site.loaded_at > self.refresh_sec:
                        self._refresh(site_id, site)
                        site.loaded_at = time.monotonic()
                finally:
                    site.refreshing.release()
        wanted = frozenset(terms)
        own = query.lower()
        with site.lock:
            start, local = site.local_start, site.local
            found = {p for t in wanted for p in site.local_by_term.get(t, ()) if p >= start}
            own_rows = [local[p - start] for p in sorted(found)]
            keep = max(self.window - len(local), 0)  # the window: the newest rows of both
            rows, by_term = site.rows, site.by_term
        hits = {i for t in wanted for i in by_term.get(t, ()) if i < keep}
        matched = [rows[i] for i in hits] + own_rows
        groups: dict[str, list[Any]] = {}
        for text, _, when in matched:
            key = text.lower()
            if key == own:
                continue
            group = groups.get(key)
            if group is None:
                groups[key] = [text, 1, when]
            else:
                group[0] = min(group[0], text)
                group[1] += 1
                group[2] = max(group[2], when)
        ranked = sorted(groups.values(), key=lambda g: (-g[1], -g[2].timestamp()))
        return [g[0] for g in ranked[:limit]]


def _index_local(site: _Window) -> None:
    """Number a window's own searches from 0 again and list them by term (the caller holds its lock)."""
    by_term: dict[str, list[int]] = defaultdict(list)
    for position, (_, terms, _) in enumerate(site.local):
        for term in terms:
            by_term[term].append(position)
    site.local_start, site.local_by_term, site.local_dropped = 0, dict(by_term), 0


class HitWords:
    """Each word's lexeme under a text-search config (fixed) and its share of a site's chunks (until the
    store changes), asked of PostgreSQL once per word instead of once per search."""

    def __init__(self, db: Any, max_words: int = MAX_WORDS, ttl_sec: float = SHARE_TTL_SEC) -> None:
        self.db = db
        self.max_words = max_words
        self.ttl_sec = ttl_sec
        self._lexemes: OrderedDict[tuple[str, str], str | None] = OrderedDict()
        self._shares: OrderedDict[tuple[str | None, str], tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def clear_shares(self) -> None:
        """Forget the shares (the store changed)."""
        with self._lock:
            self._shares.clear()

    def lookup(self, site_id: str | None, words: Sequence[tuple[str, str]]) -> list[tuple[str | None, float]]:
        """(lexeme or None for a stop word, share of the site's chunks) of each (config, word)."""
        now = time.monotonic()
        found: dict[tuple[str, str], tuple[str | None, float]] = {}
        missing = []
        with self._lock:
            for key in words:
                lex = self._lexemes.get(key, "")
                if lex is None:
                    found[key] = (None, 0.0)
                    continue
                share = self._shares.get((site_id, lex)) if lex else None
                if share is not None and now - share[1] < self.ttl_sec:
                    found[key] = (lex, share[0])
                else:
                    missing.append(key)
        if missing:
            with self.db.connection() as conn:
                rows = conn.execute(
                    f"""
                    WITH w AS (
                        SELECT x.ord, (tsvector_to_array(to_tsvector(x.cfg::regconfig, x.word)))[1] AS lex
                        FROM unnest(%(cfgs)s::text[], %(words)s::text[]) WITH ORDINALITY AS x(cfg, word, ord)
                    ),
                    n AS (SELECT greatest(coalesce(sum(n_chunks), 0), 1)::float8 AS n FROM corpus_stats
                          WHERE {_site_clause_stats(site_id)})
                    SELECT w.ord, w.lex, coalesce((SELECT sum(df) FROM term_stats t WHERE t.lexeme = w.lex AND
                                                    {_site_clause_stats(site_id, 't')}), 0)::float8 / n.n
                    FROM w CROSS JOIN n
                    """,
                    {"cfgs": [k[0] for k in missing], "words": [k[1] for k in missing], "site": site_id},
                ).fetchall()
            with self._lock:
                for ordinal, lex, share in rows:
                    key = missing[ordinal - 1]
                    found[key] = (lex, float(share) if lex else 0.0)
                    self._lexemes[key] = lex
                    if lex:
                        self._shares[(site_id, lex)] = (float(share), now)
                while len(self._lexemes) > self.max_words:
                    self._lexemes.popitem(last=False)
                while len(self._shares) > self.max_words:
                    self._shares.popitem(last=False)
        return [found[key] for key in words]


def from_top_hits(words_cache: HitWords, query: str, query_lexemes: Collection[str],
                  hits: Sequence[tuple[str | None, str]], site_id: str | None, limit: int) -> list[str]:
    """Words that recur in at least two of the top hits, are not in the query and are informative.

    hits: (language, text) of each top document's best chunk; query_lexemes: the query's lexemes.
    """
    if limit <= 0 or len(hits) < 2:
        return []
    # Counted by Counter over whole lists (C loops): a Python loop over the top hits' words was slower
    # (eval/bench_service.py, the suggestions stage).
    keys_of_hit, spelled = [], Counter()
    for lang, text in hits:
        cfg = FTS_CONFIG.get(lang or "other", "simple")
        found = _CJK_TERM.findall(text) if lang == "ja" else _WORD.findall(text)
        keys = list(zip(repeat(cfg), map(str.lower, found)))
        keys_of_hit.append(keys)
        spelled.update(zip(keys, found))
    counts = Counter(chain.from_iterable(keys_of_hit))  # occurrences of each (config, word) in all hits
    in_docs = Counter(chain.from_iterable(map(set, keys_of_hit)))  # hits holding each
    candidates = [k for k, n in in_docs.items() if n >= 2]
    if not candidates:
        return []
    spellings: dict[tuple[str, str], list[tuple[str, int]]] = {}  # in order of first occurrence
    for (key, word), n in spelled.items():
        if in_docs[key] >= 2:
            spellings.setdefault(key, []).append((word, n))
    candidates = sorted(candidates, key=lambda k: (-in_docs[k], -counts[k], k))[:200]
    chosen: list[str] = []
    seen_lex: set[str] = set(query_lexemes)
    lowered = query.lower()
    # Informative: present in the top hits yet not in most of the site (share of chunks below half).
    scored = []
    for key, (lex, share) in zip(candidates, words_cache.lookup(site_id, candidates)):
        if lex is None or lex in seen_lex or share >= 0.5 or key[1] in lowered:
            continue
        seen_lex.add(lex)
        spelling = max(spellings[key], key=itemgetter(1))[0]  # the most frequent, the first on a tie
        scored.append((-in_docs[key], share, -counts[key], spelling))
    base = query if len(query) <= 60 else ""
    for _, _, _, word in sorted(scored)[:limit]:
        chosen.append(f"{base} {word}".strip())
    return chosen


def suggest(recent: RecentQueries, words_cache: HitWords, query: str, site_id: str | None, terms: Sequence[str],
            query_lexemes: Collection[str], hits: Sequence[tuple[str | None, str]],
            recent_found: list[str] | None = None) -> list[str]:
    """Up to three suggestions: the query log first, then, only when it has fewer, recurring words of the top hits.
    `recent_found`: the log's matches for the same terms, when the search already asked (service._EarlyWork)."""
    found = list(recent_found) if recent_found is not None else recent.matching(site_id, query, terms, MAX_SUGGESTIONS)
    if len(found) < MAX_SUGGESTIONS:
        for s in from_top_hits(words_cache, query, query_lexemes, hits, site_id, MAX_SUGGESTIONS):
            if len(found) >= MAX_SUGGESTIONS:
                break
            if s.lower() not in {f.lower() for f in found} and s.lower() != query.lower():
                found.append(s)
    return found[:MAX_SUGGESTIONS]
