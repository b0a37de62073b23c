"""CONTEXT blocks under a byte budget, and the one-string context of the workflow-service spec (n8n)."""

from __future__ import annotations

import logging
import re
from typing import Sequence

from rag_core.chat import sessions
from rag_core.errors import InvalidInput
from rag_core.limits import MAX_MESSAGE_CHARS, check_text_length
from rag_core.providers.calibration import chat_floor
from rag_core.security.ids import check_id
from rag_core.security.text import check_storable
from rag_core.ingest.handle import Store
from rag_core.search.hybrid import fusion_for, term_coverage
from rag_core.search.query import PreparedQuery
from rag_core.search.retrieval import retrieve_chunks
from rag_core.search.types import ChunkHit
from rag_core.textproc import cjk_bigrams

log = logging.getLogger(__name__)

BLOCK_SEPARATOR = "\n\n"
CONVERSATION_HEADER = "--- Recent conversation ---"
# A source whose similarity is below this share of the best source's is left out of an answer.
SOURCE_RATIO = 0.5
_HIRAGANA = re.compile("[\u3040-\u309F]+")


def content_terms(query: str) -> str:
    """The query as its coverage is judged: a Japanese one as its character bigrams without the hiragana-only ones.

    English and Russian lose their stop words to the text-search configs; a Japanese question's
    bigrams of hiragana alone are its particles and endings ("のは", "です", "すか"), which no
    passage that answers it repeats, so they are left out the same way.
    """
    kept = [b for b in cjk_bigrams(query).split() if not _HIRAGANA.fullmatch(b)]
    return " ".join(kept) or query


def reference_block(n: int, source: str, text: str) -> str:
    """The web-knowledge spec's block, in English: `--- Reference N ---`, `Source: <path or url>`, the chunk text."""
    return f"--- Reference {n} ---\nSource: {source}\n{text.strip()}"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def within_budget(hits: Sequence[ChunkHit], budget_bytes: int) -> list[ChunkHit]:
    """The hits whose blocks fit the budget (UTF-8 bytes), best first, whole chunks only.

    A chunk that does not fit is left out and the next, smaller one may still enter; a chunk is
    never cut, so every cited passage is exactly what the store holds.
    """
    chosen: list[ChunkHit] = []
    used = 0
    for hit in hits:
        n = len(chosen) + 1
        cost = _size(reference_block(n, hit.source, hit.text)) + (_size(BLOCK_SEPARATOR) if chosen else 0)
        if used + cost > budget_bytes:
            continue
        chosen.append(hit)
        used += cost
    return chosen


def format_references(hits: Sequence[ChunkHit]) -> str:
    """The CONTEXT string: numbered reference blocks, or '' when there are none (the web-knowledge spec)."""
    return BLOCK_SEPARATOR.join(reference_block(n, h.source, h.text) for n, h in enumerate(hits, 1))


def relevant_hits(hits: Sequence[ChunkHit], floor: float, coverage: dict[int, float] | None = None,
                  min_coverage: float = 0.0) -> list[ChunkHit]:
    """Hits at or above the similarity floor, or holding `min_coverage` of the question's words.

    The cosine floor alone was tuned where the embedder is strong (Japanese): for English help
    questions use-multilingual scores the right passage at 0.1-0.3, so half of them lost every
    source. Literal coverage of the question's words tells those passages from unrelated ones.
    """
    coverage = coverage or {}
    return [h for h in hits if h.similarity >= floor
            or (min_coverage > 0 and coverage.get(h.chunk_id, 0.0) >= min_coverage)]


def trusted_order(hits: Sequence[ChunkHit], ratio: float = SOURCE_RATIO) -> list[ChunkHit]:
    """The hits by similarity, most similar first, without those far below the best one.

    Readers see the similarity beside each source: a list numbered otherwise reads as wrong, and a
    passage at a fraction of the best one's similarity (a benchmark table under a how-to answer)
    is noise that costs their trust.
    """
    ordered = sorted(hits, key=lambda h: -h.similarity)
    if not ordered:
        return []
    best = ordered[0].similarity
    return [h for h in ordered if h.similarity >= ratio * best]


def passage_key(hit: ChunkHit) -> tuple[str, str]:
    """What makes two hits one passage: the same text of the same source (a file ingested into two sites)."""
    return hit.source, hit.text


def distinct_passages(hits: Sequence[ChunkHit], limit: int | None = None
                      ) -> tuple[list[ChunkHit], dict[int, list[str]]]:
    """The hits without repeats of one passage, best first (at most `limit`), and the sites holding each kept hit.

    A chat over every site found the same file ingested into two sites twice: the reader saw one passage
    as sources [1] and [2], and the repeat took the place of another passage in the context.
    """
    kept: list[ChunkHit] = []
    first: dict[tuple[str, str], int] = {}
    sites: dict[int, list[str]] = {}
    for hit in hits:
        key = passage_key(hit)
        if key in first:
            held = sites[first[key]]
            if hit.site_id not in held:
                held.append(hit.site_id)
        elif limit is None or len(kept) < limit:
            first[key] = hit.chunk_id
            sites[hit.chunk_id] = [hit.site_id]
            kept.append(hit)
    return kept, sites


def with_repeats(hits: Sequence[ChunkHit], k: int) -> list[ChunkHit]:
    """The hits of the first k distinct passages, their repeats in other sites kept (they name those sites)."""
    kept, _ = distinct_passages(hits, k)
    keys = {passage_key(h) for h in kept}
    return [h for h in hits if passage_key(h) in keys]


def top_chunks(store: Store, query: str | PreparedQuery, *, k: int = 5, site_id: str | None = None) -> list[ChunkHit]:
    """Top-k chunks for chat's steps and the workflow context: `retrieve_chunks`, the path of Workbench.retrieve,
    with the store's measured fusion (the one the Workbench gives SearchEngine.retrieve)."""
    store.require_compatible()
    return retrieve_chunks(store.reads, store.embedder, query, k=k, site_id=site_id,
                           fusion=fusion_for(store.embedder_name))


def chunk_coverage(store: Store, query: str, hits: Sequence[ChunkHit]) -> dict[int, float]:
    """The share of the query's content words each hit holds (only when the setting asks for it)."""
    if store.settings.chat_term_coverage <= 0:
        return {}
    return term_coverage(store.reads, content_terms(query), hits)


def grounded_hits(store: Store, query: str, hits: Sequence[ChunkHit], ratio: float = SOURCE_RATIO) -> list[ChunkHit]:
    """The hits a workflow's model may read (retrieve_context), most similar first, within the context byte budget.

    `ratio` leaves out hits below that share of the best one's similarity (0 keeps them all).
    """
    settings = store.settings
    floor = chat_floor(settings)  # per embedder: their cosines spread differently
    coverage = chunk_coverage(store, query, hits) if any(h.similarity < floor for h in hits) else {}
    kept = relevant_hits(hits, floor, coverage, settings.chat_term_coverage)
    return within_budget(trusted_order(kept, ratio), settings.chat_context_bytes)


def history_limit(configured: int) -> int:
    """The workflow-service spec asks for the last 5 to 10 messages: RAG_CHAT_HISTORY_MESSAGES is clamped to it."""
    return max(5, min(10, configured))


def format_conversation(messages: Sequence[dict], user_label: str = "User", ai_label: str = "AI") -> str:
    lines = [CONVERSATION_HEADER]
    for m in messages:
        who = user_label if m["role"] == "user" else ai_label if m["role"] == "assistant" else "System"
        lines.append(f"{who}: {m['content'].strip()}")
    return "\n".join(lines)


def retrieve_context(store: Store, user_id: str, site_id: str, query: str, *, k: int = 5) -> str:
    """The site's relevant knowledge and this user's recent messages there, as one formatted string."""
    if not site_id or not site_id.strip():
        raise InvalidInput("site_id is empty; give the site whose knowledge to search.")
    if not user_id or not user_id.strip():
        raise InvalidInput("user_id is empty; give the user whose conversation to include.")
    check_id(site_id, "site_id")
    check_id(user_id, "user_id")
    check_text_length(query, MAX_MESSAGE_CHARS, "query")  # it gets embedded: a 10 MB query took 23 GB
    check_storable(query, "query")
    parts: list[str] = []
    if query and query.strip():
        try:
            hits = top_chunks(store, query.strip(), k=k, site_id=site_id)
        except Exception:  # the web-knowledge spec: a failed search leaves the knowledge part out, the rest goes on
            log.exception("Retrieval failed for retrieve_context(site_id=%s)", site_id)
            hits = []
        # An external workflow's model reads every reference above the floor; no reader sees this as a list.
        chosen = grounded_hits(store, query.strip(), hits, ratio=0.0)
        if chosen:
            parts.append(format_references(chosen))
    recent = sessions.recent_messages(store.db, user_id=user_id, site_id=site_id,
                                      limit=history_limit(store.settings.chat_history_messages))
    if recent:
        parts.append(format_conversation(recent))
    return BLOCK_SEPARATOR.join(parts)
