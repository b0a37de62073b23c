"""The one pattern every session, user and site id must match before it is used.

An id is used verbatim: never stripped or case-folded on its way to the database, so the id whose
ownership was checked is the id that is read and written. Whitespace, control characters and
anything else outside the pattern are refused instead of being cleaned up.
"""

from __future__ import annotations

import re

from rag_core.errors import InvalidInput
from rag_core.limits import MAX_ID_CHARS

# Letters, digits and a few separators (`eval:scifact`, `ext-…`, `auth0|42`, `a@b.c`); at most 200 characters.
ID_PATTERN = rf"^[A-Za-z0-9_][A-Za-z0-9_.:@|+=~-]{{0,{MAX_ID_CHARS - 1}}}$"
ID_RULE = ("1-200 characters: letters, digits and _ . : @ | + = ~ -, starting with a letter, digit or _; "
           "no spaces")
_ID = re.compile(ID_PATTERN[1:-1])

# The site (tenant) documents, sessions and judgements belong to when none is named.
DEFAULT_SITE = "default"
# The first-run sample corpus (the project's README and docs) lives apart from a user's documents.
SAMPLE_SITE = "sample"
# Evaluation sets live in sites with this prefix.
EVAL_SITE_PREFIX = "eval:"


def every_site_sql(column: str) -> str:
    """The SQL condition on a site column for 'every site': a user's own sites, never the evaluation sites
    nor the sample corpus (a query with parameters: the % is doubled)."""
    return f"({column} NOT LIKE '{EVAL_SITE_PREFIX}%%' AND {column} <> '{SAMPLE_SITE}')"


def is_users_site(site_id: str) -> bool:
    """Whether `site_id` belongs to 'every site' (neither an evaluation site nor the sample)."""
    return not site_id.startswith(EVAL_SITE_PREFIX) and site_id != SAMPLE_SITE


def is_valid_id(value: object) -> bool:
    """Whether `value` is a string matching ID_PATTERN."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def check_id(value: str, field: str) -> str:
    """Return `value` unchanged when it is a valid id; otherwise raise InvalidInput naming the rule."""
    if not is_valid_id(value):
        shown = repr(value)[:60] if isinstance(value, str) else type(value).__name__
        raise InvalidInput(f"{field} {shown} is not a valid id: use {ID_RULE}.",
                           details={"field": field, "allowed": ID_RULE})
    return value


def check_users_site(value: str, field: str = "site_id") -> str:
    """check_id for a site a user writes into: the evaluation sets' prefix is reserved (their documents would be
    hidden from every search of 'every site')."""
    check_id(value, field)
    if value.startswith(EVAL_SITE_PREFIX):
        raise InvalidInput(f"{field} '{value}' starts with '{EVAL_SITE_PREFIX}', which is reserved for the evaluation "
                           "sets (`rag eval`); choose another site id.",
                           details={"field": field, "reserved": EVAL_SITE_PREFIX})
    return value


def valid_id(value: str | None) -> str | None:
    """The pydantic form of the check (REST bodies, query strings and paths, MCP tool arguments)."""
    if value is not None and not is_valid_id(value):
        raise ValueError(f"not a valid id; use {ID_RULE}")
    return value


def check_optional_id(value: str | None, field: str) -> str | None:
    """check_id for a value that may be None (not given)."""
    return None if value is None else check_id(value, field)
