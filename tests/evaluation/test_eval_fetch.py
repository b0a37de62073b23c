"""`rag eval fetch`: downloads from a real HTTP server on loopback, checked, converted, written in one rename.

The tests pass their own DatasetSpec (this server's address, checksums of files built here); the
pinned specs are only read, never changed.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rag_core.cli import app
from rag_core.errors import ChecksumMismatch, FetchError, InvalidInput
from rag_core.evaluation import fetch
from rag_core.evaluation.conversions import beir_zip, squad_paragraphs
from rag_core.evaluation.datasets import load_beir
from rag_core.evaluation.fetch import DatasetSpec, Download, fetch_dataset

runner = CliRunner()


class Served:
    """What the server answers per path: a body, and how to misbehave with it."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[bytes, str]] = {}   # path -> (body, "ok" | "cut" | "unannounced")
        self.requests: list[str] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        served: Served = self.server.served  # type: ignore[attr-defined]
        served.requests.append(self.path)
        if self.path not in served.routes:
            self.send_error(404)
            return
        body, how = served.routes[self.path]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if how != "unannounced":   # without Content-Length the body simply runs until the connection closes
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # "cut": the connection drops halfway through the announced body
        self.wfile.write(body[: len(body) // 2] if how == "cut" else body)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Served]]:
    """A real HTTP server on 127.0.0.1 at a free port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.served = Served()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.served  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


# A BEIR archive the way BEIR ships one: metadata fields, every split's queries in one file, CRLF qrels.
CORPUS = jsonl([
    {"_id": "d1", "title": "Fire alarms", "text": "Automatic fire alarms in public buildings.", "metadata": {}},
    {"_id": "d2", "title": "Roads", "text": "Design of rural roads with low traffic.", "metadata": {}},
    {"_id": "d3", "title": "Water", "text": "Pumping stations of water supply networks.", "metadata": {}},
])
QUERIES = jsonl([{"_id": "1", "text": "fire alarm systems", "metadata": {"d1": [{"label": "SUPPORT"}]}},
                 {"_id": "2", "text": "a training question", "metadata": {}},
                 {"_id": "3", "text": "water pumps", "metadata": {}}])
EXPECTED_QUERIES = jsonl([{"_id": "1", "text": "fire alarm systems"}, {"_id": "3", "text": "water pumps"}])
EXPECTED_QRELS = b"query-id\tcorpus-id\tscore\n1\td1\t1\n3\td3\t1\n"


def beir_archive() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("tiny/corpus.jsonl", CORPUS)
        zf.writestr("tiny/queries.jsonl", QUERIES)
        zf.writestr("tiny/qrels/test.tsv", b"query-id\tcorpus-id\tscore\r\n1\td1\t1\r\n3\td3\t1\r\n")
        zf.writestr("tiny/qrels/train.tsv", b"query-id\tcorpus-id\tscore\r\n2\td2\t1\r\n")
    return buf.getvalue()


ARCHIVE = beir_archive()


def tiny_spec(base: str, path: str = "/tiny.zip", **download: Any) -> DatasetSpec:
    item = Download(url=base + path, filename="tiny.zip", size=len(ARCHIVE), sha256=sha256(ARCHIVE),
                    md5=hashlib.md5(ARCHIVE).hexdigest())
    return DatasetSpec(name="tiny", summary="A three-document BEIR archive built by the test.", licence="CC0",
                       downloads=(replace(item, **download),), convert=beir_zip("tiny", split="test"),
                       outputs={"corpus.jsonl": sha256(CORPUS), "queries.jsonl": sha256(EXPECTED_QUERIES),
                                "qrels.tsv": sha256(EXPECTED_QRELS)})


def assert_nothing_left(root: Path) -> None:
    assert not root.exists() or list(root.iterdir()) == [], list(root.iterdir())


def test_a_set_is_downloaded_with_progress_checked_and_converted_to_beir_layout(server, tmp_path):
    base, served = server
    served.routes["/tiny.zip"] = (ARCHIVE, "ok")
    seen: list[tuple[str, int, int]] = []
    result = fetch_dataset(tiny_spec(base), tmp_path / "sets", progress=lambda *p: seen.append(p))
    assert result.path == tmp_path / "sets" / "tiny" and not result.already_present
    assert result.downloaded_bytes == len(ARCHIVE)
    assert seen[-1] == ("tiny.zip", len(ARCHIVE), len(ARCHIVE))
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
    # the corpus as shipped, only the test split's queries, qrels with Unix line ends
    assert (result.path / "corpus.jsonl").read_bytes() == CORPUS
    assert (result.path / "queries.jsonl").read_bytes() == EXPECTED_QUERIES
    assert (result.path / "qrels.tsv").read_bytes() == EXPECTED_QRELS
    assert "Licence: CC0" in (result.path / "SOURCE.txt").read_text()
    ds = load_beir(result.path)
    assert ds.queries == {"1": "fire alarm systems", "3": "water pumps"}
    assert ds.qrels == {"1": {"d1": 1}, "3": {"d3": 1}}
    assert sorted(p.name for p in (tmp_path / "sets").iterdir()) == ["tiny"]   # no work folder left


def test_a_set_already_there_and_intact_is_not_downloaded_again(server, tmp_path):
    base, served = server
    served.routes["/tiny.zip"] = (ARCHIVE, "ok")
    fetch_dataset(tiny_spec(base), tmp_path)
    before = len(served.requests)
    again = fetch_dataset(tiny_spec(base), tmp_path)
    assert again.already_present and again.downloaded_bytes == 0
    assert len(served.requests) == before


def test_a_changed_copy_in_the_way_is_left_untouched(server, tmp_path):
    base, served = server
    served.routes["/tiny.zip"] = (ARCHIVE, "ok")
    fetch_dataset(tiny_spec(base), tmp_path)
    (tmp_path / "tiny" / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n1\td2\t1\n")
    with pytest.raises(InvalidInput, match="exists but is not the pinned tiny \\(qrels.tsv differs"):
        fetch_dataset(tiny_spec(base), tmp_path)
    assert (tmp_path / "tiny" / "qrels.tsv").read_text().endswith("1\td2\t1\n")


@pytest.mark.parametrize("wrong", [{"sha256": "0" * 64}, {"md5": "0" * 32}])
def test_a_checksum_mismatch_is_refused_and_nothing_is_written(server, tmp_path, wrong):
    base, served = server
    served.routes["/tiny.zip"] = (ARCHIVE, "ok")
    with pytest.raises(ChecksumMismatch) as err:
        fetch_dataset(tiny_spec(base, **wrong), tmp_path / "sets")
    assert "tiny.zip" in err.value.message and "is not the pinned file" in err.value.message
    assert "Nothing was kept; run the command again" in err.value.message
    assert_nothing_left(tmp_path / "sets")


def test_a_conversion_that_does_not_give_the_pinned_files_is_refused(server, tmp_path):
    base, served = server
    served.routes["/tiny.zip"] = (ARCHIVE, "ok")
    spec = replace(tiny_spec(base), outputs={**tiny_spec(base).outputs, "qrels.tsv": "1" * 64})
    with pytest.raises(ChecksumMismatch, match="did not give the pinned files \\(qrels.tsv differs"):
        fetch_dataset(spec, tmp_path)
    assert_nothing_left(tmp_path)


def test_a_missing_file_an_interrupted_and_an_oversized_download_are_reported(server, tmp_path):
    base, served = server
    with pytest.raises(FetchError, match="answered HTTP 404 Not Found. Nothing was kept"):
        fetch_dataset(tiny_spec(base, "/gone.zip"), tmp_path)
    served.routes["/cut.zip"] = (ARCHIVE, "cut")
    cut_off = f"cut.zip failed after [0-9,]+ of {len(ARCHIVE):,} bytes \\(RemoteProtocolError"
    with pytest.raises(FetchError, match=cut_off):
        fetch_dataset(tiny_spec(base, "/cut.zip"), tmp_path)
    bigger = ARCHIVE + b"\0" * 100_000
    served.routes["/big.zip"] = (bigger, "ok")
    too_big = f"sends more than the pinned {len(ARCHIVE):,} bytes \\({len(bigger):,} so far"
    with pytest.raises(FetchError, match=too_big):
        fetch_dataset(tiny_spec(base, "/big.zip"), tmp_path)
    served.routes["/big-unannounced.zip"] = (bigger, "unannounced")   # refused as the bytes arrive
    with pytest.raises(FetchError, match=f"sends more than the pinned {len(ARCHIVE):,} bytes"):
        fetch_dataset(tiny_spec(base, "/big-unannounced.zip"), tmp_path)
    served.routes["/short.zip"] = (ARCHIVE[:-10], "unannounced")
    with pytest.raises(FetchError, match="ended after .* bytes: the download was cut off"):
        fetch_dataset(tiny_spec(base, "/short.zip"), tmp_path)
    assert_nothing_left(tmp_path)


def test_squad_paragraphs_become_documents_and_questions_keep_their_answers(tmp_path):
    def squad(paragraphs: list[tuple[str, list[tuple[str, str, list[str]]]]]) -> dict:
        return {"data": [{"title": "梅雨", "paragraphs": [
            {"context": context, "qas": [{"id": qid, "question": q, "answers": [{"text": a} for a in answers]}
                                         for qid, q, answers in qas]} for context, qas in paragraphs]}]}

    (tmp_path / "valid.json").write_text(json.dumps(squad([
        ("梅雨 [SEP] 梅雨は雨季の一種である。", [("a1p0q0", "梅雨とは何季の一種か? ", ["雨季", "雨季", "雨季の一種"])]),
        ("梅雨 [SEP] 北海道には梅雨がない。", [("a1p1q0", "梅雨がないのはどこか。", ["北海道"]),
                                             ("a1p1q1", "北海道に何がないか。", ["梅雨"])]),
    ]), ensure_ascii=False), encoding="utf-8")
    (tmp_path / "test.json").write_text(json.dumps(squad([
        ("梅雨 [SEP] 沖縄の梅雨は五月に始まる。", [("a2p0q0", "沖縄の梅雨はいつ始まるか。", ["五月"])]),
    ]), ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    squad_paragraphs(questions="valid.json", distractors="test.json")(
        {"valid.json": tmp_path / "valid.json", "test.json": tmp_path / "test.json"}, out)
    ds = load_beir(out)
    assert ds.corpus == [{"_id": "a1p0", "title": "梅雨", "text": "梅雨は雨季の一種である。"},
                         {"_id": "a1p1", "title": "梅雨", "text": "北海道には梅雨がない。"},
                         {"_id": "a2p0", "title": "梅雨", "text": "沖縄の梅雨は五月に始まる。"}]   # a distractor
    assert ds.queries == {"a1p0q0": "梅雨とは何季の一種か?", "a1p1q0": "梅雨がないのはどこか。",
                          "a1p1q1": "北海道に何がないか。"}
    assert ds.qrels == {"a1p0q0": {"a1p0": 1}, "a1p1q0": {"a1p1": 1}, "a1p1q1": {"a1p1": 1}}
    assert ds.answers["a1p0q0"] == ["雨季", "雨季の一種"]   # distinct spans, in a fixed order


def test_the_pinned_sets_name_exact_sizes_and_checksums_of_fixed_versions():
    assert set(fetch.DATASETS) == {"scifact", "jsquad"} and "ru_construction" in fetch.NOT_FETCHABLE
    scifact = fetch.DATASETS["scifact"].downloads[0]
    assert scifact.url.endswith("/BEIR/datasets/scifact.zip") and scifact.md5 == "5f7d1de60b170fc8027bb7898e2efca1"
    assert all(d.url.startswith(f"https://raw.githubusercontent.com/yahoojapan/JGLUE/{fetch.JGLUE_COMMIT}/")
               for d in fetch.DATASETS["jsquad"].downloads)
    for spec in fetch.DATASETS.values():
        assert {"corpus.jsonl", "queries.jsonl", "qrels.tsv"} <= set(spec.outputs)
        for d in spec.downloads:
            assert d.url.startswith("https://") and d.size > 0 and len(d.sha256) == 64


@pytest.fixture
def cli_fetch(monkeypatch: pytest.MonkeyPatch, server, tmp_path) -> str:
    """`rag eval fetch tiny` reads the test's spec from the registry; no developer .env is read."""
    base, served = server
    served.routes["/tiny.zip"] = (ARCHIVE, "ok")
    monkeypatch.setitem(fetch.DATASETS, "tiny", tiny_spec(base))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_EVAL_DATA", str(tmp_path / "configured"))
    return base


def test_cli_fetches_with_a_progress_bar_then_finds_the_set_intact(cli_fetch, tmp_path):
    first = runner.invoke(app, ["eval", "fetch", "tiny"])
    assert first.exit_code == 0, first.output
    assert f"tiny: {len(ARCHIVE):,} bytes downloaded and checked, BEIR layout in {tmp_path / 'configured' / 'tiny'}" \
        in first.stdout
    assert re.search(f"tiny: tiny.zip ━+ {len(ARCHIVE)}/{len(ARCHIVE)} bytes", first.stderr), first.stderr   # the bar
    again = runner.invoke(app, ["eval", "fetch", "tiny"])
    assert again.exit_code == 0 and "already in" in again.stdout and "nothing downloaded" in again.stdout
    elsewhere = runner.invoke(app, ["eval", "fetch", "tiny", "--dest", str(tmp_path / "other")])
    assert elsewhere.exit_code == 0 and (tmp_path / "other" / "tiny" / "corpus.jsonl").is_file()
    assert f"Set RAG_EVAL_DATA={tmp_path / 'other'}" in elsewhere.stdout


def one_line(result: Any) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def test_cli_refuses_the_evaluation_only_set_and_reports_a_failed_download(cli_fetch, monkeypatch, tmp_path):
    refused = runner.invoke(app, ["eval", "fetch", "ru_construction"])
    assert refused.exit_code == 1 and "evaluation only and is not redistributed" in one_line(refused)
    unknown = runner.invoke(app, ["eval", "fetch", "tiny", "nope"])   # every name is checked before a download
    assert unknown.exit_code == 1
    assert "Unknown set 'nope'; `rag eval fetch` knows scifact, jsquad, tiny" in one_line(unknown)
    assert not (tmp_path / "configured").exists()
    monkeypatch.setitem(fetch.DATASETS, "tiny", tiny_spec(cli_fetch, "/gone.zip"))
    failed = runner.invoke(app, ["eval", "fetch", "tiny"])
    assert failed.exit_code == 1 and "Error (FETCH_ERROR)" in failed.output and "HTTP 404" in one_line(failed)
    assert "Traceback" not in failed.output
    assert_nothing_left(tmp_path / "configured")
