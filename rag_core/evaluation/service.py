"""Evaluation of one store: BEIR sets through the search service, and each site's own judged queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from rag_core.errors import InvalidInput
from rag_core.evaluation import judged
from rag_core.evaluation.datasets import BeirDataset
from rag_core.evaluation.judged import JudgedSet, SavedEvaluation
from rag_core.evaluation.runner import EvalResult, evaluate_dataset, ingest_dataset, run_eval
from rag_core.ingest import store as stored
from rag_core.ingest.service import DocumentService
from rag_core.search.service import SearchEngine
from rag_core.security.ids import DEFAULT_SITE


class EvaluationService:
    """Scores retrieval: a BEIR set ingested into its own `eval:` site, or a site's judged queries."""

    def __init__(self, documents: DocumentService, search: Callable[[], SearchEngine]) -> None:
        """``search`` gives the store's current search engine (it is rebuilt when the embedder changes)."""
        self.documents = documents
        self.store = documents.store
        self._search = search

    # ----- BEIR sets -----
    def ingest(self, ds: BeirDataset, progress: Callable[[Any], None] | None = None) -> dict[str, Any]:
        """Put a set's corpus into `eval:<name>` (unchanged documents are skipped); the ingest summary."""
        return ingest_dataset(self.documents, ds, progress)

    def evaluate(self, ds: BeirDataset, *, mode: str = "hybrid", k: int = 5, engine: SearchEngine | None = None,
                 **options: Any) -> EvalResult:
        """Score a loaded set's judged queries (ingesting it once); `runner.evaluate_dataset`'s options."""
        return evaluate_dataset(self.documents, engine or self._search(), ds, mode=mode, k=k, **options)

    def run(self, path: str | Path, *, mode: str = "hybrid", k: int = 5, **options: Any) -> EvalResult:
        """Ingest a BEIR set (a folder, or a set name in RAG_EVAL_DATA) once and score its judged queries."""
        return run_eval(self.documents, self._search(), path, mode=mode, k=k, **options)

    # ----- a site's own judged queries -----
    def _stored_sources(self, site_id: str) -> Callable[[list[str]], set[str]]:
        """Which of some sources the site stores (judgements name sources that may since have been deleted)."""
        def present(candidates: list[str]) -> set[str]:
            return stored.stored_sources(self.store.db, site_id, candidates)

        return present

    def judged_queries(self, site_id: str = DEFAULT_SITE) -> JudgedSet:
        """The site's judged queries (marked on the Search page or uploaded), kept in BEIR layout; each lists
        the relevant sources deleted from the site since (`deleted`)."""
        return judged.judged_set(self.store.settings.data_dir, site_id, self._stored_sources(site_id))

    def mark_relevant(self, query: str, source: str, site_id: str = DEFAULT_SITE, title: str = "",
                      relevant: bool = True) -> JudgedSet:
        """Judge a search hit: `source` answers `query` (relevant=False withdraws the judgement)."""
        return judged.mark_relevant(self.store.settings.data_dir, site_id, query, source, title, relevant,
                                    stored=self._stored_sources(site_id))

    def import_judged_queries(self, queries: bytes, qrels: bytes, site_id: str = DEFAULT_SITE) -> JudgedSet:
        """Add a queries file (BEIR queries.jsonl, or id<TAB>text) and a qrels.tsv whose corpus ids are the
        site's stored sources to the site's judged set."""
        return judged.import_judged(self.store.settings.data_dir, site_id, queries, qrels,
                                    self._stored_sources(site_id))

    def evaluate_judged(self, site_id: str = DEFAULT_SITE, mode: str = "hybrid", k: int = 5,
                        progress: Callable[[int, int], None] | None = None) -> SavedEvaluation:
        """Score the site's judged queries against its stored documents; the result (the JSON of `rag eval`,
        per query included) is kept for the Analytics page.

        A relevant source deleted from the site since it was judged is no miss of search: a query is scored
        on its relevant sources still stored, one with none left is not scored, and both are listed under
        `deleted_judgements`."""
        data_dir = self.store.settings.data_dir
        ds, deleted = judged.without_deleted(judged.load_judged(data_dir, site_id), self._stored_sources(site_id))
        if not ds.judged_queries:
            raise InvalidInput(f"Every judged query of site '{site_id}' names only sources deleted from the site "
                               f"since ({', '.join(sorted({d for j in deleted for d in j['deleted']})[:3])}); "
                               "ingest them again or judge hits of the stored documents on the Search page.")
        result = evaluate_dataset(self.documents, self._search(), ds, mode=mode, k=k, query_progress=progress,
                                  site_id=site_id)
        data = {**result.to_dict(per_query=True), "dataset": f"your judged queries ({site_id})",
                "deleted_judgements": deleted}
        judged.save_result(data_dir, site_id, data)
        return data

    def judged_results(self, site_id: str = DEFAULT_SITE) -> list[SavedEvaluation]:
        """The saved evaluations of the site's judged queries, one per mode."""
        return judged.saved_results(self.store.settings.data_dir, site_id)
