"""The CLI prints documents' names and text without their terminal escape sequences or rich markup."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rag_core.cli import app

runner = CliRunner()

# Sets the terminal's title, clears the screen, hides text, and a C1 CSI (one code point).
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[8m\x9b31m"


def hostile_folder(root: Path) -> Path:
    folder = root / "docs"
    folder.mkdir()
    body = " ".join(["Quarterly cleanup figures for the warehouse and its loading docks."] * 12)
    (folder / "report.md").write_text(f"# Quarterly {ESCAPES}cleanup report\n\n{body} {ESCAPES}hidden words.\n",
                                      encoding="utf-8")
    (folder / f"name{ESCAPES}.md").write_text(f"# Named\n\n{body}\n", encoding="utf-8")
    (folder / "broken[reverse][link=https:evil.example]click.md").write_text("", encoding="utf-8")
    return folder


def test_ingest_search_and_listing_print_no_escape_sequences(cli_env, site, tmp_path: Path) -> None:
    folder = hostile_folder(tmp_path)

    ingest = runner.invoke(app, ["ingest", str(folder), "--site", site])
    assert ingest.exit_code == 0, ingest.output
    assert "broken[reverse][link=https:evil.example]click.md" in ingest.stdout  # shown as written
    outputs = [ingest.stdout]
    for fmt in ("text", "markdown"):
        found = runner.invoke(app, ["search", "quarterly cleanup report", "--site", site, "--format", fmt])
        assert found.exit_code == 0, found.output
        assert "Quarterly" in found.stdout
        outputs.append(found.stdout)
    listing = runner.invoke(app, ["status", "--sources", "--site", site])
    assert listing.exit_code == 0, listing.output
    outputs.append(listing.stdout)
    for output in outputs:
        assert not any(ch in output for ch in "\x1b\x07\x9b"), repr(output[:400])
    assert "\\x1b]0;owned" in outputs[1]  # the sequence is visible as text, not lost


def test_a_folder_of_many_broken_files_lists_twenty_and_counts_the_rest(cli_env, site, tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    for n in range(300):
        (folder / f"e{n:03d}.md").write_bytes(b"")
    (folder / "ok.md").write_text("# Ok\n\nOne readable note.\n", encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(folder), "--site", site])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("File is empty") == 20
    assert "... and 280 more failed (`--json` lists them all)" in result.stdout
