"""What every REST endpoint declares: the caller (key and rate limit), the Workbench, and the checked ids."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import anyio.to_thread
import orjson
from fastapi import Depends, Path, Query, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import AfterValidator

from rag_core.api import schemas as s
from rag_core.api.auth import KeyRing, Principal, refuse_key_in_query
from rag_core.api.ratelimit import RateLimiter
from rag_core.errors import (
    InvalidInput, Unauthorized,
)
from rag_core.limits import MAX_ID_CHARS
from rag_core.security.ids import valid_id
from rag_core.security.text import text_problem
from rag_core.workbench import Workbench


_bearer = HTTPBearer(auto_error=False, description="An API key from RAG_API_KEYS or RAG_ADMIN_API_KEY.")
_header_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key, as a header.")


# ----- access -----
class FastJSONResponse(JSONResponse):
    """JSON rendered by orjson, several times faster than the json module on a search page (eval/bench_service.py)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _client(request: Request) -> str:
    return f"ip:{request.client.host if request.client else 'unknown'}"


async def get_caller(request: Request,
                     bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None,
                     header_key: Annotated[str | None, Security(_header_key)] = None) -> Principal:
    """Authenticate the key and count the request against the caller's rate limit.

    Async, so a request does not queue for a worker thread twice; only a Redis round trip goes to a thread.
    """
    keys: KeyRing = request.app.state.keys
    token = header_key or (bearer.credentials if bearer else None)
    try:
        caller = _authenticate(request, token)
    except Unauthorized:
        await _hit(request, _client(request))  # guessing keys is limited per address
        raise
    await _hit(request, _client(request) if keys.open else caller.identity)
    return caller


def _authenticate(request: Request, token: str | None) -> Principal:
    refuse_key_in_query(request.query_params.keys())
    return request.app.state.keys.authenticate(token)


async def _hit(request: Request, identity: str) -> None:
    limiter: RateLimiter = request.app.state.limiter
    if limiter.shared:
        await anyio.to_thread.run_sync(limiter.hit, identity)
    else:
        limiter.hit(identity)


def header_token(request: Request) -> str | None:
    """The key of a request's headers, read as the endpoints' security schemes read it."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    scheme, credentials = get_authorization_scheme_param(request.headers.get("authorization"))
    return (credentials or None) if scheme.lower() == "bearer" else None


async def refuse_before_body(request: Request) -> None:
    """Raise Unauthorized, counted against the client's address, when a request's headers carry no valid key.

    For a route whose body FastAPI reads before it resolves the caller (a multipart upload): without this, anyone
    could make the server spool an upload to disk before hearing 401. A valid key is counted later, once, by
    `get_caller`.
    """
    try:
        _authenticate(request, header_token(request))
    except Unauthorized:
        await _hit(request, _client(request))
        raise


async def get_workbench(request: Request) -> Workbench:
    return request.app.state.workbench


Caller = Annotated[Principal, Depends(get_caller)]
WorkbenchDep = Annotated[Workbench, Depends(get_workbench)]
# Ids in query strings and paths: the same pattern as in bodies (rag_core.security.ids).
SiteQuery = Annotated[str | None, Query(max_length=MAX_ID_CHARS, json_schema_extra=s.ID_SCHEMA,
                                        description="Only this site."), AfterValidator(valid_id)]
UserQuery = Annotated[str | None, Query(max_length=MAX_ID_CHARS, json_schema_extra=s.ID_SCHEMA),
                      AfterValidator(valid_id)]
SessionPath = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, json_schema_extra=s.ID_SCHEMA),
                        AfterValidator(valid_id)]


JobPath = Annotated[int, Path(ge=1, description="The job id a 202 answered with.")]
Background = Annotated[bool, Query(description="Queue a job and answer 202 with its id at once, instead of "
                                               "waiting for the work; GET /jobs/{job_id} follows it.")]


TextOrNone = TypeVar("TextOrNone", bound=str | None)


def _text(value: TextOrNone, name: str) -> TextOrNone:
    """Query and path text PostgreSQL can store (the bodies' fields are checked by their models)."""
    problem = text_problem(value) if value is not None else None
    if problem:
        raise InvalidInput(f"{name} {problem}.", details={"field": name})
    return value
