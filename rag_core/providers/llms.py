"""LLM providers: a registry of answerers keyed by name (RAG_LLM), like the embedders.

Every provider answers an `AnswerRequest` (question, HISTORY, numbered CONTEXT passages, the site's
instruction) and condenses a follow-up question with the conversation. Generative providers get the
chat-completions messages the request renders; the offline `extractive` one quotes sentences.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from rag_core.chat.prompts import AnswerRequest, CondenseRequest, labels
from rag_core.errors import ConfigError, LLMError
from rag_core.providers.calibration import IDENTITY, CosineScale, cosine_scale
from rag_core.settings import RagSettings

log = logging.getLogger(__name__)

TokenCallback = Callable[[str], None]
EmbedderFactory = Callable[[], Any]


class LLM:
    """Template for a generative provider: subclasses implement `complete` and `stream`."""

    name = "base"
    generative = True

    def describe(self) -> str:
        """Provider and model, for messages and status pages."""
        return self.name

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        raise NotImplementedError

    def stream(self, messages: Sequence[dict[str, str]]) -> Iterator[str]:
        yield self.complete(messages)

    def answer(self, request: AnswerRequest, on_token: TokenCallback | None = None) -> str:
        """The answer text; with `on_token` each piece is passed on as it arrives (streaming)."""
        messages = request.messages()
        if on_token is None:
            return self.complete(messages).strip()
        pieces: list[str] = []
        for piece in self.stream(messages):
            pieces.append(piece)
            on_token(piece)
        return "".join(pieces).strip()

    def condense(self, history: Sequence[dict[str, str]], question: str) -> str:
        """A standalone version of a follow-up question, written by the model from the conversation."""
        text = self.complete(CondenseRequest(list(history), question).messages()).strip()
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        line = line.removeprefix("Standalone question:").strip().strip('"“”«»「」')
        return line or question


class ExtractiveLLM(LLM):
    """Offline answerer: the retrieved passages' best-matching sentences, each marked with its [n]."""

    name = "extractive"
    generative = False

    def __init__(self, embedder: EmbedderFactory | None = None, max_sentences: int = 3,
                 scale: CosineScale = IDENTITY) -> None:
        """``scale`` reads the embedder's cosines and holds its answering closeness (rag_core/providers/calibration.py);
        the identity scale reads them as they are."""
        self._embedder = embedder
        self.max_sentences = max_sentences
        self.scale = scale

    def describe(self) -> str:
        return "extractive (offline, quotes the documents)"

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        raise LLMError("The extractive answerer does not generate free text; set RAG_LLM=openai for that.")

    def condense(self, history: Sequence[dict[str, str]], question: str) -> str:
        """Without a model, the previous user turn is folded into the retrieval query."""
        previous = next((m["content"] for m in reversed(history) if m.get("role") == "user"), "")
        return f"{previous} {question}".strip() if previous else question

    def answer(self, request: AnswerRequest, on_token: TokenCallback | None = None) -> str:
        from rag_core.chat.extractive import (answers_question, asks_for_subject, compose, pick_sentences,
                                              score_sentences)

        words = labels(request.language)
        if not request.passages:
            text = words["retrieval_off"] if request.retrieval_off else words["no_context"]
            if on_token:
                on_token(text)
            return text
        subjects = {p.n: p.title for p in request.passages if p.title not in request.question} \
            if asks_for_subject(request.question) else {}
        if request.units:  # judged by the turn already (rag_core.chat.grounding)
            answering = sorted((u for u in request.units if u.answers), key=lambda u: -u.score)
            text = compose(pick_sentences(answering, max_sentences=self.max_sentences), subjects) if answering \
                else words["no_context"]
            if on_token:
                on_token(text)
            return text
        embed = embed_query = None
        if self._embedder is not None:
            model = self._embedder()
            embed = lambda texts: np.asarray(model.get_text_embedding_batch(texts), dtype=np.float32)  # noqa: E731
            embed_query = lambda q: np.asarray(model.get_query_embedding(q), dtype=np.float32)  # noqa: E731
        context_query = request.retrieval_query if request.retrieval_query != request.question else ""
        answers_dense = self.scale.answers_dense
        scored = score_sentences(request.question, [(p.n, p.text) for p in request.passages],
                                 context_query=context_query, embed=embed, embed_query=embed_query,
                                 relevance=None if self.scale.is_identity else self.scale.relevance)
        if scored and answers_question(scored[0], min_dense=answers_dense):
            text = compose(pick_sentences(scored, max_sentences=self.max_sentences), subjects)
        else:
            text = words["no_context"]
        if on_token:
            on_token(text)
        return text


class OpenAICompatibleLLM(LLM):
    """OpenAI's chat completions API or any server that speaks it (LM Studio, Ollama, vLLM, llama.cpp)."""

    name = "openai"

    def __init__(self, model: str, base_url: str | None, api_key: str, timeout: float,
                 temperature: float = 0.1) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.temperature = temperature
        self._client: Any = None

    @property
    def where(self) -> str:
        return self.base_url or "OpenAI's hosted API"

    def describe(self) -> str:
        return f"model '{self.model}' at {self.where}"

    def _api(self) -> Any:
        """LlamaIndex's OpenAI-like LLM for the server (the same class LlamaIndex users configure)."""
        if self._client is None:
            from llama_index.llms.openai_like import OpenAILike

            # No silent retries: the user waits on this call, and a clear error beats a doubled wait.
            where = {"api_base": self.base_url} if self.base_url else {}
            self._client = OpenAILike(model=self.model, api_key=self.api_key or "not-needed", timeout=self.timeout,
                                      max_retries=0, temperature=self.temperature, is_chat_model=True, **where)
        return self._client

    def _error(self, exc: Exception) -> LLMError:
        import openai

        offline = "or set RAG_LLM=extractive to answer offline"
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(f"The chat model '{self.model}' at {self.where} did not answer within "
                            f"{self.timeout:g} s. Check the server's load, raise RAG_LLM_TIMEOUT_SEC, or choose "
                            f"a smaller model in RAG_LLM_MODEL.")
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(f"Cannot reach the chat server at {self.where} (model '{self.model}'). Start the "
                            f"server (LM Studio, Ollama, vLLM, llama.cpp server) or fix RAG_LLM_BASE_URL, {offline}.")
        if isinstance(exc, openai.APIStatusError):
            detail = _error_detail(exc)
            if exc.status_code in (401, 403):
                fix = "check RAG_LLM_API_KEY"
            elif exc.status_code == 404:
                fix = "check that RAG_LLM_MODEL names a model the server has loaded, and RAG_LLM_BASE_URL ends in /v1"
            else:
                fix = "check the server's log"
            return LLMError(f"The chat server at {self.where} answered HTTP {exc.status_code} for model "
                            f"'{self.model}'{': ' + detail if detail else ''}. Fix: {fix}, {offline}.")
        return LLMError(f"The chat model '{self.model}' at {self.where} failed: {exc}. {offline.capitalize()}.")

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        import openai

        try:
            content = self._api().chat(_chat_messages(messages)).message.content
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        if content is None:
            raise LLMError(f"The chat model '{self.model}' at {self.where} returned no text; check the server's log.")
        return content

    def stream(self, messages: Sequence[dict[str, str]]) -> Iterator[str]:
        import openai

        try:
            for chunk in self._api().stream_chat(_chat_messages(messages)):
                if chunk.delta:
                    yield chunk.delta
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc


class LlamaCppLLM(OpenAICompatibleLLM):
    """A local GGUF file run in-process by llama.cpp (the prebuilt `xllamacpp` wheel).

    xllamacpp's server listens on a free localhost port and speaks the chat completions API, so
    answering and streaming go through the same client as the `openai` provider.
    """

    name = "llamacpp"

    def __init__(self, model_path: str, timeout: float, threads: int, n_ctx: int = 8192,
                 max_tokens: int = 512) -> None:
        super().__init__(model=model_path, base_url=None, api_key="not-needed", timeout=timeout)
        self.model_path = model_path
        self.threads = threads
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self._server: Any = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"llama.cpp (in-process, {os.path.basename(self.model_path)})"

    def describe(self) -> str:
        return f"llamacpp {self.model_path}"

    def _api(self) -> Any:
        with self._lock:
            if self._server is None:
                try:
                    import xllamacpp
                except ImportError as exc:
                    raise ConfigError("RAG_LLM=llamacpp needs the llama.cpp wheel; install it with "
                                      "`.venv/bin/pip install -e '.[llamacpp]'`.") from exc
                params = xllamacpp.CommonParams()
                params.model.path = self.model_path
                params.n_ctx = self.n_ctx
                params.n_predict = self.max_tokens
                params.cpuparams.n_threads = self.threads
                params.cpuparams_batch.n_threads = self.threads
                params.verbosity = 0
                try:
                    self._server = xllamacpp.Server(params)
                except Exception as exc:
                    raise LLMError(f"llama.cpp could not load {self.model_path}: {exc}. Check that RAG_LLM_MODEL "
                                   "is a GGUF model file.") from exc
                self.base_url = f"{self._server.listening_address.rstrip('/')}/v1"
        return super()._api()


def _chat_messages(messages: Sequence[dict[str, str]]) -> list[Any]:
    from llama_index.core.base.llms.types import ChatMessage

    return [ChatMessage(role=m["role"], content=m["content"]) for m in messages]


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str):
            return inner[:300]
    return ""


def _extractive(s: RagSettings, embedder: EmbedderFactory | None) -> LLM:
    # the embedder in use: a store's own when RAG_EMBEDDER is left unset
    return ExtractiveLLM(embedder, scale=cosine_scale(s.embedder))


def _openai(s: RagSettings, embedder: EmbedderFactory | None) -> LLM:
    base_url = s.llm_base_url or s.openai_base_url or None
    api_key = s.llm_api_key or s.openai_api_key or os.environ.get("OPENAI_API_KEY", "")
    if not (base_url or api_key):
        raise ConfigError(
            "RAG_LLM=openai needs RAG_LLM_BASE_URL (an OpenAI-compatible server such as LM Studio "
            "http://localhost:1234/v1, Ollama http://localhost:11434/v1, vLLM or llama.cpp server) "
            "or RAG_LLM_API_KEY for OpenAI itself."
        )
    if base_url and not s.llm_model:
        raise ConfigError(f"RAG_LLM=openai with RAG_LLM_BASE_URL={base_url} needs RAG_LLM_MODEL: the name "
                          "of a model the server has loaded.")
    return OpenAICompatibleLLM(s.llm_model or "gpt-4o-mini", base_url, api_key, s.llm_timeout_sec)


def _llamacpp(s: RagSettings, embedder: EmbedderFactory | None) -> LLM:
    path = os.path.expanduser(s.llm_model)
    if not path.lower().endswith(".gguf") or not os.path.isfile(path):
        raise ConfigError(f"RAG_LLM=llamacpp needs RAG_LLM_MODEL to be the path of a local .gguf model file "
                          f"(got {s.llm_model!r}).")
    return LlamaCppLLM(path, s.llm_timeout_sec, threads=max(1, min(s.embed_threads, os.cpu_count() or 1)))


LLMS: dict[str, Callable[[RagSettings, EmbedderFactory | None], LLM]] = {
    "extractive": _extractive,  # offline default: quotes the best sentences of the retrieved passages
    "openai": _openai,          # OpenAI or any OpenAI-compatible server (LM Studio, Ollama, vLLM, llama.cpp)
    "llamacpp": _llamacpp,      # a local GGUF file, in-process (optional extra: xllamacpp)
}


def build_llm(settings: RagSettings, embedder: EmbedderFactory | None = None) -> LLM:
    """The configured LLM; an unknown name raises ConfigError listing the known ones.

    Args:
        embedder: returns the workbench's embedder when called (the extractive answerer scores with it).
    """
    try:
        factory = LLMS[settings.llm]
    except KeyError:
        raise ConfigError(f"Unknown LLM '{settings.llm}'; choose one of: {', '.join(LLMS)} (RAG_LLM).") from None
    return factory(settings, embedder)
