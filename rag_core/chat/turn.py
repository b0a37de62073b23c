"""One chat turn (the chat spec): index check, HISTORY, retrieval, CONTEXT under a budget, answer, storage."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from rag_core.chat import instructions, sessions
from rag_core.chat.citations import render_sources, render_turn, sources_frame
from rag_core.chat.context import (chunk_coverage, distinct_passages, format_references, relevant_hits, top_chunks,
                                   with_repeats, within_budget)
from rag_core.chat.grounding import message_language, needs_conversation, supporting_passages
from rag_core.chat.prompts import AnswerRequest, Passage, labels, session_title
from rag_core.ingest.handle import Store
from rag_core.errors import InvalidInput, LLMError, NotFound
from rag_core.limits import MAX_MESSAGE_CHARS, check_text_length
from rag_core.providers.calibration import cosine_scale
from rag_core.security.text import check_storable
from rag_core.search.hybrid import term_coverage
from rag_core.search.query import PreparedQuery
from rag_core.search.retrieval import (
    chunk_similarities, cited_neighbours, embed_passages, embed_query, is_indexed, prepare_query,
)
from rag_core.search.types import ChunkHit, Citation

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.chat.llms import LLM


log = logging.getLogger(__name__)

MAX_K = 50
# How much closer (cosine, read on the embedder's calibrated scale) the message's own best passage must be to
# it than the folded search's best passage, with more of its words too, for the message to be taken as a new
# topic: None takes the embedder's measured margin (CosineScale.follow_up_margin; eval/bench_multiturn.py).
FOLLOW_UP_MARGIN: float | None = None
LANGUAGES = ("en", "ru", "ja")
# Passages a turn reads before choosing its sources: an answer in another language than the question,
# or in a table, can rank below the first five chunks.
CANDIDATES = 8
# How many times deeper the search goes when the same passages fill its top k from several sites.
REPEAT_DEPTH = 4


def answer_language(language: str) -> str:
    """A label language the turn can render (en, ru, ja); anything else is bad input."""
    if language not in LANGUAGES:
        raise InvalidInput(f"language is '{language}'; choose one of: {', '.join(LANGUAGES)}.")
    return language


@dataclass
class ChatTurn:
    """The outcome of one turn: the answer, its sources, and what the model was given."""

    session_id: str
    question: str
    answer: str
    sources: list[Citation]
    retrieval_query: str
    context: dict[str, Any]                 # the structured context given to the model (AnswerRequest.to_dict)
    rendered: str                           # the chat spec's text: ## Sources, then ## Answer
    flags: dict[str, bool] = field(default_factory=dict)
    llm: str = ""
    message_ids: list[int] = field(default_factory=list)

    @property
    def stored(self) -> bool:
        return bool(self.flags.get("stored"))

    def to_pandas(self) -> pd.DataFrame:
        """The sources, one row each (n, similarity, title, source, page, offsets, text)."""
        return sources_frame(self.sources)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id, "question": self.question, "answer": self.answer,
            "sources": [s.to_dict() for s in self.sources], "retrieval_query": self.retrieval_query,
            "context": self.context, "rendered": self.rendered, "flags": dict(self.flags), "llm": self.llm,
            "message_ids": list(self.message_ids),
        }


@dataclass
class PreparedTurn:
    """A turn up to the model call: the user's message stored, history read, sources chosen.

    `chat_prepare` hands this to a client that answers with its own model (Claude Code through MCP)
    and stores the answer with `chat_append`; `run_turn` answers it with the configured LLM.
    """

    session_id: str
    question: str
    retrieval_query: str
    sources: list[Citation]
    request: AnswerRequest | None           # None when nothing is indexed
    flags: dict[str, bool] = field(default_factory=dict)
    message_ids: list[int] = field(default_factory=list)
    language: str = "en"
    no_index_answer: str = ""

    def to_dict(self) -> dict[str, Any]:
        """What an external model needs: the prompt pieces, the sources to cite and store, the flags."""
        request = self.request
        return {
            "session_id": self.session_id, "question": self.question, "retrieval_query": self.retrieval_query,
            "sources": [s.to_dict() for s in self.sources],
            "citations": [s.to_citation() for s in self.sources],
            "rendered_sources": render_sources(self.sources, self.language),
            "context": request.to_dict() if request else {},   # history, passages, system_prompt
            "flags": dict(self.flags), "message_ids": list(self.message_ids),
            "hint": self.no_index_answer or None,
        }


def prepare_turn(store: Store, llm: Callable[[], LLM], message: str, *, session_id: str | None = None, k: int = 5,
                 site_id: str | None = None, user_id: str | None = None,
                 resource_name: str | None = None, language: str | None = None) -> PreparedTurn:
    """Steps 1-4 of a turn: index check, HISTORY, the user's message stored, retrieval, CONTEXT."""
    message = (message or "").strip()
    if not message:
        raise InvalidInput("The message is empty; type a question.")
    check_text_length(message, MAX_MESSAGE_CHARS, "message")
    check_storable(message, "message")
    if not 1 <= int(k) <= MAX_K:
        raise InvalidInput(f"k is {k}; choose between 1 and {MAX_K} passages.")
    settings = store.settings
    # The fixed statements follow the user's language unless the caller chose one.
    language = answer_language(language or message_language(message, settings.language))
    # The id is used exactly as given (never stripped): the id whose site is checked is the id written.
    session_id = sessions.check_chat_session_id(session_id) if session_id else sessions.new_session_id()

    # RAG_ENABLED=false keeps the assistant working without the knowledge base: no index check and no
    # retrieval, the model answers from the conversation alone.
    use_documents = settings.enabled

    # 1. Nothing indexed: say how to ingest; no model call and nothing stored.
    if use_documents and not is_indexed(store.reads, site_id):
        words = labels(language)
        return PreparedTurn(session_id=session_id, question=message, retrieval_query="", sources=[], request=None,
                            flags={"no_index": True, "stored": False, "retrieval_failed": False, "no_sources": True},
                            language=language,
                            no_index_answer=words["no_index"].format(where=f" (site '{site_id}')" if site_id else ""))

    instruction = instructions.active_instruction(store.db, site_id or sessions.DEFAULT_SITE, resource_name)
    if resource_name and instruction is None:
        raise NotFound(f"No active instruction '{resource_name}' for site '{site_id or sessions.DEFAULT_SITE}'; "
                       "create it first or leave resource_name out.")

    # 2. The user's message first: its insert checks that the session belongs to this site, so another
    # site's session is refused before anything of it is read. HISTORY is what came before it.
    user_msg = sessions.append_message(store.db, session_id, "user", message, site_id=site_id, user_id=user_id,
                                       title=session_title(message))
    history = sessions.history(store.db, session_id, settings.chat_history_messages, before_id=user_msg["id"])

    # 3. Retrieval through the one core every surface uses; a failure answers without documents.
    # Only a message that cannot be understood alone is searched with the conversation folded in;
    # any other is answered exactly as it would be in a fresh conversation.
    retrieval_failed = False
    retrieval_query, hits = message, []
    follow_up = any(m["role"] == "user" for m in history) and needs_conversation(message)
    depth = max(k, CANDIDATES)
    if use_documents:
        try:
            if follow_up:
                retrieval_query, hits = follow_up_passages(store, llm, message, history, k=depth, site_id=site_id)
            else:
                hits = distinct_passage_hits(store, prepare_query(store.embedder, message), k=depth, site_id=site_id)
        except LLMError:
            raise  # the model condensing the follow-up failed: the caller reports it as any model failure
        except Exception:
            log.exception("Retrieval failed in chat session %s; answering without documents", session_id)
            retrieval_failed = True

    # 4. CONTEXT: the passages with a sentence that answers the message, best supported first, whole
    # chunks within the byte budget. One source per passage: the same file in two sites names both sites.
    hits, sites = distinct_passages(hits)
    if settings.chat_similarity_floor is not None and hits:  # a floor the user set on the chunks themselves
        hits = relevant_hits(hits, settings.chat_similarity_floor, chunk_coverage(store, retrieval_query, hits),
                             settings.chat_term_coverage)
    scale = cosine_scale(store.embedder_name)
    supports = supporting_passages(
        message, hits, folded=retrieval_query if retrieval_query != message else "",
        embed=lambda texts: embed_passages(store.embedder, texts),
        embed_query=lambda q: embed_query(store.embedder, " ".join(q.split())), scale=scale) if hits else []
    kept = {h.chunk_id for h in within_budget([sp.hit for sp in supports[:k]], settings.chat_context_bytes)}
    supports = [sp for sp in supports if sp.hit.chunk_id in kept]
    chosen = [sp.hit for sp in supports]
    sources = [Citation.from_hit(n, sp.hit, scale, sites.get(sp.hit.chunk_id), relevance=sp.relevance)
               for n, sp in enumerate(supports, 1)]
    units = [replace(u, passage=n) for n, sp in enumerate(supports, 1) for u in sp.units]
    request = AnswerRequest(
        question=message, retrieval_query=retrieval_query,
        passages=[Passage(s.n, s.source, s.title, s.text, s.similarity, s.page) for s in sources],
        history=[{"role": m["role"], "content": m["content"]} for m in history],
        instruction=instruction["instruction_text"] if instruction else "",
        language=language, retrieval_failed=retrieval_failed, retrieval_off=not use_documents,
        context_text=format_references(chosen), units=units,
    )
    return PreparedTurn(
        session_id=session_id, question=message, retrieval_query=retrieval_query, sources=sources, request=request,
        flags={"no_index": False, "stored": True, "retrieval_failed": retrieval_failed,
               "retrieval_off": not use_documents, "no_sources": not sources,
               "condensed": retrieval_query != message, "new_session": bool(user_msg["session_created"]),
               "instruction": instruction is not None},
        message_ids=[user_msg["id"]], language=language,
    )


def follow_up_passages(store: Store, llm: Callable[[], LLM], message: str, history: Sequence[dict[str, Any]], *,
                       k: int, site_id: str | None) -> tuple[str, list[ChunkHit]]:
    """(retrieval query, hits) of a message in a conversation: folded with it only when it depends on it.

    The message is searched on its own and, after an earlier question, folded with the conversation
    (condensed by the model, or joined to the previous question without one). The message alone
    wins when its own best passage is closer to it than the folded search's best passage both in
    words (more of the message's terms) and in meaning (cosine higher by more than
    the embedder's `CosineScale.follow_up_margin`): a new topic has such a passage, and the previous question must not
    outrank it. A follow-up ("and from the command line?", "А высота?") has none, so the
    conversation's topic is kept, and the passages the last answer cited stay candidates
    (`with_cited_passages`). Measured on the multi-turn set (eval/bench_multiturn.py).
    """
    query = prepare_query(store.embedder, message)  # its language, configs and vector serve every step below
    alone = distinct_passage_hits(store, query, k=k, site_id=site_id)
    if not any(m["role"] == "user" for m in history):
        return message, alone
    folded = llm().condense(history, message)
    if not folded or folded == message:
        return message, alone
    contextual = distinct_passage_hits(store, folded, k=k, site_id=site_id)
    if not contextual:
        return message, alone
    if not alone or alone[0].chunk_id == contextual[0].chunk_id:
        return folded, with_cited_passages(store, folded, contextual, history, k=k, site_id=site_id)
    own, other = alone[0], contextual[0]
    coverage = term_coverage(store.reads, query, [own, other])
    closer_in_words = coverage.get(own.chunk_id, 0.0) > coverage.get(other.chunk_id, 0.0)
    scale = cosine_scale(store.embedder_name)
    read = (lambda cosine: cosine) if scale.is_identity else scale.relevance
    margin = scale.follow_up_margin if FOLLOW_UP_MARGIN is None else FOLLOW_UP_MARGIN
    closer_in_meaning = read(own.similarity) - read(message_similarity(store, message, [other], alone)[0]) > margin
    if closer_in_words and closer_in_meaning:
        return message, alone
    return folded, with_cited_passages(store, folded, contextual, history, k=k, site_id=site_id)


def distinct_passage_hits(store: Store, query: str | PreparedQuery, *, k: int, site_id: str | None) -> list[ChunkHit]:
    """The top hits of k distinct passages, with their repeats in other sites (searching every site).

    The same file ingested into several sites fills k hits with copies of fewer passages; then the
    search is asked once more for deeper hits, so the answer still has k passages to choose from.
    """
    hits = top_chunks(store, query, k=k, site_id=site_id)
    if len(hits) < k or len(distinct_passages(hits)[0]) == len(hits):
        return hits
    return with_repeats(top_chunks(store, query, k=k * REPEAT_DEPTH, site_id=site_id), k)


def with_cited_passages(store: Store, query: str, hits: Sequence[ChunkHit], history: Sequence[dict[str, Any]],
                         *, k: int, site_id: str | None) -> list[ChunkHit]:
    """A follow-up's hits joined by the chunks the last answer cited and the chunks beside them.

    The folded query's own top k can miss the passage the conversation is about ("How do I delete a
    document?" then "And from the command line?" ranked `rag ingest` above the delete section, which
    the first answer had quoted): those chunks are candidates too, and the k most similar to the
    folded query are kept, most similar first. Whole documents were too wide: a long README brought
    in passages that shared a word with the follow-up and nothing else.
    """
    previous = next((m for m in reversed(history) if m["role"] == "assistant"), None)
    # Sources a client stored through chat_append are free-form: only whole chunk ids count.
    sources = [s for s in (previous or {}).get("sources") or [] if isinstance(s, dict)]
    cited = [s for s in sources if f"[{s.get('n')}]" in str(previous["content"])] or sources
    chunks = sorted({int(c) for c in (str(s.get("chunkId", "")) for s in cited)
                     if c.isascii() and c.isdigit() and len(c) <= 18})
    if not chunks:
        return list(hits)
    found = {h.chunk_id: h for h in hits}
    vector = embed_query(store.embedder, " ".join(query.split()))
    for hit in cited_neighbours(store.reads, vector, chunks, site_id=site_id, k=k):
        found.setdefault(hit.chunk_id, hit)
    return with_repeats(sorted(found.values(), key=lambda h: -h.similarity), k)


def message_similarity(store: Store, message: str, hits: Sequence[ChunkHit],
                       known: Sequence[ChunkHit] = ()) -> list[float]:
    """Cosine similarity of each hit's chunk to the message (taken from `known` hits of it when there)."""
    seen = {h.chunk_id: h.similarity for h in known}
    missing = [h.chunk_id for h in hits if h.chunk_id not in seen]
    if missing:
        vector = embed_query(store.embedder, " ".join(message.split()))
        seen.update(chunk_similarities(store.reads, vector, missing))
    return [seen.get(h.chunk_id, 0.0) for h in hits]


def run_turn(store: Store, llm: Callable[[], LLM], message: str, *, session_id: str | None = None, k: int = 5,
             site_id: str | None = None, user_id: str | None = None, resource_name: str | None = None,
             on_token: Callable[[str], None] | None = None, language: str | None = None) -> ChatTurn:
    """Answer one message with the session's history and the documents; store both messages.

    The user's message is stored before the model is called, so an LLM failure (LLMError) loses
    nothing; the assistant message and its citations are written in one statement afterwards. A model
    that cannot be built (an unknown RAG_LLM) is refused first, before anything is stored.
    """
    answerer = llm()
    prepared = prepare_turn(store, llm, message, session_id=session_id, k=k, site_id=site_id, user_id=user_id,
                            resource_name=resource_name, language=language)
    if prepared.request is None:
        answer = prepared.no_index_answer
        return ChatTurn(session_id=prepared.session_id, question=prepared.question, answer=answer, sources=[],
                        retrieval_query="", context={}, rendered=render_turn([], answer, prepared.language),
                        flags=prepared.flags, llm=answerer.describe())

    # 5. The answer (LLMError propagates: the user's message is already stored).
    request, sources = prepared.request, prepared.sources
    answer = answerer.answer(request, on_token=on_token)
    if request.retrieval_failed:
        notice = labels(prepared.language)["retrieval_failed"]
        answer = f"{notice}\n\n{answer}" if answer else notice

    # 6. The assistant message with the sources actually given to the model.
    assistant_msg = sessions.append_message(store.db, prepared.session_id, "assistant", answer, site_id=site_id,
                                            user_id=user_id, sources=[s.to_citation() for s in sources])
    return ChatTurn(
        session_id=prepared.session_id, question=prepared.question, answer=answer, sources=sources,
        retrieval_query=prepared.retrieval_query, context=request.to_dict(),
        rendered=render_turn(sources, answer, prepared.language), flags=prepared.flags,
        llm=answerer.describe(), message_ids=[*prepared.message_ids, assistant_msg["id"]],
    )
