"""The first-run sample corpus: the project's own README.md and docs/*.md, kept in a site of its own.

The sample lives in the site `sample` (security/ids.py SAMPLE_SITE), which "every site" leaves out like
the evaluation sites, so its passages never come back among a user's own sources; removing it is
deleting that site's documents.
"""

from __future__ import annotations

from pathlib import Path

# The source checkout's root: its README.md and docs/ are the first-run sample corpus.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def sample_corpus_paths(root: Path = PROJECT_ROOT) -> list[Path]:
    """README.md and docs/*.md of the project (what the app's first-run button ingests)."""
    paths = [root / "README.md"] if (root / "README.md").is_file() else []
    return paths + sorted((root / "docs").glob("*.md"))


def sample_sources(root: Path = PROJECT_ROOT) -> list[str]:
    """The sample's paths as the ingestion stores them (resolved, POSIX), with the README's."""
    return [p.resolve().as_posix() for p in sample_corpus_paths(root)]
