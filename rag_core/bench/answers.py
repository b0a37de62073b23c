"""Notebook 03's engine: chat turns through Workbench.chat, scored with ragas and against reference answers.

Metrics that need no LLM run always: ID-based context precision and recall (which documents were
cited), non-LLM context precision and recall (fuzzy match of the cited passages to the reference
passage), string similarity (character-level Levenshtein) and containment of the reference answer.
ROUGE and BLEU are left out: their default tokenizers drop Japanese text entirely, so they score
JSQuAD answers as zero whatever they say. Faithfulness and
answer relevancy need a judge LLM: they run only when RAG_LLM is a generative provider (openai or
any OpenAI-compatible server), with the same model and server, else `llm_metrics_status` says why not.
"""

from __future__ import annotations

import os
import uuid
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from rag_core.chat.faithfulness import check_answer
from rag_core.evaluation.datasets import BeirDataset
from rag_core.evaluation.runner import ingest_dataset
from rag_core.security.ids import EVAL_SITE_PREFIX

if TYPE_CHECKING:
    from rag_core.workbench import Workbench

# ragas sends usage analytics from evaluate() unless this is set before it is imported.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

NO_LLM_METRICS = ("id_context_precision", "id_context_recall", "context_precision", "context_recall",
                  "string_similarity", "answer_contains_reference")


@dataclass
class ChatRecord:
    """One question asked through Workbench.chat, with what it was expected to find and answer."""

    query_id: str
    question: str
    answer: str
    references: list[str]
    retrieved_ids: list[str]
    retrieved_contexts: list[str]
    reference_ids: list[str]
    reference_contexts: list[str]
    latency_s: float
    flags: dict[str, bool] = field(default_factory=dict)


def answer_contains_reference(answer: str, references: list[str]) -> float:
    """1.0 when the answer contains any reference answer verbatim (whitespace-insensitive), else 0.0."""
    squash = "".join(answer.split())
    return 1.0 if any(ref and "".join(ref.split()) in squash for ref in references) else 0.0


def cited_faithfulness(answer: str, passages: dict[int, str]) -> float | None:
    """Share of the answer's cited sentences that the passage they cite supports (the grounding check of
    rag_core/chat/faithfulness.py); None when no sentence cites a passage (a "not in your documents" answer)."""
    checked = [c for c in check_answer(answer, passages) if c.cited]
    return sum(c.supported for c in checked) / len(checked) if checked else None


def ask(wb: Workbench, ds: BeirDataset, k: int = 5, log: Callable[[str], None] | None = print) -> list[ChatRecord]:
    """Ingest the set (once) and ask each question with reference answers in a fresh chat session."""
    import time

    ingest_dataset(wb.library, ds)
    site = EVAL_SITE_PREFIX + ds.name
    doc_of_source = {ds.source_of(d["_id"]): d["_id"] for d in ds.corpus}
    text_of = {d["_id"]: d["text"] for d in ds.corpus}
    qids = [q for q in ds.judged_queries if ds.answers.get(q)]
    records = []
    for n, qid in enumerate(qids, 1):
        session = f"eval-{uuid.uuid4().hex[:12]}"
        started = time.perf_counter()
        turn = wb.chat(ds.queries[qid], session_id=session, k=k, site_id=site)
        latency = time.perf_counter() - started
        wb.chat_reset(session)  # evaluation turns leave no chat history behind
        relevant = list(ds.qrels[qid])
        records.append(ChatRecord(
            query_id=qid, question=ds.queries[qid], answer=turn.answer, references=list(ds.answers[qid]),
            retrieved_ids=[doc_of_source.get(s.source, s.source) for s in turn.sources],
            retrieved_contexts=[s.text for s in turn.sources], reference_ids=relevant,
            reference_contexts=[text_of[d] for d in relevant if d in text_of], latency_s=latency,
            flags=dict(turn.flags)))
        if log and (n % 25 == 0 or n == len(qids)):
            log(f"{n}/{len(qids)} chat turns")
    return records


def _ragas_no_llm_metrics() -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # ID-based and non-LLM context metrics exist only in ragas' classic API in 0.4.3.
        from ragas.metrics import (
            IDBasedContextPrecision, IDBasedContextRecall, NonLLMContextPrecisionWithReference, NonLLMContextRecall,
        )
        from ragas.metrics.collections import NonLLMStringSimilarity
    return {"id_context_precision": IDBasedContextPrecision(), "id_context_recall": IDBasedContextRecall(),
            "context_precision": NonLLMContextPrecisionWithReference(), "context_recall": NonLLMContextRecall(),
            "string_similarity": NonLLMStringSimilarity()}


def outside_event_loop(fn: Callable[[], Any]) -> Any:
    """Call `fn` in a worker thread when an event loop is running here (Jupyter), else directly.

    ragas' sync `score()` refuses to run inside a running loop, and a notebook always has one.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result()


def score_without_llm(records: list[ChatRecord]) -> pd.DataFrame:
    """Per-turn scores of the metrics that need no LLM (ragas plus answer containment)."""
    return outside_event_loop(lambda: _score_without_llm(records))


def _score_without_llm(records: list[ChatRecord]) -> pd.DataFrame:
    from ragas import SingleTurnSample

    metrics = _ragas_no_llm_metrics()
    rows = []
    for r in records:
        sample = SingleTurnSample(
            user_input=r.question, response=r.answer, reference=r.references[0],
            retrieved_contexts=r.retrieved_contexts or [""], reference_contexts=r.reference_contexts,
            retrieved_context_ids=r.retrieved_ids, reference_context_ids=r.reference_ids)
        row: dict[str, Any] = {"query_id": r.query_id, "question": r.question, "reference": r.references[0],
                               "answer": r.answer[:300], "sources": len(r.retrieved_ids), "latency_s": r.latency_s}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in ("id_context_precision", "id_context_recall", "context_precision", "context_recall"):
                # with no source cited there is nothing to score: precision and recall are 0
                row[name] = float(metrics[name].single_turn_score(sample)) if r.retrieved_ids else 0.0
            # the best match over the reference answers (JSQuAD lists several spellings)
            row["string_similarity"] = max(float(metrics["string_similarity"].score(reference=ref, response=r.answer).value)
                                           for ref in r.references)
        row["answer_contains_reference"] = answer_contains_reference(r.answer, r.references)
        rows.append(row)
    return pd.DataFrame(rows)


def summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean of each metric over the turns, one row per metric."""
    present = [m for m in (*NO_LLM_METRICS, "faithfulness", "answer_relevancy") if m in scores]
    return pd.DataFrame({"metric": present, "mean": [float(scores[m].mean()) for m in present],
                         "turns": [int(scores[m].notna().sum()) for m in present]})


def llm_metrics_status(wb: Workbench) -> tuple[bool, str]:
    """(available, note): faithfulness and answer relevancy need a generative RAG_LLM served over the OpenAI API."""
    llm = wb.settings.llm
    if llm == "openai":
        return True, f"Judge LLM: {wb.llm.describe()} (RAG_LLM=openai)."
    if llm == "extractive":
        return False, ("Faithfulness and answer relevancy need a judge LLM; RAG_LLM=extractive has none. "
                       "Set RAG_LLM=openai with RAG_LLM_BASE_URL and RAG_LLM_MODEL (LM Studio, Ollama, vLLM...) "
                       "or RAG_LLM_API_KEY, then rerun this notebook.")
    return False, (f"RAG_LLM={llm} runs in-process and has no OpenAI-compatible endpoint for ragas to call; "
                   "serve the model (e.g. llama.cpp server) and use RAG_LLM=openai to score faithfulness.")


def _ragas_embeddings(embedder: Any) -> Any:
    from ragas.embeddings.base import BaseRagasEmbedding

    class WorkbenchEmbeddings(BaseRagasEmbedding):
        """The workbench's own embedder, so answer relevancy compares questions in our vector space."""

        def embed_text(self, text: str, **kwargs: Any) -> list[float]:
            return list(embedder.get_query_embedding(text))

        async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
            return self.embed_text(text)

    return WorkbenchEmbeddings()


def score_with_llm(wb: Workbench, records: list[ChatRecord]) -> pd.DataFrame:
    """Faithfulness and answer relevancy per turn, judged by the configured OpenAI-compatible LLM."""
    return outside_event_loop(lambda: _score_with_llm(wb, records))


def _score_with_llm(wb: Workbench, records: list[ChatRecord]) -> pd.DataFrame:
    available, note = llm_metrics_status(wb)
    if not available:
        raise RuntimeError(note)
    from openai import OpenAI
    from ragas.llms import llm_factory
    from ragas.metrics.collections import AnswerRelevancy, Faithfulness

    s = wb.settings
    client = OpenAI(base_url=s.llm_base_url or s.openai_base_url or None,
                    api_key=s.llm_api_key or s.openai_api_key or os.environ.get("OPENAI_API_KEY", "not-needed"),
                    timeout=s.llm_timeout_sec)
    judge = llm_factory(s.llm_model or "gpt-4o-mini", client=client)
    faithfulness = Faithfulness(llm=judge)
    relevancy = AnswerRelevancy(llm=judge, embeddings=_ragas_embeddings(wb.embedder))
    rows = []
    for r in records:
        row: dict[str, Any] = {"query_id": r.query_id}
        for name, call in (("faithfulness", lambda: faithfulness.score(
                user_input=r.question, response=r.answer, retrieved_contexts=r.retrieved_contexts or [""])),
                           ("answer_relevancy", lambda: relevancy.score(user_input=r.question, response=r.answer))):
            try:
                row[name] = float(call().value)
            except Exception as exc:  # one unparsable judgement is reported per turn, not fatal to the run
                row[name] = None
                row[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        rows.append(row)
    return pd.DataFrame(rows)
