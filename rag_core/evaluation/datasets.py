"""BEIR-layout evaluation sets: corpus.jsonl, queries.jsonl, qrels.tsv (and answers.jsonl when present)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from rag_core.errors import InvalidInput

# The public sets the notebooks were written for (listed first); any other BEIR folder works too.
KNOWN_SETS = ("scifact", "jsquad", "ru_construction")


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


def eval_data_dir(root: str | Path | None = None) -> Path:
    """The folder of evaluation sets: `root` when given, else RAG_EVAL_DATA (default RAG_DATA_DIR/eval-data)."""
    if root is not None:
        return Path(root).expanduser()
    from rag_core.settings import load_settings

    return load_settings().eval_data_dir


def available_sets(root: str | Path | None = None) -> list[str]:
    """Names of the BEIR-layout sets in the evaluation folder (the public ones first, then by name)."""
    folder = eval_data_dir(root)
    found = _set_names(folder)
    if not found:
        raise missing_set_error(None, folder)
    return [s for s in KNOWN_SETS if s in found] + [s for s in found if s not in KNOWN_SETS]


def _set_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if (p / "corpus.jsonl").is_file()) if folder.is_dir() else []


def eval_set_dir(name: str, root: str | Path | None = None) -> Path:
    """One set's folder in the evaluation folder; a missing set raises InvalidInput saying how to get it."""
    folder = eval_data_dir(root)
    path = folder / name
    if not (path / "corpus.jsonl").is_file():
        raise missing_set_error(name, folder)
    return path


def find_eval_set(name_or_path: str | Path, root: str | Path | None = None) -> Path:
    """A BEIR folder given as a path, or as the bare name of a set in the evaluation folder."""
    path = Path(name_or_path).expanduser()
    if path.exists() or len(path.parts) != 1:
        return path
    return eval_set_dir(str(name_or_path), root)


def set_language(path: Path, queries: int = 20) -> str:
    """The language of a set's first queries: 'en', 'ru', 'ja' or 'other'."""
    from rag_core.textproc import detect_language

    texts = [str(r.get("text", "")) for r in _read_jsonl(path / "queries.jsonl")[:queries]]
    return detect_language(" ".join(texts))


def choose_set(preferred: str, language: str | None = None, require_answers: bool = False,
               root: str | Path | None = None) -> str:
    """`preferred` when the evaluation folder has it, else the first set in `language` (with answers if asked).

    The notebooks name the public set they were written for and still run on whatever sets
    RAG_EVAL_DATA holds, e.g. the small ones the tests write.
    """
    folder = eval_data_dir(root)
    names = available_sets(folder)
    for name in [preferred] + [n for n in names if n != preferred]:
        if name not in names or (require_answers and not (folder / name / "answers.jsonl").is_file()):
            continue
        if name == preferred or language is None or set_language(folder / name) == language:
            return name
    other = "another set" + (f" in language '{language}'" if language else "") + (
        " with reference answers (answers.jsonl)" if require_answers else "")
    raise InvalidInput(f"Neither '{preferred}' nor {other} is in {folder} (RAG_EVAL_DATA); it has "
                       f"{', '.join(names)}. {_how_to_get(preferred)}")


def _how_to_get(name: str | None) -> str:
    from rag_core.evaluation.fetch import DATASETS, NOT_FETCHABLE

    if name in NOT_FETCHABLE:
        return NOT_FETCHABLE[name]
    fetch = f"`rag eval fetch {name}`" if name in DATASETS else f"`rag eval fetch {' '.join(DATASETS)}`"
    return f"Download the public sets with {fetch}, or point RAG_EVAL_DATA at a folder of BEIR-layout sets."


def missing_set_error(name: str | None, folder: Path) -> InvalidInput:
    """The error for a set (or any set) missing from the evaluation folder: where it looked and how to get one."""
    found = _set_names(folder)
    what = f"No evaluation set '{name}'" if name else "No evaluation sets"
    has = f"; it has {', '.join(found)}" if found else ""
    return InvalidInput(f"{what} in {folder} (RAG_EVAL_DATA){has}. {_how_to_get(name)}")
