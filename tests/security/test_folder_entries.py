"""Folder ingestion reads only regular files inside the folder: links out, FIFOs and sockets are left out."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from rag_core.ingest.pipeline import discover_files


def test_a_link_to_a_file_outside_the_folder_is_not_ingested(wb, site, stored_text, tmp_path: Path) -> None:
    secrets = tmp_path / "service"
    secrets.mkdir()
    (secrets / ".env").write_text("RAG_ADMIN_API_KEY=SECRETKEYZ9Q81\n", encoding="utf-8")
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "guide.md").write_text("# Guide\n\nHybrid search fuses dense and full-text ranks.\n", encoding="utf-8")
    (folder / "keys.txt").symlink_to(secrets / ".env")
    (folder / "sub" / "again.md").symlink_to(folder / "guide.md")  # inside the folder: read once, as its target
    (folder / "gone.md").symlink_to(tmp_path / "missing.md")

    report = wb.ingest_paths([folder], site_id=site)

    assert "SECRETKEYZ9Q81" not in stored_text(site)
    outcomes = {Path(o.source).name: o for o in report.outcomes}
    assert outcomes["keys.txt"].status == "skipped" and "outside the folder" in outcomes["keys.txt"].reason
    assert outcomes["gone.md"].status == "skipped" and "points nowhere" in outcomes["gone.md"].reason
    assert outcomes["guide.md"].status == "indexed" and report.count("indexed") == 1


def test_a_fifo_in_the_folder_does_not_stop_the_run(wb, site, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe embedded PostgreSQL starts by itself.\n", encoding="utf-8")
    fifo = folder / "pipe.md"
    os.mkfifo(fifo)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(report=wb.ingest_paths([folder], site_id=site)),
                              daemon=True)
    worker.start()
    worker.join(300)
    if worker.is_alive():  # the run waits on the FIFO for a writer: give it one so the thread ends
        with open(fifo, "wb"):
            pass
        worker.join(60)
    assert "report" in result, "the run blocked opening the FIFO"
    report = result["report"]
    outcome = next(o for o in report.outcomes if o.source.endswith("pipe.md"))
    assert outcome.status == "skipped" and "FIFO" in outcome.reason
    assert report.count("indexed") == 1


def test_a_socket_is_named_and_an_explicit_fifo_fails(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(folder / "agent.md"))
        os.mkfifo(tmp_path / "lone.txt")
        files, problems = discover_files([folder, tmp_path / "lone.txt"])
    finally:
        server.close()
    assert files == []
    reasons = {Path(p.source).name: (p.status, p.reason) for p in problems}
    assert reasons["agent.md"][0] == "skipped" and "a socket" in reasons["agent.md"][1]
    assert reasons["lone.txt"][0] == "failed" and "FIFO" in reasons["lone.txt"][1]


def test_a_folder_s_bytes_are_not_all_held_at_once(tmp_path: Path) -> None:
    import tracemalloc

    from rag_core.ingest.pipeline import file_item

    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(8):
        (folder / f"part{n}.txt").write_bytes(b"Hybrid retrieval fuses dense and sparse ranks. " * 40_000)  # 1.9 MB
    files, _ = discover_files([folder])
    tracemalloc.start()
    try:
        items = [file_item(path, "t", 10_000_000) for path in files]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(items) == 8
    assert held < 2_000_000, f"the items hold {held:,} bytes: every file's content, not one at a time"
    assert "fuses dense" in items[3].load().text


def test_a_file_rewritten_during_the_run_is_failed_and_its_stored_version_kept(wb, site, stored_text, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nAlpha stays the same between runs.\n", encoding="utf-8")
    (folder / "b.md").write_text("# Beta\n\nBeta version one is stored first.\n", encoding="utf-8")
    assert wb.ingest_paths([folder], site_id=site).count("indexed") == 2
    (folder / "b.md").write_text("# Beta\n\nBeta version two is being written.\n", encoding="utf-8")

    def rewrite(progress) -> None:  # after a.md is found unchanged, before b.md is loaded
        (folder / "b.md").write_text("# Beta\n\nBeta version three replaced it mid-run.\n", encoding="utf-8")

    report = wb.ingest_paths([folder], site_id=site, progress=rewrite)
    outcome = next(o for o in report.outcomes if o.source.endswith("b.md"))
    assert outcome.status == "failed" and "changed while it was being ingested" in outcome.reason
    text = stored_text(site)
    assert "version one" in text and "version two" not in text and "version three" not in text


def test_a_file_deleted_during_the_run_is_failed_by_name(wb, site, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nAlpha stays the same between runs.\n", encoding="utf-8")
    assert wb.ingest_paths([folder], site_id=site).count("indexed") == 1
    (folder / "b.md").write_text("# Beta\n\nBeta arrives and leaves during the run.\n", encoding="utf-8")

    def remove(progress) -> None:  # after a.md is found unchanged, before b.md is loaded
        (folder / "b.md").unlink(missing_ok=True)

    report = wb.ingest_paths([folder], site_id=site, progress=remove)
    outcome = next(o for o in report.outcomes if o.source.endswith("b.md"))
    assert outcome.status == "failed" and "moved or deleted during the run" in outcome.reason
