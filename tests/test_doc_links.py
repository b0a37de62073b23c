"""Every relative link in README.md and docs/*.md reaches an existing file, and its #anchor an existing heading."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The page without fenced code blocks and code spans, where brackets are not links."""
    return CODE.sub("", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lowercase, punctuation dropped, spaces to hyphens,
    a repeated heading numbered -1, -2..."""
    seen: Counter[str] = Counter()
    found = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{target}: no heading #{anchor} in {linked.name}")
    return problems


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    problems = {page.relative_to(ROOT).as_posix(): broken_links(page) for page in PAGES}
    assert not {page: found for page, found in problems.items() if found}


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading: yes\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-code-heading-yes) [gone](missing.md) [bad](other.md#nothing)\n"
                    "```\n[in code](ignored.md)\n```\n", encoding="utf-8")
    assert broken_links(page) == ["missing.md: no such file", "other.md#nothing: no heading #nothing in other.md"]
