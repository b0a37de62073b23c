"""Public evaluation sets turned into the BEIR layout `load_beir` reads.

The layout: corpus.jsonl ({"_id", "title", "text"} per line), queries.jsonl ({"_id", "text"}),
qrels.tsv (query-id, corpus-id, score, after a header line) and, for question-answering sets,
answers.jsonl ({"_id", "answers": [reference spans]}). Each converter reads the downloaded files
(by file name) and writes into an empty folder; the same input always gives the same bytes, so
the output can be pinned by checksum.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Callable, Iterable

from rag_core.errors import FetchError

Converter = Callable[[dict[str, Path], Path], None]
QRELS_HEADER = "query-id\tcorpus-id\tscore\n"


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """One JSON object per line, UTF-8 as is (not \\u escapes)."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_qrels(path: Path, pairs: Iterable[tuple[str, str, str]]) -> None:
    """qrels.tsv with its header line; Unix line ends whatever the source used."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(QRELS_HEADER)
        fh.writelines(f"{query}\t{doc}\t{score}\n" for query, doc, score in pairs)


def beir_zip(folder: str, split: str) -> Converter:
    """A BEIR archive (<folder>/corpus.jsonl, queries.jsonl, qrels/<split>.tsv) cut to one split.

    The corpus is copied byte for byte; only the queries judged in the split's qrels are kept
    (BEIR ships every split's queries in one file), as {"_id", "text"}.
    """
    members = {"corpus": f"{folder}/corpus.jsonl", "queries": f"{folder}/queries.jsonl",
               "qrels": f"{folder}/qrels/{split}.tsv"}

    def convert(files: dict[str, Path], out: Path) -> None:
        (archive,) = files.values()
        with zipfile.ZipFile(archive) as zf:
            missing = [m for m in members.values() if m not in zf.namelist()]
            if missing:
                raise FetchError(f"{archive.name} lacks {', '.join(missing)}: it is not BEIR's '{folder}' archive.")
            with zf.open(members["corpus"]) as src, (out / "corpus.jsonl").open("wb") as dst:
                shutil.copyfileobj(src, dst)
            rows = [line.split("\t") for line in zf.read(members["qrels"]).decode("utf-8").splitlines()]
            pairs = [(q, d, s) for q, d, s in (r[:3] for r in rows if len(r) >= 3) if s.strip().lstrip("-").isdigit()]
            judged = {q for q, _, _ in pairs}
            queries = [json.loads(line) for line in zf.read(members["queries"]).decode("utf-8").splitlines() if line]
        write_jsonl(out / "queries.jsonl",
                    ({"_id": str(r["_id"]), "text": r["text"]} for r in queries if str(r["_id"]) in judged))
        write_qrels(out / "qrels.tsv", pairs)

    return convert


_QUESTION_ID = re.compile(r"^(?P<paragraph>.+)q\d+$")


def squad_paragraphs(questions: str, distractors: str) -> Converter:
    """SQuAD-format files as passage retrieval: one document per paragraph, queries from one file.

    `questions` gives the queries (each judges its own paragraph) and their reference answers;
    the paragraphs of `distractors` join the corpus without their questions. A context written
    "TITLE [SEP] text" (JSQuAD) is split into title and text; a paragraph's id is its questions'
    id without the trailing "q<n>" (JSQuAD's a<article>p<paragraph>q<n>).
    """

    def paragraphs(path: Path) -> Iterable[tuple[str, str, str, list[dict]]]:
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            for para in article["paragraphs"]:
                ids = {m.group("paragraph") for m in (_QUESTION_ID.match(qa["id"]) for qa in para["qas"]) if m}
                if len(ids) != 1:
                    raise FetchError(f"{path.name}: a paragraph of '{article['title']}' has question ids "
                                     f"{[qa['id'] for qa in para['qas']]}; expected <paragraph id>q<n>.")
                title, sep, text = para["context"].partition("[SEP]")
                if not sep:
                    title, text = article["title"], para["context"]
                yield ids.pop(), title.strip(), text.strip(), para["qas"]

    def convert(files: dict[str, Path], out: Path) -> None:
        corpus, queries, answers = [], [], []
        for name in (questions, distractors):
            for doc_id, title, text, qas in paragraphs(files[name]):
                corpus.append({"_id": doc_id, "title": title, "text": text})
                if name == questions:
                    for qa in qas:
                        queries.append((qa["id"], qa["question"].strip(), doc_id))
                        answers.append({"_id": qa["id"], "answers": sorted({a["text"] for a in qa["answers"]})})
        write_jsonl(out / "corpus.jsonl", corpus)
        write_jsonl(out / "queries.jsonl", ({"_id": q, "text": text} for q, text, _ in queries))
        write_qrels(out / "qrels.tsv", ((q, doc, "1") for q, _, doc in queries))
        write_jsonl(out / "answers.jsonl", answers)

    return convert
