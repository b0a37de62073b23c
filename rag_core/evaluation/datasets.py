"""BEIR-layout evaluation sets: corpus.jsonl, queries.jsonl, qrels.tsv (and answers.jsonl when present)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from rag_core.errors import InvalidInput


@dataclass
class BeirDataset:
    """One evaluation set; `qrels` maps query id -> {doc id: relevance > 0}."""

    name: str
    path: Path
    corpus: list[dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    answers: dict[str, list[str]] = field(default_factory=dict)

    @property
    def judged_queries(self) -> list[str]:
        """Query ids that have at least one relevant document, in file order."""
        return [q for q in self.queries if self.qrels.get(q)]

    def source_of(self, doc_id: str) -> str:
        """The source name a corpus document is stored under."""
        return f"{self.name}/{doc_id}"


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path.name} line {n} is not valid JSON: {exc.msg}.") from None
    return rows


def load_beir(path: str | Path, max_docs: int | None = None) -> BeirDataset:
    """Read a BEIR folder; a missing file raises InvalidInput naming it and the expected layout."""
    root = Path(path).expanduser().resolve()
    needed = ["corpus.jsonl", "queries.jsonl", "qrels.tsv"]
    missing = [n for n in needed if not (root / n).is_file()]
    if missing:
        raise InvalidInput(
            f"{root} is not a BEIR-layout folder: missing {', '.join(missing)}. "
            "Expected corpus.jsonl (_id, title, text), queries.jsonl (_id, text) and qrels.tsv (query-id, corpus-id, score)."
        )
    corpus = [{"_id": str(r["_id"]), "title": r.get("title") or "", "text": r.get("text") or ""}
              for r in _read_jsonl(root / "corpus.jsonl")]
    queries = {str(r["_id"]): r["text"] for r in _read_jsonl(root / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels.tsv").open(encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) < 3 or not row[2].strip().lstrip("-").isdigit():
                continue  # header line or malformed
            if int(row[2]) > 0:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    answers: dict[str, list[str]] = {}
    if (root / "answers.jsonl").is_file():
        for r in _read_jsonl(root / "answers.jsonl"):
            qid = str(r.get("_id") or r.get("query_id") or r.get("id"))
            value = r.get("answers") or r.get("answer") or r.get("text") or []
            answers[qid] = value if isinstance(value, list) else [value]
    if max_docs is not None and len(corpus) > max_docs:
        # keep every judged document so the sample still measures something
        relevant = {d for rel in qrels.values() for d in rel}
        keep = [d for d in corpus if d["_id"] in relevant]
        rest = [d for d in corpus if d["_id"] not in relevant]
        corpus = (keep + rest)[: max(max_docs, len(keep))]
    return BeirDataset(name=root.name, path=root, corpus=corpus, queries=queries, qrels=qrels, answers=answers)


def shared_eval_dir() -> Path:
    """../shared/eval-data next to the repository (the sets are referenced, never copied)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "eval-data"
