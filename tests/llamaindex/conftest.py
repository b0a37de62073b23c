"""A small dated corpus of files in its own site, shared by the LlamaIndex tests of a module."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from filebuilders import ingest_dated_files

FILES = [  # name, date, text
    ("pumps/pump_manual.md", "2024-01-15",
     "# Pump manual\n\nThe centrifugal pump must be primed before start. Check the impeller every 500 hours."),
    ("pumps/pump_log.txt", "2024-02-10", "Maintenance log: the pump impeller was replaced in February."),
    ("hr/holidays.md", "2024-03-05", "# Holidays\n\nEmployees get 25 days of paid holiday per year."),
    ("hr/budget.csv", "2023-12-20", "item,amount\ntraining,1200\ntravel,800"),
]


@pytest.fixture(scope="module")
def corpus(wb, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(site id, folder) of the ingested FILES; the documents are deleted afterwards."""
    root = tmp_path_factory.mktemp("li-corpus")
    site_id = ingest_dated_files(wb, root, FILES, "t-li")
    yield site_id, root.resolve()
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))


@pytest.fixture
def table_name(pg_url: str):
    """A fresh PGVectorStore table name; its data_<name> table is dropped afterwards."""
    name = f"li_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS data_{name}")
