"""Prompts, labels and the structured request an answerer receives: every chat text lives here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Labels of rendered answers and the plain statements of the workbench, per RAG_LANGUAGE.
LABELS: dict[str, dict[str, str]] = {
    "en": {
        "sources": "Sources",
        "answer": "Answer",
        "none": "No relevant documents found.",
        "page": "p.",
        "sites": "sites",
        "no_index": "Nothing is indexed yet{where}. Add documents with `rag ingest PATH` (or the Ingestion "
                    "page of the workbench), then ask again.",
        "no_context": "No relevant documents were found for this question, so I cannot answer it from your "
                      "documents.",
        "retrieval_failed": "Note: the document search failed, so this answer does not use your documents.",
        "retrieval_off": "Document search is turned off (RAG_ENABLED=false) and the offline extractive answerer can "
                         "only quote documents; set RAG_LLM=openai or llamacpp to answer without them.",
        "user": "User",
        "assistant": "Assistant",
    },
    "ru": {
        "sources": "Источники",
        "answer": "Ответ",
        "none": "Релевантные документы не найдены.",
        "page": "с.",
        "sites": "сайты",
        "no_index": "Индекс пуст{where}. Добавьте документы командой `rag ingest PATH` (или на странице "
                    "Ingestion), затем задайте вопрос снова.",
        "no_context": "Релевантные документы для этого вопроса не найдены, поэтому ответить по вашим документам "
                      "нельзя.",
        "retrieval_failed": "Внимание: поиск по документам не удался, поэтому ответ дан без ваших документов.",
        "retrieval_off": "Поиск по документам выключен (RAG_ENABLED=false), а офлайн-ответчик extractive умеет только "
                         "цитировать документы; задайте RAG_LLM=openai или llamacpp, чтобы отвечать без них.",
        "user": "Пользователь",
        "assistant": "Ассистент",
    },
    "ja": {
        "sources": "出典",
        "answer": "回答",
        "none": "関連する文書は見つかりませんでした。",
        "page": "p.",
        "sites": "サイト",
        "no_index": "まだ何も索引されていません{where}。`rag ingest PATH`（またはワークベンチの Ingestion "
                    "ページ）で文書を追加してから、もう一度質問してください。",
        "no_context": "この質問に関連する文書が見つからなかったため、文書に基づいて回答できません。",
        "retrieval_failed": "注意：文書検索に失敗したため、この回答は文書を参照していません。",
        "retrieval_off": "文書検索は無効です（RAG_ENABLED=false）。オフラインの extractive 回答器は文書を引用することしか"
                         "できません。文書なしで回答するには RAG_LLM=openai または llamacpp を設定してください。",
        "user": "ユーザー",
        "assistant": "アシスタント",
    },
}

DEFAULT_SYSTEM_PROMPT = "You are the assistant of a document workbench. You answer questions about the user's documents."

ANSWER_RULES = (
    "Answer the user's last question from the CONTEXT below and the conversation so far. Use only facts "
    "the CONTEXT states; after each fact put the number of its reference in square brackets, like [1]. "
    "If the CONTEXT does not hold the answer, say so plainly instead of guessing. Answer in the language "
    "of the question."
)
NO_CONTEXT_RULE = (
    "No reference in the documents matched this question. Say so plainly; answer only from the "
    "conversation so far, or say that you cannot answer."
)
RETRIEVAL_OFF_RULE = (
    "Document search is turned off, so there is no CONTEXT. Answer from the conversation so far and your "
    "general knowledge; say so plainly when you are not sure. Answer in the language of the question."
)
RETRIEVAL_FAILED_RULE = (
    "The document search failed for this question, so there is no CONTEXT. Say that the documents could "
    "not be searched; answer only from the conversation so far, or say that you cannot answer."
)

# For small local models (RAG_LLM=local): short sentences in the passages' own words, each tied to one passage,
# so the faithfulness check (rag_core/chat/faithfulness.py) can verify it. No "say NONE if..." clause: the 0.5B model
# then answered NONE to questions its passage answered; an unsupported sentence is dropped by the check instead.
GROUNDED_RULES = (
    "Answer the question with one to three short sentences taken from the numbered passages below. Write each "
    "sentence on its own line and end it with the number of the passage it comes from in square brackets, like "
    "[2]. Use the passage's own words, names and numbers, in the passage's language."
)

CONDENSE_SYSTEM = (
    "Rewrite the user's follow-up question as one standalone question that a search engine can answer "
    "without the conversation: replace pronouns and references with the subject they stand for. Keep the "
    "language of the follow-up question. Reply with the question only."
)


def labels(language: str) -> dict[str, str]:
    """The labels for a RAG_LANGUAGE value (English for anything unknown)."""
    return LABELS.get(language, LABELS["en"])


@dataclass
class Passage:
    """One numbered reference handed to the answerer."""

    n: int
    source: str
    title: str
    text: str
    similarity: float
    page: int | None = None


@dataclass
class AnswerRequest:
    """The structured context of one turn: what the model is given, and nothing else."""

    question: str
    retrieval_query: str
    passages: list[Passage]
    history: list[dict[str, str]]           # earlier messages, oldest first: {"role", "content"}
    instruction: str = ""                   # the site's active agent instruction, if any
    language: str = "en"
    retrieval_failed: bool = False
    retrieval_off: bool = False             # RAG_ENABLED=false: answer without documents
    context_text: str = ""                  # the CONTEXT block: the web-knowledge spec's reference blocks
    # the passages' units already scored against the question (rag_core.chat.grounding), numbered as the
    # passages: the offline answerer quotes from them instead of scoring again; not part of the context
    units: list[Any] = field(default_factory=list, repr=False)

    def system_prompt(self) -> str:
        """The system message: the site's instruction (or the default), the rules and the CONTEXT."""
        parts = [self.instruction.strip() or DEFAULT_SYSTEM_PROMPT]
        if self.retrieval_off:
            parts.append(RETRIEVAL_OFF_RULE)
        elif self.retrieval_failed:
            parts.append(RETRIEVAL_FAILED_RULE)
        elif not self.passages:
            parts.append(NO_CONTEXT_RULE)
        else:
            parts.append(ANSWER_RULES)
            parts.append("CONTEXT:\n" + self.context_text)
        return "\n\n".join(parts)

    def messages(self) -> list[dict[str, str]]:
        """Chat-completions messages: system, HISTORY, then the question."""
        msgs = [{"role": "system", "content": self.system_prompt()}]
        msgs += [{"role": m["role"], "content": m["content"]} for m in self.history
                 if m.get("role") in ("user", "assistant") and m.get("content")]
        msgs.append({"role": "user", "content": self.question})
        return msgs

    def history_and_context(self) -> str:
        """The HISTORY and CONTEXT blocks as one text, for a client that answers with its own model
        (MCP's rag_chat_prepare): the earlier messages as `role: content`, then the numbered references."""
        history = "\n".join(f"{m['role']}: {m['content']}" for m in self.history) or "(no earlier messages)"
        return f"HISTORY:\n{history}\n\nCONTEXT:\n{self.context_text or '(no relevant passages)'}\n"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("units", None)
        data["system_prompt"] = self.system_prompt()
        return data


def grounded_messages(request: AnswerRequest) -> list[dict[str, str]]:
    """The messages of a grounded answer: the rules and the passages numbered as [n], then the question
    (a follow-up with the earlier question it follows)."""
    passages = "\n\n".join(f"[{p.n}] {p.title}\n{p.text.strip()}" for p in request.passages)
    system = "\n\n".join(part for part in (request.instruction.strip(), GROUNDED_RULES, "Passages:\n" + passages)
                          if part)
    question = request.question
    earlier = next((m["content"] for m in reversed(request.history) if m.get("role") == "user"), "")
    if earlier and request.retrieval_query != request.question:
        question = f"Earlier question: {_clip(earlier, 300)}\nQuestion: {request.question}"
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


@dataclass
class CondenseRequest:
    history: list[dict[str, str]]
    question: str

    def messages(self) -> list[dict[str, str]]:
        """The condense prompt: the conversation as text, then the follow-up question."""
        lines = []
        for m in self.history:
            if m.get("role") in ("user", "assistant") and m.get("content"):
                who = "User" if m["role"] == "user" else "Assistant"
                lines.append(f"{who}: {_clip(m['content'], 1200)}")
        user = ("Conversation:\n" + "\n".join(lines) + f"\n\nFollow-up question: {self.question}\n\n"
                "Standalone question:")
        return [{"role": "system", "content": CONDENSE_SYSTEM}, {"role": "user", "content": user}]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def session_title(question: str, limit: int = 60) -> str:
    """A session title from its first question: one line, cut at a word boundary, with an ellipsis."""
    line = " ".join(question.split())
    if len(line) <= limit:
        return line
    cut = line[:limit]
    space = cut.rfind(" ")
    if space >= limit // 2:  # texts without spaces (Japanese) are cut at the limit
        cut = cut[:space]
    return cut.rstrip(" ,.;:!?、。") + "…"
