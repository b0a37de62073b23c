"""LlamaIndex query and chat engines over the workbench, with its answerers as LlamaIndex LLMs.

The engines are LlamaIndex's own (RetrieverQueryEngine, CondensePlusContextChatEngine); what they
add is the workbench's contract: the passages go to the model as numbered references, the answer
cites them as [n], and every response carries its sources (`metadata["sources"]`, the stored
`citations` and the `## Sources` / `## Answer` text in `metadata["rendered"]`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from llama_index.core.base.llms.types import (
    ChatMessage, ChatResponse, CompletionResponse, CompletionResponseGen, LLMMetadata, MessageRole,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.chat_engine import CondensePlusContextChatEngine
from llama_index.core.chat_engine.condense_plus_context import DEFAULT_CONDENSE_PROMPT_TEMPLATE
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import PromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from rag_core.chat.citations import render_turn
from rag_core.search.types import Citation
from rag_core.chat.context import reference_block
from rag_core.chat.llms import LLM
from rag_core.chat.prompts import ANSWER_RULES, DEFAULT_SYSTEM_PROMPT, AnswerRequest, Passage
from rag_core.chat import sessions
from rag_core.ingest.handle import Store
from rag_core.llamaindex.chat_store import WorkbenchChatStore
from rag_core.llamaindex.retriever import WorkbenchRetriever
from rag_core.settings import RagSettings

if TYPE_CHECKING:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.llms.llm import LLM as LlamaLLM


QA_TEMPLATE = PromptTemplate(
    f"{DEFAULT_SYSTEM_PROMPT}\n\n{ANSWER_RULES}\n\nCONTEXT:\n{{context_str}}\n\nQuestion: {{query_str}}\nAnswer: ")
CHAT_CONTEXT_TEMPLATE = f"{ANSWER_RULES}\n\nCONTEXT:\n{{context_str}}\n"
_REFERENCE = re.compile(r"^--- Reference (\d+) ---\nSource: (.*)\n", re.MULTILINE)
_QUESTION = re.compile(r"\n(?:Question|Query): (.*)\nAnswer: ?$", re.DOTALL)
# LlamaIndex's default question-answering prompt puts the context between two dashed lines.
_DASHED_CONTEXT = re.compile(r"\n-{5,}\n(.*)\n-{5,}\n", re.DOTALL)
# LlamaIndex's condense prompt (its lines are indented in the template).
_FOLLOW_UP = re.compile(r"Follow Up Input: (.*)\n[ \t]*Standalone question:", re.DOTALL)


def parse_references(text: str) -> list[Passage]:
    """The numbered reference blocks of a prompt, back as passages."""
    marks = list(_REFERENCE.finditer(text))
    passages = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mark.end():end].split("\n\nQuestion: ", 1)[0]  # the last block ends where the question starts
        passages.append(Passage(int(mark.group(1)), mark.group(2), "", body.strip(), 0.0))
    return passages


class WorkbenchLLM(CustomLLM):
    """The configured answerer (RAG_LLM: extractive, openai, llamacpp) as a LlamaIndex LLM.

    The offline extractive answerer quotes the best sentences of the numbered references in its
    prompt and folds a follow-up question with the previous one instead of rewriting it.
    """

    context_window: int = 200_000
    num_output: int = 1024
    model_name: str = "workbench"
    _provider: Any = PrivateAttr()

    def __init__(self, provider: Any, **kwargs: Any) -> None:
        super().__init__(model_name=getattr(provider, "name", "workbench"), **kwargs)
        self._provider = provider

    @classmethod
    def class_name(cls) -> str:
        return "WorkbenchLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self.context_window, num_output=self.num_output,
                           model_name=self.model_name, is_chat_model=True)

    def _extractive(self, context: str, question: str) -> str:
        passages = parse_references(context)
        dashed = None if passages else _DASHED_CONTEXT.search(context)
        if dashed:  # a prompt of LlamaIndex's own: its context counts as one reference
            passages = [Passage(1, "", "", dashed.group(1).strip(), 0.0)]
        return self._provider.answer(AnswerRequest(question=question.strip(), retrieval_query=question.strip(),
                                                   passages=passages, history=[]))

    def _text(self, prompt: str) -> str:
        if getattr(self._provider, "generative", True):
            return self._provider.complete([{"role": "user", "content": prompt}])
        follow_up = _FOLLOW_UP.search(prompt)
        if follow_up:  # LlamaIndex's condense prompt: fold the previous user turn into the question
            users = re.findall(r"^[ \t]*user: (.*)$", prompt[:follow_up.start()], re.MULTILINE)
            history = [{"role": "user", "content": users[-1]}] if users else []
            return self._provider.condense(history, follow_up.group(1).strip())
        question = _QUESTION.search(prompt)
        return self._extractive(prompt, question.group(1) if question else prompt.rsplit("\n", 1)[-1])

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._text(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self._text(prompt)
        yield CompletionResponse(text=text, delta=text)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        if getattr(self._provider, "generative", True):
            text = self._provider.complete([{"role": m.role.value, "content": m.content or ""} for m in messages
                                            if m.role.value in ("system", "user", "assistant")])
        else:
            question = next((m.content or "" for m in reversed(messages) if m.role == MessageRole.USER), "")
            context = "\n\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM)
            # A completion prompt sent as one user message carries its references and question itself.
            whole = _REFERENCE.search(question) or _DASHED_CONTEXT.search(question)
            text = self._text(question) if whole else self._extractive(context, question)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))


def workbench_llm(answerer: LLM) -> WorkbenchLLM:
    """Our answerer (RAG_LLM) as a LlamaIndex LLM."""
    return WorkbenchLLM(answerer)


class ReferenceNumbers(BaseNodePostprocessor):
    """Numbers the nodes as the references [1], [2], ... a model cites (the last postprocessor of a chain)."""

    @classmethod
    def class_name(cls) -> str:
        return "ReferenceNumbers"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> list[NodeWithScore]:
        out = []
        for n, item in enumerate(nodes, 1):
            node = item.node.model_copy(deep=True)
            source = str(node.metadata.get("source") or node.ref_doc_id or node.node_id)
            node.metadata["ref"] = n
            # The block names the source itself; one key stays so that the template applies.
            node.excluded_llm_metadata_keys = [k for k in node.metadata if k != "ref"]
            header = reference_block(n, source, "").replace("{", "{{").replace("}", "}}")
            node.text_template = header + "{content}"
            node.metadata_template = "{value}"
            out.append(NodeWithScore(node=node, score=item.score))
        return out


class DistinctPassages(BaseNodePostprocessor):
    """One node per passage: the same file ingested into several sites is one reference naming those sites.

    The node kept is the best-ranked copy; `metadata["sites"]` lists every site holding the passage.
    """

    @classmethod
    def class_name(cls) -> str:
        return "DistinctPassages"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> list[NodeWithScore]:
        kept: dict[tuple[str, str], NodeWithScore] = {}
        for item in nodes:
            meta = item.node.metadata
            key = (str(meta.get("source") or item.node.ref_doc_id or item.node.node_id), item.node.get_content())
            site = meta.get("site")
            if key not in kept:
                kept[key] = item
                item.node.metadata["sites"] = [site] if site else []
            elif site and site not in kept[key].node.metadata["sites"]:
                kept[key].node.metadata["sites"].append(site)
        return list(kept.values())


class RerankPostprocessor(BaseNodePostprocessor):
    """A reranker of the RAG_RERANKER registry as a LlamaIndex node postprocessor: nodes reordered by its score.

    Args:
        top_n: keep this many nodes after reranking (all by default).
    """

    top_n: Optional[int] = None
    _reranker: Any = PrivateAttr()

    def __init__(self, reranker: Any, top_n: int | None = None) -> None:
        super().__init__(top_n=top_n)
        self._reranker = reranker

    @classmethod
    def class_name(cls) -> str:
        return "RerankPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> list[NodeWithScore]:
        if query_bundle is None or not nodes:
            return nodes[:self.top_n] if self.top_n else nodes
        scores = self._reranker.score(query_bundle.query_str,
                                      [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes])
        for item, score in zip(nodes, scores):
            item.node.metadata["rerank_score"] = float(score)
            item.score = float(score)
        ranked = sorted(nodes, key=lambda n: -(n.score or 0.0))
        return ranked[:self.top_n] if self.top_n else ranked


def default_postprocessors(settings: RagSettings, extra: Sequence[BaseNodePostprocessor]) -> list[BaseNodePostprocessor]:
    """The caller's postprocessors, then RAG_RERANKER's reranker when one is set, then one node per passage
    and the reference numbers."""
    from rag_core.providers.rerankers import build_reranker

    reranker = build_reranker(settings)
    return [*extra, *([RerankPostprocessor(reranker)] if reranker is not None else []), DistinctPassages(),
            ReferenceNumbers()]


def sources_of(nodes: Sequence[NodeWithScore]) -> list[Citation]:
    """The numbered sources of a response, in the order the model saw them."""
    out = []
    for n, item in enumerate(nodes, 1):
        meta = item.node.metadata
        out.append(Citation(
            n=n, source=str(meta.get("source") or item.node.ref_doc_id or item.node.node_id),
            title=str(meta.get("title") or ""), similarity=float(meta.get("similarity", item.score or 0.0) or 0.0),
            page=meta.get("page"), chunk_id=int(meta.get("chunk_id") or 0), document_id=int(meta.get("document_id") or 0),
            start_char=int(item.node.start_char_idx or 0), end_char=int(item.node.end_char_idx or 0),
            text=item.node.get_content(), site_id=str(meta.get("site") or ""),
            sites=[str(x) for x in meta.get("sites") or []]))
    return out


def source_metadata(answer: str, nodes: Sequence[NodeWithScore], language: str) -> dict[str, Any]:
    sources = sources_of(nodes)
    return {"sources": [s.to_dict() for s in sources], "citations": [s.to_citation() for s in sources],
            "rendered": render_turn(sources, answer, language)}


class CitingQueryEngine(RetrieverQueryEngine):
    """RetrieverQueryEngine whose responses carry the workbench's sources and rendered answer."""

    language: str = "en"

    def _query(self, query_bundle: QueryBundle) -> Any:
        response = super()._query(query_bundle)
        response.metadata = {**(response.metadata or {}),
                             **source_metadata(str(response), response.source_nodes, self.language)}
        return response

    async def _aquery(self, query_bundle: QueryBundle) -> Any:
        response = await super()._aquery(query_bundle)
        response.metadata = {**(response.metadata or {}),
                             **source_metadata(str(response), response.source_nodes, self.language)}
        return response


def query_engine(handle: Store, answerer: Callable[[], LLM], *, llm: "LlamaLLM | None" = None, retriever: "BaseRetriever | None" = None,
                 node_postprocessors: Sequence[BaseNodePostprocessor] = (), response_mode: str = "compact",
                 **retriever_args: Any) -> CitingQueryEngine:
    """A query engine: the workbench's retriever (or any), postprocessors, then numbered references."""
    from llama_index.core.response_synthesizers import get_response_synthesizer

    llm = llm or workbench_llm(answerer())
    retriever = retriever or WorkbenchRetriever(handle, **retriever_args)
    synthesizer = get_response_synthesizer(llm=llm, text_qa_template=QA_TEMPLATE, response_mode=response_mode)
    engine = CitingQueryEngine(retriever=retriever, response_synthesizer=synthesizer,
                               node_postprocessors=default_postprocessors(handle.settings, node_postprocessors))
    engine.language = handle.settings.language
    return engine


class CitingChatEngine(CondensePlusContextChatEngine):
    """CondensePlusContextChatEngine that stores each answer's citations with it in the chat history."""

    language: str = "en"

    def _cite(self, response: Any) -> Any:
        response.metadata = {**(response.metadata or {}),
                             **source_metadata(response.response, response.source_nodes, self.language)}
        store = getattr(self._memory, "chat_store", None)
        if hasattr(store, "attach_sources"):
            store.attach_sources(self._memory.chat_store_key, response.metadata["citations"])
        return response

    def chat(self, message: str, chat_history: Optional[list[ChatMessage]] = None) -> Any:
        return self._cite(super().chat(message, chat_history))

    async def achat(self, message: str, chat_history: Optional[list[ChatMessage]] = None) -> Any:
        return self._cite(await super().achat(message, chat_history))


def chat_engine(handle: Store, answerer: Callable[[], LLM], session_id: str, *, llm: "LlamaLLM | None" = None,
                retriever: "BaseRetriever | None" = None, site_id: str | None = None, user_id: str | None = None,
                node_postprocessors: Sequence[BaseNodePostprocessor] = (), **retriever_args: Any) -> CitingChatEngine:
    """A chat engine whose history is the workbench's chat session `session_id`."""
    llm = llm or workbench_llm(answerer())
    retriever = retriever or WorkbenchRetriever(handle, site_id=site_id, **retriever_args)
    memory = ChatMemoryBuffer.from_defaults(
        chat_store=WorkbenchChatStore(handle, site_id=site_id, user_id=user_id),
        chat_store_key=sessions.check_chat_session_id(session_id), token_limit=min(30_000, llm.metadata.context_window // 2))
    engine = CitingChatEngine(
        retriever=retriever, llm=llm, memory=memory, context_prompt=CHAT_CONTEXT_TEMPLATE,
        condense_prompt=DEFAULT_CONDENSE_PROMPT_TEMPLATE, system_prompt=DEFAULT_SYSTEM_PROMPT,
        node_postprocessors=default_postprocessors(handle.settings, node_postprocessors))
    engine.language = handle.settings.language
    return engine
