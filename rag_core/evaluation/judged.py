"""A user's own judged queries: relevance judgements over the documents of one site, scored by the runner.

Judgements come from the Search page (a hit marked relevant) or from an uploaded queries/qrels pair.
Each site's set lives under RAG_DATA_DIR/judged/<site>/ in BEIR layout: queries.jsonl (_id, text),
qrels.tsv (query-id, corpus-id, score) whose corpus ids are the stored sources (paths or URLs), and
corpus.jsonl listing those sources (ids and titles; the texts stay in the store). The evaluation runner
searches the site's stored documents (nothing is ingested) and reports the same metrics as on the
public sets.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from typing_extensions import TypedDict

from rag_core.errors import InvalidInput
from rag_core.evaluation.datasets import BeirDataset, load_beir
from rag_core.limits import MAX_QUERY_CHARS

MAX_JUDGED_QUERIES = 2_000  # a judged set is typed or marked by people: a few hundred queries at most
_LOCK = threading.Lock()    # one writer at a time per process (the app's sessions share it)

# A saved evaluation: the JSON of `rag eval` with its per-query rows (`EvalResult.to_dict(per_query=True)`);
# its metric keys name their cut-off (precision@5, hit@5), so they are not fixed names.
SavedEvaluation = dict[str, Any]


class JudgedQuery(TypedDict):
    id: str
    query: str
    relevant: list[str]  # the sources (paths or URLs) that answer it
    deleted: list[str]   # those of them the site no longer stores: no search can find them


class JudgedSet(TypedDict):
    """A site's judged queries, with counts and the folder that holds them in BEIR layout."""

    site_id: str
    folder: str
    queries: int
    judgements: int
    deleted_sources: int  # judged sources the site no longer stores
    items: list[JudgedQuery]


class DeletedJudgement(TypedDict):
    """A judged query some of whose relevant sources were deleted: scored on the rest, or left out (none left)."""

    query_id: str
    query: str
    deleted: list[str]
    scored: bool


# Which of these sources the site stores (a lookup in the store, passed in by the Workbench).
StoredSources = Callable[[list[str]], set[str]]


def judged_dir(data_dir: Path, site_id: str) -> Path:
    """The site's folder of judgements (a readable name plus a hash, so any site id is a safe folder)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", site_id)[:60]
    return Path(data_dir) / "judged" / f"{safe}-{hashlib.sha1(site_id.encode()).hexdigest()[:8]}"


def query_id(text: str) -> str:
    """A stable id for a query typed by a user: the same words (case and spaces aside) get the same id."""
    return "q" + hashlib.sha1(" ".join(text.lower().split()).encode()).hexdigest()[:12]


def _read(folder: Path) -> tuple[dict[str, str], dict[str, dict[str, int]], dict[str, str]]:
    """(queries, qrels, titles) of a site's set; empty when nothing was judged yet."""
    if not (folder / "qrels.tsv").is_file():
        return {}, {}, {}
    ds = load_beir(folder)
    return dict(ds.queries), {q: dict(r) for q, r in ds.qrels.items()}, {d["_id"]: d["title"] for d in ds.corpus}


def _write(folder: Path, queries: dict[str, str], qrels: dict[str, dict[str, int]], titles: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    judged = {d for rel in qrels.values() for d in rel}
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": titles.get(d, ""), "text": ""}, ensure_ascii=False) + "\n"
                for d in sorted(judged)), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in queries.items()
                if qrels.get(q)), encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore\n"] + [f"{q}\t{d}\t{s}\n" for q, rel in qrels.items() for d, s in rel.items()]
    (folder / "qrels.tsv").write_text("".join(rows), encoding="utf-8")


def judged_set(data_dir: Path, site_id: str, stored: StoredSources | None = None) -> JudgedSet:
    """The site's judged queries: [{id, query, relevant: [sources], deleted: [sources]}], with counts and the
    folder; `deleted` lists the relevant sources `stored` says the site no longer holds (none without it)."""
    folder = judged_dir(data_dir, site_id)
    queries, qrels, _ = _read(folder)
    judged = sorted({d for q in queries for d in qrels.get(q, {})})
    present = stored(judged) if stored is not None and judged else set(judged)
    rows = [JudgedQuery(id=q, query=queries[q], relevant=sorted(qrels[q]),
                        deleted=sorted(set(qrels[q]) - present)) for q in queries if qrels.get(q)]
    return {"site_id": site_id, "folder": str(folder), "queries": len(rows),
            "judgements": sum(len(r["relevant"]) for r in rows), "deleted_sources": len(set(judged) - present),
            "items": rows}


def without_deleted(ds: BeirDataset, stored: StoredSources) -> tuple[BeirDataset, list[DeletedJudgement]]:
    """The judged set with only the relevant sources the site still stores, and the queries that lost some.

    A query whose every relevant source is gone is left out: it could only count as a miss, which would
    blame search for a deletion."""
    judged = sorted({d for rel in ds.qrels.values() for d in rel})
    present = stored(judged) if judged else set()
    qrels: dict[str, dict[str, int]] = {}
    flagged: list[DeletedJudgement] = []
    for qid in ds.judged_queries:
        kept = {d: s for d, s in ds.qrels[qid].items() if d in present}
        if kept:
            qrels[qid] = kept
        if len(kept) < len(ds.qrels[qid]):
            flagged.append(DeletedJudgement(query_id=qid, query=ds.queries[qid], scored=bool(kept),
                                            deleted=sorted(set(ds.qrels[qid]) - present)))
    return replace(ds, qrels=qrels), flagged


def mark_relevant(data_dir: Path, site_id: str, query: str, source: str, title: str = "",
                  relevant: bool = True, stored: StoredSources | None = None) -> JudgedSet:
    """Record (or with relevant=False withdraw) that `source` answers `query`; returns the set's summary."""
    text = " ".join((query or "").split())
    if not text:
        raise InvalidInput("The query is empty; search for something first, then mark a hit relevant.")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"The query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}.")
    if not source or not source.strip():
        raise InvalidInput("The source is empty; mark a hit of the results list.")
    folder = judged_dir(data_dir, site_id)
    with _LOCK:
        queries, qrels, titles = _read(folder)
        qid = query_id(text)
        if relevant:
            queries.setdefault(qid, text)
            qrels.setdefault(qid, {})[source] = 1
            titles[source] = title or titles.get(source, "")
        else:
            qrels.get(qid, {}).pop(source, None)
        _write(folder, queries, qrels, titles)
    return judged_set(data_dir, site_id, stored)


def _parse_queries(data: bytes) -> dict[str, str]:
    """queries.jsonl (BEIR: {"_id", "text"} per line) or a TSV of id and text."""
    text = data.decode("utf-8-sig", errors="strict")
    queries: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                row = json.loads(line)
                qid, words = str(row["_id"]), str(row["text"])
            except (ValueError, KeyError, TypeError):
                raise InvalidInput(f"queries line {n} is not a JSON object with _id and text; write "
                                   '{"_id": "q1", "text": "your question"} per line.') from None
        else:
            parts = line.split("\t", 1)
            if len(parts) != 2:
                raise InvalidInput(f"queries line {n} has no tab; write one query per line as JSON "
                                   '({"_id": "q1", "text": "..."}) or as id<TAB>text.')
            qid, words = parts[0].strip(), parts[1].strip()
            if n == 1 and qid.lower() in ("_id", "id", "query-id", "query_id"):
                continue  # a header line
        words = " ".join(words.split())
        if not qid or not words:
            raise InvalidInput(f"queries line {n} has an empty id or text.")
        if len(words) > MAX_QUERY_CHARS:  # cut short, it would be scored as another query than the one judged
            raise InvalidInput(f"queries line {n} is {len(words)} characters; the limit of a query is "
                               f"{MAX_QUERY_CHARS}. Shorten it.")
        queries[qid] = words
    return queries


def _parse_qrels(data: bytes) -> dict[str, dict[str, int]]:
    """qrels.tsv: query-id, corpus-id, score (a header line is skipped; score 0 means not relevant)."""
    qrels: dict[str, dict[str, int]] = {}
    for n, row in enumerate(csv.reader(io.StringIO(data.decode("utf-8-sig")), delimiter="\t"), 1):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 3 or not row[2].strip().lstrip("-").isdigit():
            if n == 1:
                continue  # the header
            raise InvalidInput(f"qrels line {n} is not query-id<TAB>corpus-id<TAB>score (a whole number).")
        if int(row[2]) > 0:
            qrels.setdefault(row[0].strip(), {})[row[1].strip()] = int(row[2])
    return qrels


def import_judged(data_dir: Path, site_id: str, queries_file: bytes, qrels_file: bytes,
                  known_sources: StoredSources) -> JudgedSet:
    """Add an uploaded queries/qrels pair to the site's set; corpus ids must be sources stored in the site.

    `known_sources(candidates)` returns the candidates that are stored documents of the site.
    """
    queries, qrels = _parse_queries(queries_file), _parse_qrels(qrels_file)
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise InvalidInput(f"qrels name queries that the queries file lacks: {', '.join(missing[:5])}.")
    if not qrels:
        raise InvalidInput("The qrels file marks no document relevant (score above 0); nothing to evaluate.")
    sources = sorted({d for rel in qrels.values() for d in rel})
    unknown = sorted(set(sources) - known_sources(sources))
    if unknown:
        raise InvalidInput(f"{len(unknown)} corpus id(s) are no document of site '{site_id}': "
                           f"{', '.join(unknown[:3])}. Use the source paths or URLs shown in the Sources table.")
    folder = judged_dir(data_dir, site_id)
    with _LOCK:
        have_q, have_r, titles = _read(folder)
        by_text = {query_id(t): q for q, t in have_q.items()}
        for qid, rel in qrels.items():
            own = by_text.get(query_id(queries[qid])) or query_id(queries[qid])
            have_q.setdefault(own, queries[qid])
            have_r.setdefault(own, {}).update(rel)
        if len(have_q) > MAX_JUDGED_QUERIES:
            raise InvalidInput(f"The judged set would hold {len(have_q)} queries; the limit is {MAX_JUDGED_QUERIES}.")
        _write(folder, have_q, have_r, titles)
    return judged_set(data_dir, site_id, known_sources)


def load_judged(data_dir: Path, site_id: str) -> BeirDataset:
    """The site's judged set as a BeirDataset (InvalidInput when nothing is judged yet)."""
    folder = judged_dir(data_dir, site_id)
    queries, qrels, _ = _read(folder)
    if not any(qrels.values()):
        raise InvalidInput(f"Site '{site_id}' has no judged query yet: mark hits relevant on the Search page "
                           "or upload a queries/qrels pair.")
    return load_beir(folder)


def save_result(data_dir: Path, site_id: str, result: SavedEvaluation) -> None:
    """Keep the newest evaluation of the site's judged set per mode (results.json beside the set)."""
    path = judged_dir(data_dir, site_id) / "results.json"
    with _LOCK:
        saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        saved[result["mode"]] = {**result, "saved_at": dt.datetime.now(dt.timezone.utc).isoformat()}
        path.write_text(json.dumps(saved, ensure_ascii=False, indent=1, default=str), encoding="utf-8")


def saved_results(data_dir: Path, site_id: str) -> list[SavedEvaluation]:
    """The site's saved evaluations, one per mode."""
    path = judged_dir(data_dir, site_id) / "results.json"
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text(encoding="utf-8")).values())
    except ValueError:
        return []
