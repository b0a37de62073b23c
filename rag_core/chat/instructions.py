"""Agent instructions per site and resource, with versions (table agent_instructions, the workflow-service spec).

Updating writes a new version and makes it the only active one of its resource; older versions stay
for the record and can be activated again. The active instruction becomes the chat's system prompt.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from typing_extensions import TypedDict

from rag_core.db.database import Database
from rag_core.errors import InvalidInput, NotFound

_COLUMNS = "id, site_id, resource_name, instruction_text, version, is_active, created_at, updated_at"
MAX_CHARS = 100_000


class Instruction(TypedDict):
    """One version of an agent instruction; the active version of a resource is its chats' system prompt."""

    id: int
    site_id: str
    resource_name: str
    instruction_text: str
    version: int
    is_active: bool
    created_at: datetime
    updated_at: datetime


def _row(row: Sequence[Any]) -> Instruction:
    return Instruction(id=row[0], site_id=row[1], resource_name=row[2], instruction_text=row[3], version=row[4],
                       is_active=row[5], created_at=row[6], updated_at=row[7])


def _check(site_id: str, resource_name: str, text: str | None = None) -> tuple[str, str]:
    if not site_id or not site_id.strip():
        raise InvalidInput("site_id is empty; give the site the instruction belongs to.")
    if not resource_name or not resource_name.strip():
        raise InvalidInput("resource_name is empty; name the agent or resource, e.g. 'Support Chatbot'.")
    if text is not None:
        if not text.strip():
            raise InvalidInput("instruction_text is empty; write the system instruction for the agent.")
        if len(text) > MAX_CHARS:
            raise InvalidInput(f"instruction_text is {len(text)} characters; the limit is {MAX_CHARS}.")
    return site_id.strip(), resource_name.strip()


def _lock(conn: Any, site_id: str, resource_name: str) -> None:
    # Two writers of one resource must not pick the same next version number.
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (f"{site_id}\x1f{resource_name}",))


def save_instruction(db: Database, site_id: str, resource_name: str, instruction_text: str, *,
                     must_exist: bool | None = None) -> Instruction:
    """Write the next version of a resource's instruction and make it the active one.

    Args:
        must_exist: True for an update (the resource must exist), False for a create (it must not),
            None for either.
    """
    site_id, resource_name = _check(site_id, resource_name, instruction_text)
    with db.connection() as conn:
        with conn.transaction():
            _lock(conn, site_id, resource_name)
            latest = conn.execute("SELECT max(version) FROM agent_instructions WHERE site_id = %s AND resource_name = %s",
                                  (site_id, resource_name)).fetchone()[0]
            if must_exist is True and latest is None:
                raise NotFound(f"No instruction '{resource_name}' for site '{site_id}'; create it first.")
            if must_exist is False and latest is not None:
                raise InvalidInput(f"Instruction '{resource_name}' already exists for site '{site_id}' "
                                   f"(version {latest}); update it to write version {latest + 1}.")
            conn.execute("UPDATE agent_instructions SET is_active = false, updated_at = now()"
                         " WHERE site_id = %s AND resource_name = %s AND is_active", (site_id, resource_name))
            row = conn.execute(
                f"INSERT INTO agent_instructions (site_id, resource_name, instruction_text, version, is_active)"
                f" VALUES (%s, %s, %s, %s, true) RETURNING {_COLUMNS}",
                (site_id, resource_name, instruction_text, (latest or 0) + 1)).fetchone()
    return _row(row)


def list_instructions(db: Database, site_id: str, resource_name: str | None = None,
                      all_versions: bool = False) -> list[Instruction]:
    """A site's instructions: the latest version of each resource, or every version."""
    latest_only = "" if all_versions else (
        " AND version = (SELECT max(version) FROM agent_instructions i2"
        " WHERE i2.site_id = i.site_id AND i2.resource_name = i.resource_name)")
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM agent_instructions i WHERE site_id = %(site)s"
            f" AND (%(res)s::text IS NULL OR resource_name = %(res)s){latest_only}"
            " ORDER BY resource_name, version DESC", {"site": site_id, "res": resource_name}).fetchall()
    return [_row(r) for r in rows]


def get_instruction(db: Database, site_id: str, resource_name: str, version: int | None = None) -> Instruction:
    """One version of a resource's instruction (the latest when no version is given)."""
    with db.connection() as conn:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM agent_instructions WHERE site_id = %(site)s AND resource_name = %(res)s"
            " AND (%(v)s::int IS NULL OR version = %(v)s) ORDER BY version DESC LIMIT 1",
            {"site": site_id, "res": resource_name, "v": version}).fetchone()
    if not row:
        what = f"version {version} of " if version is not None else ""
        raise NotFound(f"No {what}instruction '{resource_name}' for site '{site_id}'.")
    return _row(row)


def active_instruction(db: Database, site_id: str, resource_name: str | None = None) -> Instruction | None:
    """The active instruction of a resource, or without one the site's most recently updated active one."""
    with db.connection() as conn:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM agent_instructions WHERE site_id = %(site)s AND is_active"
            " AND (%(res)s::text IS NULL OR resource_name = %(res)s)"
            " ORDER BY updated_at DESC, id DESC LIMIT 1", {"site": site_id, "res": resource_name}).fetchone()
    return _row(row) if row else None


def activate_instruction(db: Database, site_id: str, resource_name: str, version: int) -> Instruction:
    """Make an earlier version the active one again (a rollback)."""
    with db.connection() as conn:
        with conn.transaction():
            _lock(conn, site_id, resource_name)
            exists = conn.execute("SELECT 1 FROM agent_instructions WHERE site_id = %s AND resource_name = %s"
                                  " AND version = %s", (site_id, resource_name, version)).fetchone()
            if not exists:
                raise NotFound(f"No version {version} of instruction '{resource_name}' for site '{site_id}'.")
            conn.execute("UPDATE agent_instructions SET is_active = (version = %s), updated_at = now()"
                         " WHERE site_id = %s AND resource_name = %s", (version, site_id, resource_name))
            row = conn.execute(f"SELECT {_COLUMNS} FROM agent_instructions WHERE site_id = %s AND resource_name = %s"
                               " AND version = %s", (site_id, resource_name, version)).fetchone()
    return _row(row)


def delete_instruction(db: Database, site_id: str, resource_name: str, version: int | None = None) -> int:
    """Delete every version of a resource's instruction, or one version; returns the rows deleted.

    Deleting the active version makes the newest remaining version active.
    """
    with db.connection() as conn:
        with conn.transaction():
            _lock(conn, site_id, resource_name)
            deleted = conn.execute(
                "DELETE FROM agent_instructions WHERE site_id = %(site)s AND resource_name = %(res)s"
                " AND (%(v)s::int IS NULL OR version = %(v)s)",
                {"site": site_id, "res": resource_name, "v": version}).rowcount
            if version is not None and deleted:
                conn.execute(
                    "UPDATE agent_instructions SET is_active = true, updated_at = now()"
                    " WHERE site_id = %(site)s AND resource_name = %(res)s"
                    " AND NOT EXISTS (SELECT 1 FROM agent_instructions WHERE site_id = %(site)s"
                    "                 AND resource_name = %(res)s AND is_active)"
                    " AND version = (SELECT max(version) FROM agent_instructions WHERE site_id = %(site)s"
                    "                AND resource_name = %(res)s)", {"site": site_id, "res": resource_name})
    if not deleted:
        what = f"version {version} of " if version is not None else ""
        raise NotFound(f"No {what}instruction '{resource_name}' for site '{site_id}'.")
    return deleted
