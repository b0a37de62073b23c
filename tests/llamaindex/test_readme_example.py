"""The README's "Use it from LlamaIndex" example runs as written, against the test database."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs(cli_env, wb, capsys) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use it from LlamaIndex", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    assert len(example.strip().splitlines()) <= 12
    namespace: dict = {}
    try:
        exec(compile(example, "README.md", "exec"), namespace)
        printed = capsys.readouterr().out
        assert "## Sources\n1. [" in printed and "## Answer" in printed
        assert namespace["hits"] and namespace["index"].vector_store is not None
        assert [m["role"] for m in wb.chat_history("notebook-1")] == ["user", "assistant"]
    finally:
        if "wb" in namespace:
            namespace["wb"].close()
        wb.chat_reset("notebook-1")
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id = 'docs'")
