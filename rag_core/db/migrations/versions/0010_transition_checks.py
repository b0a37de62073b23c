"""The chunks UPDATE triggers check their transition tables with a hash join: an UPDATE is linear in its rows.

`rag_chunks_stats_changed` (0002) and `rag_chunks_postings_changed` (0003) first ask whether an update changed
anything they keep (an update of embeddings alone leaves statistics and postings as they are). They asked it
as `IF NOT EXISTS (SELECT 1 FROM old JOIN new ON id WHERE <a column differs>)`: an EXISTS is planned for its
first row, and with a transition table's row count the planner chose a nested loop that compares every old row
with every new one when nothing differs. An UPDATE of 2,000 chunks spent 0.45 s in each check, one of 4,000
chunks 17 s in all (7,770-chunk store), and `UPDATE chunks SET embedding = NULL` over a whole store would
have run for hours. Asked as an aggregate over the join (`bool_or`), the check is planned for all its rows:
a hash join, and the 4,000-chunk UPDATE takes what its indexes take (2.8 s; 3.3 to 3.5 s with the triggers
off, the same within the machine's noise).

Only the check changes; the function bodies are otherwise the ones their migrations wrote, rewritten here in
place (`pg_get_functiondef`) so that they are not copied twice.

Revision ID: 0010_transition_checks
Revises: 0009_source_vector_indexes
Create Date: 2026-11-29
"""

from __future__ import annotations

import re
from collections.abc import Callable

from alembic import op

revision = "0010_transition_checks"
down_revision = "0009_source_vector_indexes"
branch_labels = None
depends_on = None

FUNCTIONS = ("rag_chunks_stats_changed", "rag_chunks_postings_changed")
_JOIN = "FROM rag_old_chunks o JOIN rag_new_chunks n ON n.id = o.id"
_EXISTS = re.compile(r"IF NOT EXISTS \(\s*SELECT 1 " + re.escape(_JOIN) + r"\s+WHERE (?P<differs>.*?)\s*\) THEN", re.S)
_AGGREGATE = re.compile(r"IF NOT coalesce\(\(SELECT bool_or\((?P<differs>.*?)\) " + re.escape(_JOIN)
                        + r"\), false\) THEN", re.S)


def _as_aggregate(match: re.Match[str]) -> str:
    return f"IF NOT coalesce((SELECT bool_or({' '.join(match['differs'].split())}) {_JOIN}), false) THEN"


def _as_exists(match: re.Match[str]) -> str:
    return f"IF NOT EXISTS (SELECT 1 {_JOIN} WHERE {match['differs']}) THEN"


def _rewrite(pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> None:
    conn = op.get_bind()
    for name in FUNCTIONS:
        source = conn.exec_driver_sql(f"SELECT pg_get_functiondef('{name}'::regproc)").scalar_one()
        rewritten, found = pattern.subn(replace, source)
        if found != 1:
            raise RuntimeError(f"{name}() does not hold the check this migration rewrites; its definition was "
                               "changed by hand. Restore it from migrations 0002/0003, then upgrade again.")
        conn.exec_driver_sql(rewritten)


def upgrade() -> None:
    _rewrite(_EXISTS, _as_aggregate)


def downgrade() -> None:
    _rewrite(_AGGREGATE, _as_exists)
