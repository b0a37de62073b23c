"""Fixtures for the attack tests: what a site's chunks hold after an attack."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture
def stored_text(wb) -> Callable[[str], str]:
    """Every stored source and chunk of a site as one text: an attack's payload must not be in it."""

    def read(site: str) -> str:
        with wb.db.connection() as conn:
            rows = conn.execute("SELECT d.source, c.text FROM chunks c JOIN documents d ON d.id = c.document_id "
                                "WHERE d.site_id = %s", (site,)).fetchall()
        return "\n".join(f"{source}\n{text}" for source, text in rows)

    return read
